package estimator

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// keyNode is one node of 4 GPUs with a running pod holding gpu-0; change
// alters its objects before they are loaded.
type keyNode struct {
	node   *corev1.Node
	slice  *resourceapi.ResourceSlice
	pod    *corev1.Pod
	claim  *resourceapi.ResourceClaim
	extras []any
}

func newKeyNode(name string) *keyNode {
	slice := builder.ResourceSlice(name, name, "gpu.example.com", name)
	for _, d := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"} {
		slice.Devices(builder.Device(d).Attr("model", "a100"))
	}
	run := "run-" + name
	pod := builder.Pod("ns", run).CPU("1").Claim("gpu", run).Node(name).Obj()
	return &keyNode{
		node:  builder.Node(name).CPU("8").Label("zone", "z1").Label("example.com/group", "g").Obj(),
		slice: slice.Obj(),
		pod:   pod,
		claim: builder.Claim("ns", run).Request(builder.Request("gpu", "gpu")).
			Allocated(name, builder.AllocatedDevice("gpu", "gpu.example.com", name, "gpu-0")).ReservedFor(pod).Obj(),
	}
}

func (k *keyNode) objs() []any {
	return append([]any{k.node, k.slice, k.pod, k.claim}, k.extras...)
}

// TestNodeKeys: two nodes get one key exactly when nothing a filter
// reads tells them apart, and none when their verdicts may hang on
// something a key does not hold.
func TestNodeKeys(t *testing.T) {
	selecting := builder.Pod("ns", "pending").CPU("1").NodeSelector("example.com/pool", "x").Obj()
	tests := []struct {
		name    string
		change  func(*keyNode)
		same    bool
		noKey   bool
		pending []*corev1.Pod
	}{
		{name: "alike but for the name", change: func(*keyNode) {}, same: true},
		{name: "a label nothing reads", change: func(k *keyNode) { k.node.Labels["example.com/group"] = "h" }, same: true},
		{name: "an annotation", change: func(k *keyNode) { k.node.Annotations = map[string]string{"a": "b"} }, same: true},
		{name: "an unqualified label", change: func(k *keyNode) { k.node.Labels["zone"] = "z2" }},
		{name: "a label a pending pod selects on", pending: []*corev1.Pod{selecting},
			change: func(k *keyNode) { k.node.Labels["example.com/pool"] = "x" }},
		{name: "a taint", change: func(k *keyNode) {
			k.node.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{name: "allocatable", change: func(k *keyNode) { k.node = builder.Node(k.node.Name).CPU("16").Label("zone", "z1").Obj() }},
		{name: "what its pods request", change: func(k *keyNode) {
			k.pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = builder.Node("x").CPU("2").Obj().Status.Allocatable[corev1.ResourceCPU]
		}},
		{name: "another device allocated", change: func(k *keyNode) {
			k.claim.Status.Allocation.Devices.Results[0].Device = "gpu-1"
		}},
		// Attributes count only if a selector or a constraint may read
		// them: real drivers publish one no one reads on every device (a
		// GPU's uuid).
		{name: "a device attribute nothing reads", same: true, change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptrTo("h100")}
		}},
		{name: "a device attribute a class selects on", change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptrTo("h100")}
			k.extras = append(k.extras, builder.DeviceClass("gpu").Selector(`device.attributes["gpu.example.com"].model == "a100"`).Obj())
		}},
		{name: "a device attribute a pending claim selects on", change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["gpu.example.com/model"] = resourceapi.DeviceAttribute{StringValue: ptrTo("h100")}
			k.extras = append(k.extras, builder.Claim("ns", "pending").Request(builder.Request("gpu", "gpu").
				Selector(`device.attributes["gpu.example.com"]["model"] != "a100"`)).Obj())
		}},
		{name: "a device attribute a constraint matches on", change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptrTo("GPU-3")}
			k.extras = append(k.extras, builder.Claim("ns", "pending").Request(builder.Request("gpu", "gpu")).
				MatchAttribute("gpu.example.com/uuid").Obj())
		}},
		{name: "a device attribute only a class that reads them all may read", change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptrTo("GPU-3")}
			k.extras = append(k.extras, builder.DeviceClass("gpu").Selector(`device.attributes["gpu.example.com"].exists(n, n == "x")`).Obj())
		}},
		{name: "a device attribute a claim template reads", change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptrTo("GPU-3")}
			k.extras = append(k.extras, builder.ClaimTemplate("ns", "by-uuid").Request(builder.Request("gpu", "gpu").
				Selector(`device.attributes["gpu.example.com"].uuid == "GPU-3"`)).Obj())
		}},
		{name: "an attribute nothing reads, on one node only", same: true, change: func(k *keyNode) {
			k.slice.Spec.Devices[3].Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptrTo("GPU-3")}
		}},
		{name: "a host port", change: func(k *keyNode) {
			k.pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
		}},
		{name: "a pod with required anti-affinity", noKey: true, change: func(k *keyNode) {
			k.pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}}}
		}},
		{name: "a device claims may share", noKey: true, change: func(k *keyNode) {
			k.slice.Spec.Devices[3].AllowMultipleAllocations = ptrTo(true)
		}},
		{name: "devices any node reaches", noKey: true, change: func(k *keyNode) {
			k.extras = append(k.extras, builder.ResourceSlice("net", "", "net.example.com", "net").Devices(builder.Device("nic")).Obj())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			snap := snapshot.New(logger)
			a, b := newKeyNode("a"), newKeyNode("b")
			tc.change(b)
			snapshottest.Load(t, snap, append(a.objs(), b.objs()...)...)
			keys, err := NewNodeKeys(snap, nil, tc.pending)
			if err != nil || keys == nil {
				t.Fatalf("NewNodeKeys: %v, %v", keys, err)
			}
			ka, kb := keys.Of("a"), keys.Of("b")
			switch {
			case tc.noKey && kb != "":
				t.Errorf("node b has key %q, want none", kb)
			case tc.noKey:
			case ka == "" || kb == "":
				t.Errorf("keys %q and %q, want both", ka, kb)
			case (ka == kb) != tc.same:
				t.Errorf("keys equal: %v, want %v", ka == kb, tc.same)
			}
		})
	}
}

