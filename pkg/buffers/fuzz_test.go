package buffers

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// FuzzBuffer: any object the API server may hold, its active-windows
// annotation included, resolves to pods or to a reason it cannot; never
// a panic, never more pods than MaxReplicas.
func FuzzBuffer(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"name":"b","namespace":"n"},"spec":{"podTemplateRef":{"name":"t"},"replicas":4}}`,
		`{"metadata":{"name":"b","namespace":"n","annotations":{"autoscaling.dra-autoscaler.io/active-windows":"0 8 * * 1-5 for 10h"}},"spec":{"podTemplateRef":{"name":"t"},"limits":{"cpu":"7"}}}`,
		`{"metadata":{"name":"b","namespace":"n","annotations":{"autoscaling.dra-autoscaler.io/active-windows":"CRON_TZ=Asia/Shanghai @daily for 1h; 5 4 * * sun for 90m"}},"spec":{"podTemplateRef":{"name":"t"},"replicas":1}}`,
		`{"metadata":{"name":"b","namespace":"n","annotations":{"autoscaling.dra-autoscaler.io/active-windows":"* * * * * * for 0s"}},"spec":{"podTemplateRef":{"name":"t"},"replicas":1}}`,
		`{"metadata":{"name":"b","namespace":"n"},"spec":{"podTemplateRef":{"name":"t"},"limits":{"cpu":"1e18","memory":"1Ei"}}}`,
		`{"metadata":{"name":"b","namespace":"n"},"spec":{"scalableRef":{"kind":"Deployment","name":"d"},"percentage":2147483647}}`,
		`{"spec":{"replicas":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = idx.Add(&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "t"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1")}}}}}}})
	src := &Listers{PodTemplates: corelisters.NewPodTemplateLister(idx)}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil {
			return
		}
		b, err := v1beta1.FromUnstructured(&unstructured.Unstructured{Object: obj})
		if err != nil || b.Spec.ScalableRef != nil {
			return
		}
		r := resolve(b, src, at)
		if r.NotReady == "" && (r.Wanted < 0 || r.Wanted > MaxReplicas) {
			t.Fatalf("resolved to %d pods", r.Wanted)
		}
		_ = r.Status(nil, "")
	})
}
