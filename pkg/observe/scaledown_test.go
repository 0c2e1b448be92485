package observe_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
)

func TestControllerExists(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	o := observe.New(fake.NewClientset(
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "train"}},
	), observe.Served{})
	defer o.Shutdown()
	defer cancel()
	if err := o.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name              string
		ns                string
		ref               metav1.OwnerReference
		wantExists, known bool
	}{
		{"ReplicaSet there", "app", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"}, true, true},
		{"ReplicaSet gone", "app", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "old"}, false, true},
		{"same name, other namespace", "other", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"}, false, true},
		{"Job there", "app", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train"}, true, true},
		{"StatefulSet gone", "app", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, false, true},
		{"a custom controller is not judged", "app", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Trainer", Name: "t"}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exists, known := o.ControllerExists(tc.ns, &tc.ref)
			if exists != tc.wantExists || known != tc.known {
				t.Errorf("ControllerExists = %v, %v; want %v, %v", exists, known, tc.wantExists, tc.known)
			}
		})
	}
}
