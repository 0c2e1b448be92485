package template

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestDaemonSetPods(t *testing.T) {
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4))))
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := runner.Snapshot()
	if err := snap.AddNode(builder.Node("existing").Obj()); err != nil {
		t.Fatal(err)
	}
	node := builder.Node("gpu-a-1").CPU("4").Label("accelerator", "a100").
		Taint("nvidia.com/gpu", "", v1.TaintEffectNoSchedule).Obj()
	static := builder.Pod("kube-system", "etcd-gpu-a-1").CPU("1").Node(node.Name).Obj()
	static.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"}
	present := builder.DaemonSet("kube-system", "present").Toleration("", "", "").Obj()
	tmpl, err := FromNode(node, nil, []*v1.Pod{static, builder.PodFromDaemonSet(present, "present-q8s7x", node.Name)})
	if err != nil {
		t.Fatal(err)
	}

	daemonSets := []*appsv1.DaemonSet{
		builder.DaemonSet("kube-system", "gpu-driver").NodeSelector("accelerator", "a100").Toleration("nvidia.com/gpu", "", v1.TaintEffectNoSchedule).Obj(),
		builder.DaemonSet("kube-system", "other-accelerator").NodeSelector("accelerator", "h100").Toleration("nvidia.com/gpu", "", v1.TaintEffectNoSchedule).Obj(),
		builder.DaemonSet("kube-system", "intolerant").Obj(),
		builder.DaemonSet("monitoring", "node-exporter").Toleration("", "", "").CPU("2").Obj(),
		// Tolerates everything but no longer fits: the static pod and
		// node-exporter took 3 of 4 CPUs.
		builder.DaemonSet("monitoring", "too-big").Toleration("", "", "").CPU("2").Obj(),
		present,
		nil,
	}
	pods, err := DaemonSetPods(ctx, runner, tmpl, daemonSets)
	if err != nil {
		t.Fatalf("DaemonSetPods: %v", err)
	}
	var got []string
	for _, p := range pods {
		got = append(got, p.Namespace+"/"+p.Name)
		if p.Spec.NodeName != tmpl.Node.Name || p.UID != "" || metaControllerKind(p) != "DaemonSet" {
			t.Errorf("pod %s: node %q uid %q controller %q", p.Name, p.Spec.NodeName, p.UID, metaControllerKind(p))
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(t v1.Toleration) bool { return t.Key == v1.TaintNodeNotReady }) {
			t.Errorf("pod %s lacks the daemon tolerations the controller adds", p.Name)
		}
	}
	want := []string{"kube-system/gpu-driver", "monitoring/node-exporter"}
	if !slices.Equal(got, want) {
		t.Errorf("daemon pods %v, want %v", got, want)
	}
	if nodes, _ := snap.NodeInfos().List(); len(nodes) != 1 || snap.Depth() != 0 {
		t.Errorf("snapshot not restored: %d nodes, depth %d", len(nodes), snap.Depth())
	}

	if _, err := DaemonSetPods(ctx, nil, tmpl, daemonSets); err == nil || !strings.Contains(err.Error(), "nil runner") {
		t.Errorf("nil runner: error %v", err)
	}
	if _, err := DaemonSetPods(ctx, runner, &cloudprovider.NodeTemplate{}, daemonSets); err == nil {
		t.Error("template without node: no error")
	}
}

func metaControllerKind(p *v1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.Kind
		}
	}
	return ""
}
