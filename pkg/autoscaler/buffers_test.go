package autoscaler_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// bufferSource serves one buffer of n pods of a cpu-CPU template.
func bufferSource(t *testing.T, n int32, cpu string) *buffers.Listers {
	t.Helper()
	tmpls := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pod := builder.Pod("ns", "x").CPU(cpu).Obj()
	_ = tmpls.Add(&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t"}, Template: corev1.PodTemplateSpec{Spec: pod.Spec}})
	b := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "headroom", UID: "b1"},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, Replicas: ptr.To(n)}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	quotas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return &buffers.Listers{List: func() []*unstructured.Unstructured { return []*unstructured.Unstructured{{Object: obj}} },
		PodTemplates: corelisters.NewPodTemplateLister(tmpls), Quota: corelisters.NewResourceQuotaLister(quotas)}
}

// Real pods first: the real pending pod takes the free room of the
// existing node, the buffer pod gets a new node; the scale-up names no
// pod and no buffer pod gets an event; the buffer pod stays placed in the
// snapshot (where scale-down must find it room).
func TestBuffersComeAfterRealPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	big := cpuGroup("big", "4")
	recorder := record.NewFakeRecorder(10)
	l := newLoopWith(t, ctx, func(_ *config.Options, env *autoscaler.Env) { env.BufferSource = bufferSource(t, 1, "2") },
		testclock.NewFakeClock(t0), recorder, fakeprovider.New(big),
		unschedulablePod("real", "3"), builder.Node("n1").CPU("4").Memory("32Gi").Obj())
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pass.Get(st, fitexisting.Fits)) != 1 || pass.Get(st, fitexisting.Fits)[findFit(pass.Get(st, fitexisting.Fits), "real")] != "n1" {
		t.Errorf("real pod fits %v, want on n1", pass.Get(st, fitexisting.Fits))
	}
	if pass.Get(st, buffers.Served) == nil || len(pass.Get(st, buffers.Served).Buffers) != 1 {
		t.Fatalf("buffers outcome %+v", pass.Get(st, buffers.Served))
	}
	b := pass.Get(st, buffers.Served).Buffers[0]
	if b.Fit != 0 || b.Planned != 1 || b.Unplaced != 0 {
		t.Errorf("buffer fit/planned/unplaced %d/%d/%d, want 0/1/0", b.Fit, b.Planned, b.Unplaced)
	}
	if len(pass.Get(st, act.Results)) != 1 || pass.Get(st, act.Results)[0].Group.Id != "big" || pass.Get(st, act.Results)[0].Added != 1 || len(pass.Get(st, act.Results)[0].Pods) != 0 {
		t.Errorf("results %+v, want big +1 for the buffer, naming no pod", pass.Get(st, act.Results))
	}
	if _, ok := l.Runner.Snapshot().PlacedPod("ns", b.Pods[0].Name); !ok {
		t.Errorf("buffer pod %s not in the snapshot after the pass", b.Pods[0].Name)
	}
	for _, e := range drain(recorder) {
		t.Errorf("event %q: the real pod needed no scale-up and buffer pods are not objects", e)
	}
}

func findFit(fits map[*corev1.Pod]string, name string) *corev1.Pod {
	for p := range fits {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// A buffer that fits what exists asks for nothing.
func TestBufferOnFreeCapacity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	big := cpuGroup("big", "4")
	l := newLoopWith(t, ctx, func(_ *config.Options, env *autoscaler.Env) { env.BufferSource = bufferSource(t, 2, "2") },
		testclock.NewFakeClock(t0), record.NewFakeRecorder(10), fakeprovider.New(big),
		builder.Node("n1").CPU("4").Memory("32Gi").Obj())
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := pass.Get(st, buffers.Served).Buffers[0]; b.Fit != 2 || b.Planned != 0 {
		t.Errorf("buffer fit/planned %d/%d, want 2/0", b.Fit, b.Planned)
	}
	if len(big.Calls()) != 0 {
		t.Errorf("provider calls %+v, want none", big.Calls())
	}
}
