package vet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
)

// missing names references of unbound pods (and of PodGroups) to objects
// that do not exist. The scheduler holds such pods back without saying
// so (they never become unschedulable), so no scale-up can help them and
// nobody would hear why.
func missing(state *observe.ClusterState) []Finding {
	// The sets are made on first use: an idle pass has no unbound pod.
	claims, templates := lazyPresent(state.ResourceClaims), lazyPresent(state.ResourceClaimTemplates)
	groups, workloads := lazyPresent(state.PodGroups), lazyPresent(state.Workloads)
	var out []Finding
	add := func(p *corev1.Pod, format string, args ...any) {
		out = append(out, Finding{Object: p, Reason: ReasonMissingReference, Message: fmt.Sprintf(format, args...) +
			": the scheduler holds the pod back until it exists, and no new node can help"})
	}
	for _, p := range state.Pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.ResourceClaims {
			switch {
			case c.ResourceClaimName != nil && !claims(p.Namespace+"/"+*c.ResourceClaimName):
				add(p, "pod claim %q names ResourceClaim %q, which does not exist", c.Name, *c.ResourceClaimName)
			case c.ResourceClaimTemplateName != nil && !generated(p, c.Name) && !templates(p.Namespace+"/"+*c.ResourceClaimTemplateName):
				add(p, "pod claim %q names ResourceClaimTemplate %q, which does not exist", c.Name, *c.ResourceClaimTemplateName)
			}
		}
		if g := p.Spec.SchedulingGroup; state.GangsServed && g != nil && g.PodGroupName != nil && *g.PodGroupName != "" &&
			!groups(p.Namespace+"/"+*g.PodGroupName) {
			add(p, "PodGroup %q does not exist", *g.PodGroupName)
		}
	}
	if !state.GangsServed {
		return out
	}
	for _, g := range state.PodGroups {
		if ref := g.Spec.WorkloadRef; ref != nil && ref.WorkloadName != "" && !workloads(g.Namespace+"/"+ref.WorkloadName) {
			out = append(out, Finding{Object: g, Reason: ReasonMissingReference,
				Message: fmt.Sprintf("names Workload %q, which does not exist", ref.WorkloadName)})
		}
	}
	return out
}

// generated: the claim controller made the pod's claim from its template
// already (the template may be gone since; the claim is what counts).
func generated(p *corev1.Pod, podClaim string) bool {
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == podClaim && st.ResourceClaimName != nil {
			return true
		}
	}
	return false
}

// lazyPresent answers whether objs has an object of this namespace/name,
// making the set (present) on the first question.
func lazyPresent[T metav1.Object](objs []T) func(key string) bool {
	var set map[string]bool
	return func(key string) bool {
		if set == nil {
			set = present(objs)
		}
		return set[key]
	}
}

// present is the set of the objects' namespace/name.
func present[T metav1.Object](objs []T) map[string]bool {
	out := make(map[string]bool, len(objs))
	for _, o := range objs {
		out[o.GetNamespace()+"/"+o.GetName()] = true
	}
	return out
}
