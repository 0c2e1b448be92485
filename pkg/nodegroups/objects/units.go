package objects

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// maxUnits bounds the units a NodeGroup's status lists.
const maxUnits = 100

// NodeRoom is what a registered node has left, for its unit's room.
type NodeRoom struct {
	// Idle: no pod runs on it but DaemonSet and mirror pods.
	Idle bool
	// FreeDevices counts, per driver, the devices of its own slices no
	// claim holds.
	FreeDevices map[string]int
}

// NodeRooms reads, from the observed cluster, the room of the nodes of
// groups whose nodes come in units; nil when no group does.
func NodeRooms(cluster *observe.ClusterState, groups []*nodegroups.Info) map[string]NodeRoom {
	want := map[string]bool{}
	for _, g := range groups {
		if n, _ := g.Template.UnitSize(); n > 1 {
			for _, node := range slices.Concat(g.Ready, g.Booting) {
				want[node.Name] = true
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	rooms := map[string]NodeRoom{}
	for n := range want {
		rooms[n] = NodeRoom{Idle: true}
	}
	for _, p := range cluster.Pods {
		r, ok := rooms[p.Spec.NodeName]
		if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || template.StartsByItself(p) {
			continue
		}
		r.Idle = false
		rooms[p.Spec.NodeName] = r
	}
	held := map[structured.DeviceID]bool{}
	for _, c := range cluster.ResourceClaims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, d := range c.Status.Allocation.Devices.Results {
			held[structured.MakeDeviceID(d.Driver, d.Pool, d.Device)] = true
		}
	}
	for _, s := range cluster.ResourceSlices {
		node := ptr.Deref(s.Spec.NodeName, "")
		r, ok := rooms[node]
		if !ok {
			continue
		}
		for _, d := range s.Spec.Devices {
			if !held[structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)] {
				if r.FreeDevices == nil {
					r.FreeDevices = map[string]int{}
				}
				r.FreeDevices[s.Spec.Driver]++
			}
		}
		rooms[node] = r
	}
	return rooms
}

// units is g's registered units with their room, the roomiest first.
func units(g *nodegroups.Info, rooms map[string]NodeRoom) (int32, []v1alpha1.NodeGroupUnit) {
	size, _ := g.Template.UnitSize()
	if size <= 1 {
		return 0, nil
	}
	type unit struct {
		nodes, idle, free int32
		byDriver          map[string]int32
	}
	byDomain := map[string]*unit{}
	for _, node := range slices.Concat(g.Ready, g.Booting) {
		d := g.Template.UnitOf(node)
		u := byDomain[d]
		if u == nil {
			u = &unit{byDriver: map[string]int32{}}
			byDomain[d] = u
		}
		u.nodes++
		r := rooms[node.Name]
		if r.Idle {
			u.idle++
		}
		for driver, n := range r.FreeDevices {
			u.byDriver[driver] += int32(n)
			u.free += int32(n)
		}
	}
	domains := slices.Collect(maps.Keys(byDomain))
	slices.SortFunc(domains, func(a, b string) int {
		ua, ub := byDomain[a], byDomain[b]
		return cmp.Or(cmp.Compare(ub.free, ua.free), cmp.Compare(ub.idle, ua.idle), cmp.Compare(a, b))
	})
	if len(domains) > maxUnits {
		domains = domains[:maxUnits]
	}
	out := make([]v1alpha1.NodeGroupUnit, 0, len(domains))
	for _, d := range domains {
		u := byDomain[d]
		gu := v1alpha1.NodeGroupUnit{Domain: d, Nodes: u.nodes, IdleNodes: u.idle}
		for _, driver := range slices.Sorted(maps.Keys(u.byDriver)) {
			gu.FreeDevices = append(gu.FreeDevices, v1alpha1.DriverDevices{Driver: driver, Devices: u.byDriver[driver]})
		}
		out = append(out, gu)
	}
	return int32(size), out
}