// TestNodeKeysFollowChanges: a key is of the node's current state.
func TestNodeKeysFollowChanges(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	snap := snapshot.New(logger)
	a, b := newKeyNode("a"), newKeyNode("b")
	snapshottest.Load(t, snap, append(a.objs(), b.objs()...)...)
	keys, err := NewNodeKeys(snap, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := keys.Of("b")
	if keys.Of("a") != before {
		t.Fatal("alike nodes with different keys")
	}
	snap.Fork()
	if err := snap.AddPod(builder.Pod("ns", "more").CPU("1").Obj(), "b"); err != nil {
		t.Fatal(err)
	}
	if keys.Of("b") == before {
		t.Error("a pod placed on b left its key as it was")
	}
	if err := snap.Revert(); err != nil {
		t.Fatal(err)
	}
	if keys.Of("b") != before {
		t.Error("after the revert b's key is not the one it had")
	}
}

func TestKeyable(t *testing.T) {
	keys := &NodeKeys{}
	withVolume := func(src corev1.VolumeSource) *corev1.Pod {
		p := builder.Pod("ns", "p").CPU("1").Obj()
		p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: src}}
		return p
	}
	fields := builder.Pod("ns", "p").CPU("1").Obj()
	fields.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"plain", builder.Pod("ns", "p").CPU("1").ClaimFromTemplate("gpu", "one").Obj(), true},
		{"config map", withVolume(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}), true},
		{"PVC", withVolume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}), false},
		{"host path", withVolume(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}), false},
		{"node name", builder.Pod("ns", "p").Node("a").Obj(), false},
		{"match fields", fields, false},
		// The hostname label is the node's name; keys leave it out.
		{"hostname node selector", builder.Pod("ns", "p").CPU("1").NodeSelector(corev1.LabelHostname, "a").Obj(), false},
	}
	for _, tc := range tests {
		if got := keys.Keyable(tc.pod); got != tc.want {
			t.Errorf("%s: Keyable = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (*NodeKeys)(nil).Keyable(tests[0].pod) {
		t.Error("no keys: a pod is keyable")
	}
}

func ptrTo[T any](v T) *T { return &v }

// OfAll makes, side by side, the keys Of makes one by one: over enough
// nodes to run on several goroutines (the race detector, which make test
// runs this package with, sees them), in a few kinds told apart by what a
// filter reads, some keyed before OfAll is asked (kept) and one like no
// other.
func TestNodeKeysOfAll(t *testing.T) {
	var objs []any
	var names []string
	for i := range 3 * minParallelKeys {
		k := newKeyNode(fmt.Sprintf("n%d", i))
		switch i % 3 {
		case 1:
			k.claim.Status.Allocation.Devices.Results[0].Device = "gpu-1"
		case 2:
			k.node.Labels["zone"] = "z2"
		}
		if i == 7 {
			k.pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}}}
		}
		objs = append(objs, k.objs()...)
		names = append(names, k.node.Name)
	}
	snap := snapshot.New(ktesting.NewLogger(t, ktesting.DefaultConfig))
	snapshottest.Load(t, snap, objs...)
	one, err := NewNodeKeys(snap, nil, nil)
	if err != nil || one == nil {
		t.Fatalf("NewNodeKeys: %v, %v", one, err)
	}
	all, _ := NewNodeKeys(snap, nil, nil)
	for _, n := range names[:10] {
		all.Of(n)
	}
	got := all.OfAll(names)
	kinds := map[string]bool{}
	for i, n := range names {
		want := one.Of(n)
		if got[i] != want {
			t.Fatalf("OfAll's key of %s differs from Of's", n)
		}
		if again := all.Of(n); again != want {
			t.Fatalf("Of after OfAll differs for %s", n)
		}
		kinds[want] = true
	}
	if len(kinds) != 4 || !kinds[""] {
		t.Errorf("%d kinds of key (with none: %v), want 3 kinds and none", len(kinds), kinds[""])
	}
}

