package placement

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// PreferFirstAlternative applies the prefer-first-alternative policy to
// the pending pods before they are fitted: a pod whose claims have
// prioritized lists, and whose first alternatives fit an empty node of
// some group, is simulated from here on with its first alternatives only
// (its claims are replaced in the snapshot, which is rebuilt next pass).
// Existing capacity then takes it only where its first choice fits, and
// otherwise the planner adds a node for it. Under the other policies the
// pods are returned as they are. The returned list replaces pods: a pod
// whose claim the controller has not made yet comes back as a copy that
// names the simulated claim.
func (p *Placer) PreferFirstAlternative(ctx context.Context, pods []*corev1.Pod, templates []*cloudprovider.NodeTemplate) []*corev1.Pod {
	if p == nil {
		return pods
	}
	logger := klog.FromContext(ctx)
	if p.Policy != config.PrioritizedListPreferFirstAlternative {
		for _, pod := range pods {
			if _, claims := p.firstAlternativeClaims(pod); len(claims) > 0 && p.firstSeen(pod) {
				logger.V(2).Info("Prioritized list: all alternatives kept; existing capacity first, in the scheduler's order",
					"pod", klog.KObj(pod), "policy", p.Policy)
			}
		}
		return pods
	}
	out := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		restricted, claims := p.firstAlternativeClaims(pod)
		if len(claims) == 0 {
			out = append(out, pod)
			continue
		}
		fits, err := p.fitsSomeTemplate(ctx, restricted, claims, templates)
		if err != nil {
			logger.Error(err, "Prioritized list: checking the first alternative failed; keeping all alternatives", "pod", klog.KObj(pod))
			out = append(out, pod)
			continue
		}
		if !fits {
			logger.V(2).Info("Prioritized list: first alternative fits no node group; keeping all alternatives",
				"pod", klog.KObj(pod), "policy", p.Policy)
			out = append(out, pod)
			continue
		}
		if err := p.store(claims); err != nil {
			logger.Error(err, "Prioritized list: keeping all alternatives", "pod", klog.KObj(pod))
			out = append(out, pod)
			continue
		}
		if p.firstSeen(pod) {
			logger.V(2).Info("Prioritized list: planning for the first alternative, on existing capacity if it fits there, else on a new node",
				"pod", klog.KObj(pod), "policy", p.Policy, "claims", len(claims))
		}
		out = append(out, restricted)
	}
	return out
}

// firstSeen reports whether the policy's choice for pod is logged for
// the first time: it is logged once per pod, not on every pass.
func (p *Placer) firstSeen(pod *corev1.Pod) bool {
	if p.logged == nil || len(p.logged) > 10000 {
		p.logged = map[types.UID]bool{}
	}
	if p.logged[pod.UID] {
		return false
	}
	p.logged[pod.UID] = true
	return true
}

// firstAlternativeClaims returns the pod as the simulation should see it
// and its claims cut to their first alternatives; no claims when the pod
// has no unallocated claim with a prioritized list.
func (p *Placer) firstAlternativeClaims(pod *corev1.Pod) (*corev1.Pod, []*resourceapi.ResourceClaim) {
	snap := p.Runner.Snapshot()
	out := pod
	var claims []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		var claim *resourceapi.ResourceClaim
		if framework.ClaimNotMadeYet(pod, pc) {
			tmpl, ok := snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName)
			if !ok || !fragmentation.HasPrioritizedList(&tmpl.Spec.Spec) {
				continue
			}
			claim = p.Runner.TemplateClaim(pod, pc, tmpl)
			if out == pod {
				cp := *pod
				cp.Status.ResourceClaimStatuses = append([]corev1.PodResourceClaimStatus(nil), pod.Status.ResourceClaimStatuses...)
				out = &cp
			}
			out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses,
				corev1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr.To(claim.Name)})
		} else {
			name, _, err := resourceclaim.Name(pod, pc)
			if err != nil || name == nil {
				continue
			}
			c, ok := snap.ResourceClaim(pod.Namespace, *name)
			if !ok || c.Status.Allocation != nil || !fragmentation.HasPrioritizedList(&c.Spec) {
				continue
			}
			cp := *c
			claim = &cp
		}
		spec, _ := fragmentation.FirstAlternativeOnly(framework.DefaultedSpec(claim))
		claim.Spec = spec
		claims = append(claims, claim)
	}
	return out, claims
}

// fitsSomeTemplate asks the framework whether pod, with claims stored,
// fits an empty node of one of the templates; the snapshot is left as it was.
func (p *Placer) fitsSomeTemplate(ctx context.Context, pod *corev1.Pod, claims []*resourceapi.ResourceClaim, templates []*cloudprovider.NodeTemplate) (ok bool, err error) {
	snap := p.Runner.Snapshot()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("revert: %w", rerr)
		}
	}()
	if err := p.store(claims); err != nil {
		return false, err
	}
	for i, t := range templates {
		name := fmt.Sprintf("first-alternative-probe-%d", i)
		if t == nil || t.Node == nil || snap.HasNode(name) {
			continue
		}
		if err := template.AddInstance(ctx, p.Runner, t, name); err != nil {
			return false, err
		}
		snap.ScopeSlices([]string{name})
		res, err := p.Runner.RunFilters(ctx, deviceProbe(pod), []string{name})
		snap.ScopeSlices(nil)
		if err != nil {
			return false, err
		}
		if len(res) == 1 && res[0].Fits {
			return true, nil
		}
	}
	return false, nil
}

// deviceProbe is pod reduced to its claims and node selection: whether
// the first alternative can exist on a group's node is a question about
// devices, not about the pods (inter-pod affinity) the node would hold.
func deviceProbe(pod *corev1.Pod) *corev1.Pod {
	probe := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy(), Status: corev1.PodStatus{ResourceClaimStatuses: pod.Status.ResourceClaimStatuses}}
	probe.Spec = corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "probe"}},
		Tolerations:    []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		NodeSelector:   pod.Spec.NodeSelector,
		ResourceClaims: pod.Spec.ResourceClaims,
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		probe.Spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
	}
	return probe
}

func (p *Placer) store(claims []*resourceapi.ResourceClaim) error {
	for _, c := range claims {
		if err := p.Runner.Snapshot().SetResourceClaim(c); err != nil {
			return fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return nil
}

// LogChoices logs, for each placed pod with a prioritized list, which
// alternative the simulation gave it and where.
func (p *Placer) LogChoices(ctx context.Context, placed map[*corev1.Pod]string) {
	if p == nil {
		return
	}
	logger := klog.FromContext(ctx)
	if !logger.V(2).Enabled() {
		return
	}
	snap := p.Runner.Snapshot()
	for pod, node := range placed {
		for i := range pod.Spec.ResourceClaims {
			pc := &pod.Spec.ResourceClaims[i]
			var name *string
			if stored, ok := snap.PlacedPod(pod.Namespace, pod.Name); ok {
				name, _, _ = resourceclaim.Name(stored, pc)
			}
			if name == nil {
				continue
			}
			c, ok := snap.ResourceClaim(pod.Namespace, *name)
			if !ok || c.Status.Allocation == nil {
				continue
			}
			var chosen []string
			for _, r := range c.Status.Allocation.Devices.Results {
				if resourceclaim.IsSubRequestRef(r.Request) {
					chosen = append(chosen, r.Request)
				}
			}
			if len(chosen) > 0 {
				logger.V(2).Info("Prioritized list: pod fits existing capacity", "pod", klog.KObj(pod), "node", node,
					"alternatives", strings.Join(dedupe(chosen), ","), "policy", p.Policy)
			}
		}
	}
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
