package kwok

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestIncreaseSizeBootAndDriverDelays(t *testing.T) {
	g := gpuGroup("gpu-8x", 0, 4)
	g.BootDelay = metav1.Duration{Duration: 2 * time.Second}
	g.DriverDelay = metav1.Duration{Duration: 3 * time.Second}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ng := e.group(t, "gpu-8x")

	if _, err := ng.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatalf("IncreaseSize: %v", err)
	}
	if got := targetSize(t, ng); got != 2 {
		t.Errorf("target after request = %d, want 2", got)
	}
	if r, c, f := states(t, ng); r != 0 || c != 2 || f != 0 {
		t.Errorf("before boot delay: running %d creating %d failed %d, want 0 2 0", r, c, f)
	}
	e.clock.Step(1999 * time.Millisecond)
	if n := len(e.nodes(t)); n != 0 {
		t.Fatalf("%d nodes registered before the boot delay", n)
	}

	e.clock.Step(time.Millisecond)
	eventually(t, "2 nodes running", func() bool { r, _, _ := states(t, ng); return r == 2 })
	nodes := e.nodes(t)
	if len(nodes) != 2 {
		t.Fatalf("%d nodes in the API server, want 2", len(nodes))
	}
	for _, node := range nodes {
		checkNode(t, &node, "gpu-8x")
		if s := e.slices(t, node.Name); len(s) != 0 {
			t.Errorf("node %s has %d slices before the driver delay", node.Name, len(s))
		}
	}

	e.clock.Step(3 * time.Second)
	for _, node := range nodes {
		eventually(t, "slices of "+node.Name, func() bool { return len(e.slices(t, node.Name)) == 2 })
		for i, s := range e.slices(t, node.Name) {
			driver := []string{"gpu.example.com", "nic.example.com"}[i]
			if s.Name != sliceName(node.Name, driver, 0) || s.Spec.Driver != driver ||
				*s.Spec.NodeName != node.Name || s.Spec.Pool != (poolOf(node.Name, 1)) || len(s.Spec.Devices) != 8 {
				t.Errorf("slice %d of %s = %s driver %s pool %+v with %d devices", i, node.Name, s.Name, s.Spec.Driver, s.Spec.Pool, len(s.Spec.Devices))
			}
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].Name != node.Name {
				t.Errorf("slice %s owner references = %+v, want the node", s.Name, s.OwnerReferences)
			}
		}
	}
}

