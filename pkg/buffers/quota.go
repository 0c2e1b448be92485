package buffers

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/utils/clock"
)

// evaluators are the API server's own quota evaluators for pods and
// ResourceClaims (k8s.io/kubernetes/pkg/quota/v1/evaluator/core): a
// buffer's pods are charged, and scoped quotas matched, exactly as the
// quota admission would charge and match a real pod of the template and
// the claims made from its claim templates.
type evaluators struct {
	pod, claim quota.Evaluator
}

// newEvaluators knows the DeviceClasses (an extended resource name maps
// a class to a quota key of its own).
func newEvaluators(classes []*resourceapi.DeviceClass) evaluators {
	ext := extendedresourcecache.NewExtendedResourceCache(klog.Background())
	for _, c := range classes {
		ext.OnAdd(c, true)
	}
	return evaluators{pod: core.NewPodEvaluator(nil, clock.RealClock{}), claim: core.NewResourceClaimEvaluator(nil, ext, nil, nil)}
}

// charge is what one pod of a buffer counts against quotas: the pod's
// own usage, and that of the claims its claim templates make.
type charge struct {
	pod    *corev1.Pod
	pods   corev1.ResourceList
	claims corev1.ResourceList
}

// charge measures one pod of template t in namespace. Every device request
// of its claim templates is charged as the claim evaluator charges a real
// claim: a prioritized list (firstAvailable) takes, per device class, the
// most any of its alternatives asks; allocationMode All takes the most a
// claim may be allocated (resource.k8s.io's AllocationResultsMaxSize, 32),
// which is what the quota admission charges the claim before allocation.
// A claim a pod shares (resourceClaimName) exists already and is counted.
func (ev evaluators) charge(t *corev1.PodTemplateSpec, namespace string, claimTemplate func(name string) *resourceapi.ResourceClaimTemplate) (*charge, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: t.Labels, Annotations: t.Annotations}, Spec: t.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	c := &charge{pod: pod, claims: corev1.ResourceList{}}
	var err error
	if c.pods, err = ev.pod.Usage(pod); err != nil {
		return nil, fmt.Errorf("pod quota usage: %w", err)
	}
	for _, pc := range t.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil || claimTemplate == nil {
			continue
		}
		ct := claimTemplate(*pc.ResourceClaimTemplateName)
		if ct == nil {
			continue // the vet stage tells of a missing template
		}
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}, Spec: ct.Spec.Spec}
		u, err := ev.claim.Usage(claim)
		if err != nil {
			return nil, fmt.Errorf("claim template %s quota usage: %w", ct.Name, err)
		}
		c.claims = quota.Add(c.claims, u)
	}
	return c, nil
}

// against is what the pod counts against one quota whose keys are keys.
// The quota admission charges a pod against a quota whose scopes
// (scopes, scopeSelector: priority class, BestEffort, Terminating,
// CrossNamespacePodAffinity, ...) it matches, and a claim only against a
// quota without scopes (claims match no scope).
func (ev evaluators) against(c *charge, rq *corev1.ResourceQuota, keys []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	add := func(usage corev1.ResourceList, matching []corev1.ResourceName) {
		seen := map[corev1.ResourceName]bool{}
		for _, k := range matching {
			if q, ok := usage[k]; ok && !seen[k] {
				seen[k] = true
				sum := out[k]
				sum.Add(q)
				out[k] = sum
			}
		}
	}
	scopes := scopeSelectors(rq)
	if ev.matchesScopes(c.pod, rq, scopes) {
		add(c.pods, ev.pod.MatchingResources(keys))
	}
	if len(scopes) == 0 {
		add(c.claims, ev.claim.MatchingResources(keys))
	}
	return out
}

// matchesScopes tells whether the pod falls under every scope of the
// quota (none: it does). A selector the evaluator cannot read (the API
// server validates them, so only a quota written around it) holds the pod
// to the quota: the safe side.
func (ev evaluators) matchesScopes(pod *corev1.Pod, rq *corev1.ResourceQuota, scopes []corev1.ScopedResourceSelectorRequirement) bool {
	if len(scopes) == 0 {
		return true
	}
	matched, err := ev.pod.MatchingScopes(pod, scopes)
	if err != nil {
		klog.Background().V(2).Info("ResourceQuota scope not understood; the buffer is held to the quota", "resourceQuota", klog.KObj(rq), "err", err)
		return true
	}
	return len(matched) == len(scopes)
}

// scopeSelectors are the quota's scopes and scope selector, as the quota
// admission reads them (generic.Matches).
func scopeSelectors(rq *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range rq.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if rq.Spec.ScopeSelector != nil {
		out = append(out, rq.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// quotas is the room left in one namespace's ResourceQuotas, taken from
// as the namespace's buffers are served in turn, so two buffers cannot
// both count the same room.
type quotas struct {
	ev    evaluators
	items []*quotaRoom
}

type quotaRoom struct {
	rq   *corev1.ResourceQuota
	left map[corev1.ResourceName]resource.Quantity
	keys []corev1.ResourceName
}

// newQuotas keeps every quota (scoped ones apply to the pods that match
// their scopes) and its room: hard less used.
func newQuotas(list []*corev1.ResourceQuota, ev evaluators) *quotas {
	list = append([]*corev1.ResourceQuota(nil), list...)
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	q := &quotas{ev: ev}
	for _, rq := range list {
		room := &quotaRoom{rq: rq, left: map[corev1.ResourceName]resource.Quantity{}}
		for name, hard := range rq.Status.Hard {
			left := hard.DeepCopy()
			if used, ok := rq.Status.Used[name]; ok {
				left.Sub(used)
			}
			room.left[name] = left
		}
		// A quota the quota controller has not counted yet: its spec is
		// the room (nothing counted as used).
		if len(rq.Status.Hard) == 0 {
			for name, hard := range rq.Spec.Hard {
				room.left[name] = hard.DeepCopy()
			}
		}
		for name := range room.left {
			room.keys = append(room.keys, name)
		}
		sort.Slice(room.keys, func(i, j int) bool { return room.keys[i] < room.keys[j] })
		q.items = append(q.items, room)
	}
	return q
}

// take cuts want to what the quotas leave room for, takes that room and
// says which quota cut it ("" if none).
func (q *quotas) take(want int32, c *charge) (int32, string) {
	n := int64(want)
	var why []string
	per := make([]corev1.ResourceList, len(q.items))
	for i, room := range q.items {
		per[i] = q.ev.against(c, room.rq, room.keys)
		for _, name := range room.keys {
			each, ok := per[i][name]
			if !ok || each.Sign() <= 0 {
				continue
			}
			left := room.left[name]
			k := fits(left, each)
			if k < n {
				n = k
			}
			if k < int64(want) {
				why = append(why, fmt.Sprintf("%s: %s has room for %d (%s left, %s each)", room.rq.Name, name, max(k, 0), left.String(), each.String()))
			}
		}
	}
	n = max(n, 0)
	for i, room := range q.items {
		for name, each := range per[i] {
			total := each.DeepCopy()
			total.Mul(n)
			left := room.left[name]
			left.Sub(total)
			room.left[name] = left
		}
	}
	sort.Strings(why)
	return int32(n), strings.Join(why, "; ")
}