// A claim asking for a GPU by its uuid, which every device has its own
// of, leaves the uuids out of the keys (or no two nodes would share one):
// the nodes keep one key, and the pod asking is not keyable.
func TestNodeKeysLeaveOutUUIDs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	snap := snapshot.New(logger)
	a, b := newKeyNode("a"), newKeyNode("b")
	for _, k := range []*keyNode{a, b} {
		for i := range k.slice.Spec.Devices {
			k.slice.Spec.Devices[i].Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptrTo(fmt.Sprintf("GPU-%s-%d", k.node.Name, i))}
		}
	}
	pinned := builder.Claim("ns", "pinned").Request(builder.Request("gpu", "gpu").
		Selector(`device.attributes["gpu.example.com"].uuid == "GPU-b-3"`)).Obj()
	snapshottest.Load(t, snap, append(append(a.objs(), b.objs()...), pinned)...)
	pod := builder.Pod("ns", "pinned").CPU("1").Claim("gpu", "pinned").Obj()
	keys, err := NewNodeKeys(snap, nil, []*corev1.Pod{pod})
	if err != nil || keys == nil {
		t.Fatalf("NewNodeKeys: %v, %v", keys, err)
	}
	if ka, kb := keys.Of("a"), keys.Of("b"); ka == "" || ka != kb {
		t.Errorf("keys %q and %q, want one for both", ka, kb)
	}
	if keys.Keyable(pod) {
		t.Error("a pod asking for a GPU by uuid is keyable")
	}
	if !keys.Keyable(builder.Pod("ns", "any").CPU("1").Claim("gpu", "run-a").Obj()) {
		t.Error("a pod asking for any GPU is not keyable")
	}
}
