package buffers

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

func TestWorkloadKinds(t *testing.T) {
	index := func(objs ...any) cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			_ = i.Add(o)
		}
		return i
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 7}
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}}}
	l := &Listers{
		Deployments:  appslisters.NewDeploymentLister(index(&appsv1.Deployment{ObjectMeta: meta("d"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tmpl}})),
		ReplicaSets:  appslisters.NewReplicaSetLister(index(&appsv1.ReplicaSet{ObjectMeta: meta("r"), Spec: appsv1.ReplicaSetSpec{Template: tmpl}})),
		StatefulSets: appslisters.NewStatefulSetLister(index(&appsv1.StatefulSet{ObjectMeta: meta("s"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5), Template: tmpl}})),
		Jobs:         batchlisters.NewJobLister(index(&batchv1.Job{ObjectMeta: meta("j"), Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Template: tmpl}})),
	}
	for _, tc := range []struct {
		ref         v1beta1.ScalableRef
		replicas    int32
		unsupported bool
		notFound    bool
	}{
		{ref: v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "d"}, replicas: 3},
		{ref: v1beta1.ScalableRef{APIGroup: "apps", Kind: "ReplicaSet", Name: "r"}, replicas: 1}, // unset: 1
		{ref: v1beta1.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "s"}, replicas: 5},
		{ref: v1beta1.ScalableRef{APIGroup: "batch", Kind: "Job", Name: "j"}, replicas: 4},
		{ref: v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "gone"}, notFound: true},
		{ref: v1beta1.ScalableRef{Kind: "Deployment", Name: "d"}, unsupported: true}, // core group
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "w"}, unsupported: true},
	} {
		t.Run(tc.ref.APIGroup+"/"+tc.ref.Kind+"/"+tc.ref.Name, func(t *testing.T) {
			wl, err := l.Workload("ns", tc.ref)
			var unsupported *UnsupportedKindError
			switch {
			case tc.unsupported:
				if !errors.As(err, &unsupported) {
					t.Errorf("error %v, want unsupported", err)
				}
			case tc.notFound:
				if !apierrors.IsNotFound(err) {
					t.Errorf("error %v, want not found", err)
				}
			case err != nil:
				t.Fatal(err)
			case wl.Replicas != tc.replicas || wl.Generation != 7 || wl.Template.Labels["app"] != "x":
				t.Errorf("workload %+v, want %d replicas, generation 7 and the template", wl, tc.replicas)
			}
		})
	}
}
