package framework

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// volumeRunner is a runner whose plugins read the objects through
// informers, as the loop's do.
func volumeRunner(t *testing.T, objs ...runtime.Object) *Runner {
	t.Helper()
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	f := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	r, err := New(ctx, Options{Informers: f})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartInformers(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); r.ShutdownInformers() })
	return r
}

func TestDescribeVolumes(t *testing.T) {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	zonal := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "zonal"}, Provisioner: "csi.example.com", VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"b"}}}}}}
	now := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, Provisioner: "csi.example.com", VolumeBindingMode: &immediate}
	claimOf := func(name, class string) *corev1.PersistentVolumeClaim {
		c := builder.PVC(ns, name, "")
		c.Spec.StorageClassName = &class
		return c
	}
	labelled := builder.PV("legacy").BoundTo(ns, "legacy").Obj()
	labelled.Labels = map[string]string{corev1.LabelTopologyZone: "b__c"}
	objs := []runtime.Object{zonal, now,
		builder.PV("weights-pv").BoundTo(ns, "weights").InZone("b").Obj(), builder.PVC(ns, "weights", "weights-pv"),
		labelled, builder.PVC(ns, "legacy", "legacy"),
		builder.PVC(ns, "orphan", "gone-pv"),
		claimOf("scratch", "zonal"), claimOf("waiting", "now"), claimOf("classless", "missing"),
	}
	r := volumeRunner(t, objs...)
	tests := []struct {
		claim string
		zone  string // the node's
		want  string
	}{
		{"weights", "a", "PV weights-pv (claim weights) is in zone b; the node is in zone a"},
		{"weights", "b", ""},
		{"weights", "", "PV weights-pv (claim weights) is in zone b; the node is without a " + corev1.LabelTopologyZone + " label"},
		{"legacy", "a", "PV legacy (claim legacy) is in zone b or c; the node is in zone a"},
		{"legacy", "c", ""},
		{"orphan", "a", "claim orphan is bound to PV gone-pv, which does not exist"},
		{"scratch", "a", "StorageClass zonal (claim scratch) provisions only in zone b; the node is in zone a"},
		{"scratch", "b", ""},
		{"waiting", "a", "claim waiting is not bound yet (StorageClass now binds immediately)"},
		{"classless", "a", `claim classless is not bound and has no StorageClass "missing" to provision it`},
		{"nowhere", "a", "claim nowhere does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.claim+"/"+tc.zone, func(t *testing.T) {
			node := builder.Node("n1").Obj()
			if tc.zone != "" {
				node.Labels = map[string]string{corev1.LabelTopologyZone: tc.zone}
			}
			pod := builder.Pod(ns, "p").Volume("v", tc.claim).Obj()
			if got := r.DescribeVolumes(pod, node); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
