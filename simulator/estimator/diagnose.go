package estimator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// Diagnoser says which claim constraint keeps a pod off a group's template
// node when DynamicResources rejects it there (framework.DiagnoseClaims on
// a fresh node of the template). Verdicts are memoised per group and claim
// shape: pods whose claims ask for the same devices get one diagnosis. A
// group's memo is dropped when its template changes (a new template object
// each loop when templates are rebuilt).
type Diagnoser struct {
	runner *framework.Runner
	mu     sync.Mutex
	groups map[string]*groupMemo
	// Calls counts diagnoses run through the framework (memo misses).
	Calls int
}

// maxDiagnoses bounds one group's memo; claim shapes number in the dozens,
// so it is simply dropped when it grows past this.
const maxDiagnoses = 1024

type groupMemo struct {
	tmpl   *cloudprovider.NodeTemplate
	blames map[string][]framework.Blame
}

// NewDiagnoser returns a diagnoser on runner's snapshot.
func NewDiagnoser(runner *framework.Runner) *Diagnoser {
	return &Diagnoser{runner: runner, groups: map[string]*groupMemo{}}
}

// Diagnose returns the constraints to blame for pod on a new node of group
// (see framework.DiagnoseClaims); nil when none is. The snapshot is left
// as it was.
func (d *Diagnoser) Diagnose(ctx context.Context, pod *v1.Pod, group string, tmpl *cloudprovider.NodeTemplate) (_ []framework.Blame, err error) {
	if tmpl == nil || tmpl.Node == nil {
		return nil, fmt.Errorf("diagnose for group %s: no template", group)
	}
	key, ok := d.claimShape(pod)
	if !ok {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.groups[group]
	if m == nil || m.tmpl != tmpl || len(m.blames) >= maxDiagnoses {
		m = &groupMemo{tmpl: tmpl, blames: map[string][]framework.Blame{}}
		d.groups[group] = m
	}
	if b, ok := m.blames[key]; ok {
		return d.withPodClaims(pod, b), nil
	}
	snap := d.runner.Snapshot()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("diagnose for group %s: revert snapshot: %w", group, rerr)
		}
	}()
	name := group + "-diagnose"
	for i := 0; snap.HasNode(name); i++ {
		name = fmt.Sprintf("%s-diagnose-%d", group, i)
	}
	if err := template.AddInstance(ctx, d.runner, template.WithLaunchLabels(tmpl, "new request opened by "+name), name); err != nil {
		return nil, fmt.Errorf("diagnose for group %s: %w", group, err)
	}
	d.Calls++
	b, err := d.runner.DiagnoseClaims(ctx, pod, name)
	if err != nil {
		return nil, fmt.Errorf("diagnose for group %s: %w", group, err)
	}
	m.blames[key] = b
	return d.withPodClaims(pod, b), nil
}

// Volumes says what about pod's volumes keeps it off a new node of the
// template (see framework.DescribeVolumes).
func (d *Diagnoser) Volumes(pod *v1.Pod, tmpl *cloudprovider.NodeTemplate) string {
	if tmpl == nil {
		return ""
	}
	return d.runner.DescribeVolumes(pod, tmpl.Node)
}

// withPodClaims copies blames for pod, without the simulated claim names
// (they belong to the pod diagnosed first), and with pod's own PodGroup
// on a claim of the group (the memo's is the first pod's).
func (d *Diagnoser) withPodClaims(pod *v1.Pod, b []framework.Blame) []framework.Blame {
	if b == nil {
		return nil
	}
	out := make([]framework.Blame, len(b))
	group := ""
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		group = *g.PodGroupName
	}
	for i, x := range b {
		out[i] = framework.Blame{PodClaim: x.PodClaim, Constraint: x.Constraint, Shortage: x.Shortage, AtMost: x.AtMost}
		if x.PodGroup != "" {
			out[i].PodGroup = group
		}
	}
	return out
}

// claimShape is what decides a diagnosis: the pod's claims by pod-claim
// name and the specs they ask for (a template's, or the claim's own). ok
// is false for a pod without claims.
func (d *Diagnoser) claimShape(pod *v1.Pod) (string, bool) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return "", false
	}
	snap := d.runner.Snapshot()
	var b strings.Builder
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		b.WriteString(pc.Name)
		if framework.GroupClaimOwner(snap, pod, pc) != nil {
			// One claim for the group: diagnosed apart from a claim of
			// the pod's own with the same spec.
			b.WriteString("@group")
		}
		b.WriteByte('=')
		var spec any
		switch {
		case pc.ResourceClaimTemplateName != nil:
			if t, ok := snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName); ok {
				spec = t.Spec.Spec
			}
		case pc.ResourceClaimName != nil:
			if c, ok := snap.ResourceClaim(pod.Namespace, *pc.ResourceClaimName); ok {
				spec = c.Spec
			}
		}
		data, _ := json.Marshal(spec)
		b.Write(data)
		b.WriteByte(';')
	}
	return b.String(), true
}

// Diagnoser returns a diagnoser on the estimator's snapshot.
func (e *Estimator) Diagnoser() *Diagnoser { return NewDiagnoser(e.runner) }
