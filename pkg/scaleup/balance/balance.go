// Package balance spreads a scale-up over similar node groups, as the
// upstream cluster autoscaler does with --balance-similar-node-groups:
// groups whose new nodes would be alike (typically one group per zone)
// grow together, the smallest first, so that they stay even.
//
// Two groups are similar when their templates have the same capacity
// (memory within 1.5%), allocatable within 5%, the same DRA devices
// (the template's ResourceSlices, compared without names of nodes, pools
// and devices) and the same labels aside from the ignored ones. With
// --balancing-label only those labels are compared, nothing else.
package balance

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Upstream's fixed tolerances between similar groups.
const (
	memoryRatio      = 0.015
	allocatableRatio = 0.05
)

// IgnoredLabels may always differ between similar groups: where a node is
// and what it is called (upstream ignores the same ones).
var IgnoredLabels = []string{
	corev1.LabelHostname,
	corev1.LabelTopologyZone,
	corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone,
	corev1.LabelFailureDomainBetaRegion,
	"beta.kubernetes.io/fluentd-ds-ready",
	"kops.k8s.io/instancegroup",
}

// Similarity says which node groups are similar.
type Similarity struct {
	ignored map[string]bool
	labels  []string
}

// New returns the comparison: only labels when labels is not empty, else
// the templates' shape and every label but IgnoredLabels and ignore.
// ignore also takes the providers' own per-group labels (the group name).
func New(labels, ignore []string) *Similarity {
	s := &Similarity{ignored: map[string]bool{}, labels: slices.Clone(labels)}
	for _, l := range IgnoredLabels {
		s.ignored[l] = true
	}
	for _, l := range ignore {
		s.ignored[l] = true
	}
	return s
}

// Similar tells whether new nodes of a and b are interchangeable.
func (s *Similarity) Similar(a, b *cloudprovider.NodeTemplate) bool {
	if a == nil || b == nil || a.Node == nil || b.Node == nil {
		return false
	}
	if len(s.labels) > 0 {
		for _, l := range s.labels {
			va, oka := a.Node.Labels[l]
			vb, okb := b.Node.Labels[l]
			if oka != okb || va != vb {
				return false
			}
		}
		return true
	}
	return s.sameLabels(a.Node.Labels, b.Node.Labels) &&
		sameCapacity(a.Node.Status.Capacity, b.Node.Status.Capacity) &&
		within(a.Node.Status.Allocatable, b.Node.Status.Allocatable, func(corev1.ResourceName) float64 { return allocatableRatio }) &&
		sameDevices(a.ResourceSlices, b.ResourceSlices)
}

func (s *Similarity) sameLabels(a, b map[string]string) bool {
	for k, v := range a {
		if s.ignored[k] {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !s.ignored[k] {
			return false
		}
	}
	return true
}

// sameCapacity: the same resources, equal but for memory, which may
// differ by memoryRatio (machines of one type report slightly different
// memory).
func sameCapacity(a, b corev1.ResourceList) bool {
	return within(a, b, func(name corev1.ResourceName) float64 {
		if name == corev1.ResourceMemory {
			return memoryRatio
		}
		return 0
	})
}

// within: the same resource names, each pair within ratio(name) of the
// smaller value.
func within(a, b corev1.ResourceList, ratio func(corev1.ResourceName) float64) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok {
			return false
		}
		if !near(qa, qb, ratio(name)) {
			return false
		}
	}
	return true
}

func near(a, b resource.Quantity, ratio float64) bool {
	if ratio == 0 {
		return a.Cmp(b) == 0
	}
	fa, fb := a.AsApproximateFloat64(), b.AsApproximateFloat64()
	return math.Abs(fa-fb) <= ratio*math.Min(fa, fb)
}

// sameDevices compares the templates' slices as multisets of their
// drivers, devices and counters; the names of the node, the pool and the
// devices are where a device is, not what it is.
func sameDevices(a, b []*resourceapi.ResourceSlice) bool {
	ka, kb := deviceKeys(a), deviceKeys(b)
	return slices.Equal(ka, kb)
}

func deviceKeys(rs []*resourceapi.ResourceSlice) []string {
	keys := make([]string, 0, len(rs))
	for _, s := range rs {
		devices := make([]string, 0, len(s.Spec.Devices))
		for _, d := range s.Spec.Devices {
			d = *d.DeepCopy()
			d.Name = ""
			devices = append(devices, marshal(d))
		}
		sort.Strings(devices)
		keys = append(keys, fmt.Sprintf("%s|%s|%s", s.Spec.Driver, devices, marshal(s.Spec.SharedCounters)))
	}
	sort.Strings(keys)
	return keys
}

// marshal is a canonical text of API values (json sorts map keys).
func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// API types always marshal; a failure compares unequal to
		// everything but itself, which only makes groups dissimilar.
		return "unmarshalable: " + err.Error()
	}
	return string(b)
}

// Group is a node group a scale-up may be spread over.
type Group struct {
	ID string
	// Size is the group's size now (requested nodes included) and Max
	// the most it may have.
	Size, Max int
}

// Split spreads delta new nodes over groups: each node goes to the group
// that is smallest with it (ties to the earlier group, so put the chosen
// group first), never beyond a group's Max. The result is by index; its
// sum is below delta only when the groups have no more room.
func Split(groups []Group, delta int) []int {
	out := make([]int, len(groups))
	for range delta {
		best := -1
		for i, g := range groups {
			if g.Size+out[i] >= g.Max {
				continue
			}
			if best < 0 || g.Size+out[i] < groups[best].Size+out[best] {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out[best]++
	}
	return out
}