// checkNode checks what a node of the group registers with.
func checkNode(t *testing.T, node *corev1.Node, group string) {
	t.Helper()
	name := node.Name
	if !strings.HasPrefix(name, group+"-") || len(name) != len(group)+6 {
		t.Errorf("node name %q, want %s-<5 random>", name, group)
	}
	if want := "kwok://" + group + "/" + name; node.Spec.ProviderID != want {
		t.Errorf("providerID %q, want %q", node.Spec.ProviderID, want)
	}
	for k, v := range map[string]string{LabelNodeGroup: group, LabelCapacityType: "on-demand", corev1.LabelHostname: name, "node.kubernetes.io/instance-type": "gpu-8x"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Annotations[AnnotationKwokNode] != "fake" {
		t.Errorf("annotations %v lack %s=fake", node.Annotations, AnnotationKwokNode)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "nvidia.com/gpu" {
		t.Errorf("taints %v, want the template's", node.Spec.Taints)
	}
	if cpu := node.Status.Allocatable.Cpu(); cpu.String() != "4" || node.Status.Capacity.Pods().Value() != defaultPods {
		t.Errorf("allocatable %v capacity %v, want cpu 4 and default pods", node.Status.Allocatable, node.Status.Capacity)
	}
	if len(node.Status.Conditions) != 0 {
		t.Errorf("conditions %v: Ready is kwok's to set", node.Status.Conditions)
	}
}

func TestIncreaseSizeFaults(t *testing.T) {
	tests := []struct {
		name     string
		maxSize  int
		faults   FaultsConfig
		existing int // instances requested (and registered) beforehand
		atomic   bool
		delta    int
		wantErr  string
		wantOOR  bool
		// after the boot delay and an hour more
		wantTarget, wantRunning, wantCreating, wantFailed int
	}{
		{name: "plain", maxSize: 5, delta: 3, wantTarget: 3, wantRunning: 3},
		{name: "zero delta", maxSize: 5, delta: 0, wantErr: "must be positive"},
		{name: "beyond maxSize", maxSize: 3, existing: 1, delta: 3, wantErr: "exceeds maxSize 3", wantTarget: 1, wantRunning: 1},
		{name: "atomic beyond maxSize", maxSize: 3, atomic: true, delta: 4, wantErr: "exceeds maxSize 3"},
		{name: "out of resources after 2", maxSize: 5, faults: FaultsConfig{OutOfResourcesAfter: ptr.To(2)}, delta: 3,
			wantErr: "1 of 3 new instances failed", wantOOR: true, wantTarget: 2, wantRunning: 2, wantFailed: 1},
		{name: "out of resources counts existing nodes", maxSize: 5, faults: FaultsConfig{OutOfResourcesAfter: ptr.To(2)}, existing: 2, delta: 1,
			wantErr: "1 of 1 new instances failed", wantOOR: true, wantTarget: 2, wantRunning: 2, wantFailed: 1},
		{name: "atomic refused up front", maxSize: 5, faults: FaultsConfig{OutOfResourcesAfter: ptr.To(2)}, atomic: true, delta: 3,
			wantErr: "nothing created", wantOOR: true},
		{name: "atomic within quota", maxSize: 5, faults: FaultsConfig{OutOfResourcesAfter: ptr.To(2)}, atomic: true, delta: 2,
			wantTarget: 2, wantRunning: 2},
		{name: "atomic partial registration", maxSize: 5, faults: FaultsConfig{NeverRegisterAfter: ptr.To(1)}, atomic: true, delta: 3,
			wantTarget: 3, wantRunning: 1, wantCreating: 2},
		{name: "never register", maxSize: 5, faults: FaultsConfig{NeverRegister: true}, delta: 2,
			wantTarget: 2, wantCreating: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := gpuGroup("gpu", 0, tc.maxSize)
			g.BootDelay = metav1.Duration{Duration: time.Second}
			g.Faults = tc.faults
			e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
			ng := e.group(t, "gpu")
			if tc.existing > 0 {
				if _, err := ng.IncreaseSize(t.Context(), tc.existing); err != nil {
					t.Fatalf("setup IncreaseSize(%d): %v", tc.existing, err)
				}
				e.clock.Step(time.Second)
				eventually(t, "existing nodes", func() bool { r, _, _ := states(t, ng); return r == tc.existing })
			}

			var err error
			if tc.atomic {
				_, err = ng.AtomicIncreaseSize(t.Context(), tc.delta)
			} else {
				_, err = ng.IncreaseSize(t.Context(), tc.delta)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case errors.Is(err, ErrOutOfResources) != tc.wantOOR:
				t.Fatalf("errors.Is(%v, ErrOutOfResources) = %t, want %t", err, !tc.wantOOR, tc.wantOOR)
			}
			if got := targetSize(t, ng); got != tc.wantTarget {
				t.Errorf("target right after the call = %d, want %d", got, tc.wantTarget)
			}

			e.clock.Step(time.Second)
			eventually(t, "registrations", func() bool { r, _, _ := states(t, ng); return r == tc.wantRunning })
			e.clock.Step(time.Hour)
			r, c, f := states(t, ng)
			if r != tc.wantRunning || c != tc.wantCreating || f != tc.wantFailed {
				t.Errorf("running %d creating %d failed %d, want %d %d %d", r, c, f, tc.wantRunning, tc.wantCreating, tc.wantFailed)
			}
			if got := targetSize(t, ng); got != tc.wantTarget {
				t.Errorf("target = %d, want %d", got, tc.wantTarget)
			}
			if n := len(e.nodes(t)); n != tc.wantRunning {
				t.Errorf("%d nodes in the API server, want %d", n, tc.wantRunning)
			}
			instances, _ := ng.Nodes()
			for _, inst := range instances {
				if info := inst.Status.ErrorInfo; info != nil &&
					(info.ErrorClass != cloudprovider.OutOfResourcesErrorClass || info.ErrorCode != "OutOfResources" || inst.Status.State != cloudprovider.InstanceCreating) {
					t.Errorf("failed instance %s status %+v, want Creating with OutOfResources", inst.Id, *info)
				}
			}
		})
	}
}

// poolOf is the pool of a node-local slice with count slices.
func poolOf(node string, count int64) resourceapi.ResourcePool {
	return resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: count}
}

