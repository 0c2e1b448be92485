package template

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const gpuDriver = "gpu.example.com"

// realNode is a node of a group as observed in a cluster: identity,
// lifecycle taints, a cordon, a stale condition, a custom taint and label.
func realNode() *v1.Node {
	n := builder.Node("gpu-a-1").Label("pool", "gpu-a").
		Taint("dedicated", "gpu", v1.TaintEffectNoSchedule).
		Taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule).
		Taint(v1.TaintNodeNotReady, "", v1.TaintEffectNoExecute).
		Taint(TaintToBeDeleted, "123", v1.TaintEffectNoSchedule).
		Taint(TaintDeletionCandidate, "123", v1.TaintEffectPreferNoSchedule).
		Unschedulable().NotReady().Obj()
	n.ResourceVersion = "42"
	n.CreationTimestamp = metav1.Now()
	n.Spec.ProviderID = "cloud://gpu-a-1"
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
	return n
}

func TestFromNodeSanitises(t *testing.T) {
	node := realNode()
	ds := builder.DaemonSet("kube-system", "driver").Obj()
	dsPod := builder.PodFromDaemonSet(ds, "driver-x7k2p", node.Name)
	dsPod.Status.PodIP = "10.1.0.5"
	doneDSPod := builder.PodFromDaemonSet(ds, "driver-old", node.Name)
	doneDSPod.Status.Phase = v1.PodFailed
	mirror := builder.Pod("kube-system", "kube-proxy-"+node.Name).Node(node.Name).Obj()
	mirror.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "hash"}
	workload := builder.Pod("default", "train-0").OwnedBy("batch/v1", "Job", "train").Node(node.Name).Obj()
	slices := []*resourceapi.ResourceSlice{
		builder.ResourceSlice("gpu-a-1-gpus", node.Name, gpuDriver, node.Name).Devices(builder.Device("gpu-0")).Obj(),
		builder.ResourceSlice("fabric", "", "fabric.example.com", "fabric").Devices(builder.Device("link-0")).Obj(),
	}
	before := []any{node.DeepCopy(), dsPod.DeepCopy(), slices[0].DeepCopy()}

	tmpl, err := FromNode(node, slices, []*v1.Pod{workload, dsPod, mirror, doneDSPod})
	if err != nil {
		t.Fatalf("FromNode: %v", err)
	}
	n := tmpl.Node
	checks := []struct {
		name string
		ok   bool
	}{
		{"placeholder name", n.Name == PlaceholderNodeName},
		{"placeholder hostname", n.Labels[v1.LabelHostname] == PlaceholderNodeName},
		{"group label kept", n.Labels["pool"] == "gpu-a"},
		{"no uid", n.UID == ""},
		{"no resourceVersion", n.ResourceVersion == ""},
		{"no creationTimestamp", n.CreationTimestamp.IsZero()},
		{"no providerID", n.Spec.ProviderID == ""},
		{"no addresses", n.Status.Addresses == nil},
		{"schedulable", !n.Spec.Unschedulable},
		{"only the group's taint", len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == "dedicated"},
		{"ready", len(n.Status.Conditions) == 1 && n.Status.Conditions[0].Type == v1.NodeReady && n.Status.Conditions[0].Status == v1.ConditionTrue},
		{"allocatable kept", n.Status.Allocatable.Cpu().Equal(*node.Status.Allocatable.Cpu())},
		{"only node-local slices", len(tmpl.ResourceSlices) == 1},
		{"slice on placeholder", ptr.Deref(tmpl.ResourceSlices[0].Spec.NodeName, "") == PlaceholderNodeName},
		{"pool named after node follows it", tmpl.ResourceSlices[0].Spec.Pool.Name == PlaceholderNodeName},
		{"slice identity dropped", tmpl.ResourceSlices[0].UID == ""},
		{"daemonset and mirror pods only", len(tmpl.Pods) == 2},
		{"inputs untouched", reflect.DeepEqual(before, []any{node, dsPod, slices[0]})},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not so", c.name)
		}
	}
	for _, p := range tmpl.Pods {
		if p.UID != "" || p.ResourceVersion != "" || !reflect.DeepEqual(p.Status, v1.PodStatus{}) || p.Spec.NodeName != PlaceholderNodeName {
			t.Errorf("pod %s not reset: uid %q, status %+v, node %q", p.Name, p.UID, p.Status, p.Spec.NodeName)
		}
		if strings.Contains(p.Name, node.Name) {
			t.Errorf("pod %s still carries the real node's name", p.Name)
		}
	}
}

