package buffers

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// deviceQuotaSuffix ends the ResourceQuota key that counts the devices
// claims in a namespace take from a DeviceClass
// ("<class>.deviceclass.resource.k8s.io/devices").
const deviceQuotaSuffix = ".deviceclass.resource.k8s.io/devices"

// quotas is the room left in one namespace's ResourceQuotas, taken from
// as the namespace's buffers are served in turn, so two buffers cannot
// both count the same room.
type quotas struct {
	items []*quotaRoom
}

type quotaRoom struct {
	name string
	left map[corev1.ResourceName]resource.Quantity
}

// newQuotas keeps the quotas without scopes (the scoped ones apply only to
// pods of some priority class or QoS; buffers are not held to them) and
// their room: hard less used.
func newQuotas(list []*corev1.ResourceQuota) *quotas {
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	q := &quotas{}
	for _, rq := range list {
		if len(rq.Spec.Scopes) > 0 || rq.Spec.ScopeSelector != nil {
			continue
		}
		room := &quotaRoom{name: rq.Name, left: map[corev1.ResourceName]resource.Quantity{}}
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
		q.items = append(q.items, room)
	}
	return q
}

// take cuts want to what the quotas leave room for, takes that room and
// says which quota cut it ("" if none).
func (q *quotas) take(want int32, usage map[corev1.ResourceName]resource.Quantity) (int32, string) {
	n := int64(want)
	var why []string
	for _, room := range q.items {
		for name, per := range usage {
			left, ok := room.left[name]
			if !ok || per.Sign() <= 0 {
				continue
			}
			k := fits(left, per)
			if k < n {
				n = k
			}
			if k < int64(want) {
				why = append(why, fmt.Sprintf("%s: %s has room for %d (%s left, %s each)", room.name, name, max(k, 0), left.String(), per.String()))
			}
		}
	}
	n = max(n, 0)
	for _, room := range q.items {
		for name, per := range usage {
			if left, ok := room.left[name]; ok {
				total := per.DeepCopy()
				total.Mul(n)
				left.Sub(total)
				room.left[name] = left
			}
		}
	}
	sort.Strings(why)
	return int32(n), strings.Join(why, "; ")
}

// quotaUsage is what one pod of the template counts against each quota
// key: pods, requests and limits of CPU, memory, storage and extended
// resources, and the devices its template claims take from each class.
func quotaUsage(t *corev1.PodTemplateSpec, claimTemplate func(name string) *resourceapi.ResourceClaimTemplate) map[corev1.ResourceName]resource.Quantity {
	pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	out := map[corev1.ResourceName]resource.Quantity{
		corev1.ResourcePods: resource.MustParse("1"),
		"count/pods":        resource.MustParse("1"),
	}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		out[corev1.ResourceName("requests."+string(name))] = q
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			out[name] = q
		}
	}
	for name, q := range resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}) {
		out[corev1.ResourceName("limits."+string(name))] = q
	}
	devices := map[string]int64{}
	for _, pc := range t.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil || claimTemplate == nil {
			continue // a shared claim exists already and is counted
		}
		ct := claimTemplate(*pc.ResourceClaimTemplateName)
		if ct == nil {
			continue
		}
		for _, r := range ct.Spec.Spec.Devices.Requests {
			if r.Exactly == nil || r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll {
				// All (as many as there are) and prioritized lists have
				// no count known before allocation.
				continue
			}
			n := r.Exactly.Count
			if n == 0 {
				n = 1
			}
			devices[r.Exactly.DeviceClassName] += n
		}
	}
	for class, n := range devices {
		out[corev1.ResourceName(class+deviceQuotaSuffix)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}