// A per-request topology label: the nodes of one request share a fresh
// value, another request draws another, and the template carries no
// value but says the provider picks one.
func TestPerRequestTopology(t *testing.T) {
	const block = "example.com/block"
	g := cpuGroup("blocks", 0, 5)
	g.PerRequestTopology = []string{block}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ng := e.group(t, "blocks")
	tmpl, err := ng.TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if _, has := tmpl.Node.Labels[block]; has || !tmpl.TopologyPerRequest(block) || tmpl.TopologyPerRequest("other") {
		t.Errorf("template labels %v annotations %v: want no %s value, chosen per request", tmpl.Node.Labels, tmpl.Node.Annotations, block)
	}
	for _, n := range []int{2, 3} {
		if _, err := ng.IncreaseSize(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "5 nodes registered", func() bool { return len(e.nodes(t)) == 5 })
	perValue := map[string]int{}
	for _, node := range e.nodes(t) {
		perValue[node.Labels[block]]++
	}
	var sizes []int
	for v, n := range perValue {
		if v == "" {
			t.Errorf("%d nodes without a %s value", n, block)
		}
		sizes = append(sizes, n)
	}
	sort.Ints(sizes)
	if fmt.Sprint(sizes) != "[2 3]" {
		t.Errorf("nodes per %s value %v, want one value per request (2 and 3 nodes)", block, perValue)
	}
}

func TestPerRequestTopologyValidation(t *testing.T) {
	g := cpuGroup("blocks", 0, 5)
	g.Topology = map[string]string{"example.com/rack": "r1"}
	g.PerRequestTopology = []string{"example.com/rack"}
	if err := (&Config{NodeGroups: []NodeGroupConfig{g}}).Validate(); err == nil || !strings.Contains(err.Error(), "fixed value") {
		t.Errorf("Validate: %v, want a per-request label with a fixed value refused", err)
	}
	g.Topology, g.PerRequestTopology = nil, []string{"not a label!"}
	if err := (&Config{NodeGroups: []NodeGroupConfig{g}}).Validate(); err == nil {
		t.Error("Validate accepted an invalid label name")
	}
}

// A group of units of 3: the template says so, requests are whole units
// (else refused, nothing created), each unit draws its own value of the
// per-request label, and a request of two units two values.
func TestUnits(t *testing.T) {
	const block = "example.com/block"
	g := cpuGroup("racks", 0, 9)
	g.PerRequestTopology, g.UnitSize = []string{block}, 3
	// IMEX-like channels whose clique is their unit's.
	g.Template.Drivers = []DriverConfig{{Driver: "compute-domain.example.com", Devices: []resourceapi.Device{
		builder.Device("channel-0").Attr("clique", cloudprovider.LaunchValue(block)).Attr("kind", "channel").Obj()}}}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ng := e.group(t, "racks")
	tmpl, err := ng.TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tmpl.UnitSize(); n != 3 || err != nil || tmpl.Units(4) != 6 || tmpl.Units(3) != 3 {
		t.Errorf("template unit size %d (%v), Units(4) %d, Units(3) %d; want 3, 6, 3", n, err, tmpl.Units(4), tmpl.Units(3))
	}
	for _, n := range []int{1, 4} {
		if _, err := ng.AtomicIncreaseSize(t.Context(), n); err == nil || !strings.Contains(err.Error(), "whole units of 3") {
			t.Errorf("increase by %d: %v, want refused", n, err)
		}
	}
	if size, _ := ng.TargetSize(); size != 0 {
		t.Fatalf("target %d after refused increases, want 0", size)
	}
	for _, n := range []int{3, 6} {
		if _, err := ng.AtomicIncreaseSize(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "9 nodes registered", func() bool { return len(e.nodes(t)) == 9 })
	perValue := map[string]int{}
	for _, node := range e.nodes(t) {
		perValue[node.Labels[block]]++
	}
	if len(perValue) != 3 {
		t.Errorf("nodes per %s value %v, want 3 units of 3", block, perValue)
	}
	for v, n := range perValue {
		if v == "" || n != 3 {
			t.Errorf("%s=%q on %d nodes, want a value on each unit's 3", block, v, n)
		}
	}
	if got := tmpl.ResourceSlices[0].Spec.Devices[0].Attributes["clique"].StringValue; *got != cloudprovider.LaunchValue(block) {
		t.Errorf("template channel clique %q, want the launch value", *got)
	}
	for _, node := range e.nodes(t) {
		var got []string
		eventually(t, "channels of "+node.Name+" published", func() bool {
			got = nil
			for _, s := range e.slices(t, node.Name) {
				for _, d := range s.Spec.Devices {
					got = append(got, *d.Attributes["clique"].StringValue, *d.Attributes["kind"].StringValue)
				}
			}
			return len(got) > 0
		})
		if want := []string{node.Labels[block], "channel"}; !slices.Equal(got, want) {
			t.Errorf("node %s: channel attributes %v, want %v (its unit's clique)", node.Name, got, want)
		}
	}
}

func TestUnitsValidation(t *testing.T) {
	for _, tc := range []struct {
		min, max, unit int
		want           string
	}{
		{0, 8, 4, ""},
		{0, 6, 4, "multiples of unitSize (4)"},
		{2, 8, 4, "multiples of unitSize (4)"},
		{0, 5, -1, "unitSize (-1) must not be negative"},
		{0, 5, 1, ""},
		{0, 8, 4, "is not in perRequestTopology"},
	} {
		g := cpuGroup("racks", tc.min, tc.max)
		g.UnitSize = tc.unit
		if strings.Contains(tc.want, "perRequestTopology") {
			g.Template.Drivers = []DriverConfig{{Driver: "compute-domain.example.com", Devices: []resourceapi.Device{
				builder.Device("channel-0").Attr("clique", cloudprovider.LaunchValue("example.com/block")).Obj()}}}
		}
		err := (&Config{NodeGroups: []NodeGroupConfig{g}}).Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("min %d max %d unit %d: %v, want %q", tc.min, tc.max, tc.unit, err, tc.want)
		}
	}
}