func TestFromNodeRejectsBadInput(t *testing.T) {
	node := builder.Node("n1").Obj()
	other := builder.ResourceSlice("n2-gpus", "n2", gpuDriver, "n2").Obj()
	tests := []struct {
		name   string
		node   *v1.Node
		slices []*resourceapi.ResourceSlice
		pods   []*v1.Pod
		want   string
	}{
		{"nil node", nil, nil, nil, "nil node"},
		{"unnamed node", &v1.Node{}, nil, nil, "without a name"},
		{"slice of another node", node, []*resourceapi.ResourceSlice{other}, nil, "belongs to node n2"},
		{"daemon pod of another node", node, nil, []*v1.Pod{
			builder.PodFromDaemonSet(builder.DaemonSet("kube-system", "d").Obj(), "d-1", "n2"),
		}, "bound to node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FromNode(tc.node, tc.slices, tc.pods); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestInstantiate(t *testing.T) {
	node := builder.Node("gpu-a-1").Obj()
	slices := []*resourceapi.ResourceSlice{
		builder.ResourceSlice("s-gpus", node.Name, gpuDriver, node.Name).Pool(1, 2).
			Devices(builder.Device("gpu-0-mig-1").Attr("model", "a100").ConsumesCounters("gpu-0", map[string]string{"slices": "1"})).Obj(),
		builder.ResourceSlice("s-counters", node.Name, gpuDriver, node.Name).Pool(1, 2).
			SharedCounters(builder.CounterSet("gpu-0").Counter("slices", "7")).Obj(),
		builder.ResourceSlice("s-nics", node.Name, "nic.example.com", "nics").Devices(builder.Device("nic-0")).Obj(),
	}
	ds := builder.DaemonSet("kube-system", "driver").Obj()
	tmpl, err := FromNode(node, slices, []*v1.Pod{builder.PodFromDaemonSet(ds, "driver-abcde", node.Name)})
	if err != nil {
		t.Fatal(err)
	}
	snapshotOfTemplate := tmpl.DeepCopy()

	n1, s1, p1 := Instantiate(tmpl, "gpu-a-template-0")
	n2, s2, p2 := Instantiate(tmpl, "gpu-a-template-1")
	if !reflect.DeepEqual(tmpl, snapshotOfTemplate) {
		t.Fatal("Instantiate modified the template")
	}
	if n1.Name != "gpu-a-template-0" || n1.Labels[v1.LabelHostname] != n1.Name || n1.UID == "" || n1.UID == n2.UID {
		t.Errorf("node identity: name %q hostname %q uid %q (other %q)", n1.Name, n1.Labels[v1.LabelHostname], n1.UID, n2.UID)
	}
	pools := map[string]bool{}
	for i, s := range s1 {
		if want := n1.Name + "-" + string(rune('0'+i)); s.Name != want {
			t.Errorf("slice %d named %q, want %q", i, s.Name, want)
		}
		if ptr.Deref(s.Spec.NodeName, "") != n1.Name {
			t.Errorf("slice %s on node %v", s.Name, s.Spec.NodeName)
		}
		if s.Name == s2[i].Name || s.Spec.Pool.Name == s2[i].Spec.Pool.Name || s.UID == s2[i].UID {
			t.Errorf("slice %d collides across instances: %s/%s", i, s.Name, s.Spec.Pool.Name)
		}
		pools[s.Spec.Driver+"|"+s.Spec.Pool.Name] = true
		if !reflect.DeepEqual(s.Spec.Devices, tmpl.ResourceSlices[i].Spec.Devices) ||
			!reflect.DeepEqual(s.Spec.SharedCounters, tmpl.ResourceSlices[i].Spec.SharedCounters) ||
			s.Spec.Pool.ResourceSliceCount != tmpl.ResourceSlices[i].Spec.Pool.ResourceSliceCount {
			t.Errorf("slice %s lost devices, counters or pool size", s.Name)
		}
	}
	wantPools := map[string]bool{gpuDriver + "|" + n1.Name: true, "nic.example.com|" + n1.Name + "/nics": true}
	if !reflect.DeepEqual(pools, wantPools) {
		t.Errorf("pools %v, want %v", pools, wantPools)
	}
	if len(p1) != 1 || p1[0].Name != "driver-"+n1.Name || p1[0].Spec.NodeName != n1.Name || p1[0].UID == "" || p1[0].UID == p2[0].UID {
		t.Errorf("pods %+v", p1)
	}
	if n, s, p := Instantiate(nil, "x"); n != nil || s != nil || p != nil {
		t.Error("nil template must instantiate to nothing")
	}
}

// A channel device whose clique the provider picks per unit gets the
// clique of the node it is instantiated as: the cycle's or a booting
// unit's value when the node carries one, else a value of its own.
func TestInstantiateFillsLaunchValues(t *testing.T) {
	const clique = "nvidia.com/gpu.clique"
	node := builder.Node("rack-node").Annotation(cloudprovider.AnnotationTopologyPerRequest, clique).Obj()
	slices := []*resourceapi.ResourceSlice{
		builder.ResourceSlice("s-channels", node.Name, "compute-domain.example.com", node.Name).
			Devices(builder.Device("channel-0").Attr("clique", cloudprovider.LaunchValue(clique))).Obj(),
		builder.ResourceSlice("s-gpus", node.Name, gpuDriver, node.Name).Devices(builder.Device("gpu-0").Attr("clique", "fixed")).Obj(),
	}
	tmpl, err := FromNode(node, slices, nil)
	if err != nil {
		t.Fatal(err)
	}
	inDomain := tmpl.DeepCopy()
	inDomain.Node.Labels[clique] = "new request of rack"
	before := tmpl.DeepCopy()
	tests := []struct {
		name string
		tmpl *cloudprovider.NodeTemplate
		want string
	}{
		{"node with the label", inDomain, "new request of rack"},
		{"node without it", tmpl, "picked at launch of rack-template-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, out, _ := Instantiate(tc.tmpl, "rack-template-0")
			got := map[string]string{}
			for _, s := range out {
				got[s.Spec.Driver] = *s.Spec.Devices[0].Attributes["clique"].StringValue
			}
			if got["compute-domain.example.com"] != tc.want || got[gpuDriver] != "fixed" {
				t.Errorf("cliques %v, want the channel's %q and the GPU's fixed", got, tc.want)
			}
		})
	}
	if !reflect.DeepEqual(tmpl, before) {
		t.Error("Instantiate modified the template")
	}
}

// A template made from a node does not offer that node's devices'
// identities: their values are replaced with ones no device has, the
// attribute stays, other attributes and the node's own slices are left.
func TestHideIdentities(t *testing.T) {
	node := builder.Node("n1").Obj()
	s := builder.ResourceSlice("n1-gpus", "n1", "gpu.example.com", "n1").Devices(
		builder.Device("gpu-0").Attr("uuid", "GPU-aaa").Attr("model", "h100").Attr("index", 0),
		builder.Device("gpu-1").Attr("uuid", "GPU-bbb").Attr("model", "h100").Attr("index", 1)).Obj()
	tmpl, err := FromNode(node, []*resourceapi.ResourceSlice{s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	HideIdentities(tmpl, map[string]bool{"uuid": true, "index": true})
	devs := tmpl.ResourceSlices[0].Spec.Devices
	seen := map[string]bool{}
	for _, d := range devs {
		u := d.Attributes["uuid"].StringValue
		if u == nil || !strings.HasPrefix(*u, HiddenIdentity) || seen[*u] {
			t.Errorf("%s: uuid %v, want a hidden one of its own", d.Name, u)
		} else {
			seen[*u] = true
		}
		if *d.Attributes["model"].StringValue != "h100" || d.Attributes["index"].IntValue == nil {
			t.Errorf("%s: other attributes changed: %v", d.Name, d.Attributes)
		}
	}
	if *s.Spec.Devices[0].Attributes["uuid"].StringValue != "GPU-aaa" {
		t.Error("the node's own slice was written")
	}
}
