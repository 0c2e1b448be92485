package framework

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// Kwok marks a node as one the kwok controller keeps Ready; its pods are
// then reported Running once bound.
func Kwok(node *corev1.Node) *corev1.Node {
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[controlplane.KwokNodeAnnotation] = controlplane.KwokNodeAnnotationValue
	return node
}

// Create creates each object with the admin client. Cluster-scoped objects
// (nodes, slices, classes) are deleted when the test ends; namespaced ones go
// with the test's namespace. Server-set fields (uid, resourceVersion) of the
// builders' objects are cleared first.
func (c *Cluster) Create(ctx context.Context, t testing.TB, objs ...runtime.Object) {
	t.Helper()
	for _, obj := range objs {
		if m, ok := obj.(metav1.Object); ok {
			m.SetUID("")
			m.SetResourceVersion("")
		}
		if err := c.create(ctx, t, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
}

// TryCreate creates the object as Create does and returns the API
// server's error instead of failing the test, for objects it must refuse.
func (c *Cluster) TryCreate(ctx context.Context, t testing.TB, obj runtime.Object) error {
	return c.create(ctx, t, obj)
}

func (c *Cluster) create(ctx context.Context, t testing.TB, obj runtime.Object) error {
	opts := metav1.CreateOptions{}
	del := metav1.DeleteOptions{}
	cleanup := func(f func(context.Context) error) { t.Cleanup(func() { _ = f(context.Background()) }) }
	switch o := obj.(type) {
	case *corev1.Node:
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, o, opts); err != nil {
			return err
		}
		cleanup(func(ctx context.Context) error { return c.Client.CoreV1().Nodes().Delete(ctx, o.Name, del) })
	case *resourceapi.ResourceSlice:
		if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, o, opts); err != nil {
			return err
		}
		cleanup(func(ctx context.Context) error {
			return c.Client.ResourceV1().ResourceSlices().Delete(ctx, o.Name, del)
		})
	case *resourceapi.DeviceClass:
		if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, o, opts); err != nil {
			return err
		}
		cleanup(func(ctx context.Context) error { return c.Client.ResourceV1().DeviceClasses().Delete(ctx, o.Name, del) })
	case *resourceapi.ResourceClaimTemplate:
		_, err := c.Client.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(ctx, o, opts)
		return err
	case *resourceapi.ResourceClaim:
		_, err := c.Client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, opts)
		return err
	case *corev1.PersistentVolume:
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, o, opts); err != nil {
			return err
		}
		cleanup(func(ctx context.Context) error { return c.Client.CoreV1().PersistentVolumes().Delete(ctx, o.Name, del) })
	case *corev1.PersistentVolumeClaim:
		_, err := c.Client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, opts)
		return err
	case *storagev1.StorageClass:
		if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, o, opts); err != nil {
			return err
		}
		cleanup(func(ctx context.Context) error { return c.Client.StorageV1().StorageClasses().Delete(ctx, o.Name, del) })
	case *appsv1.ReplicaSet:
		_, err := c.Client.AppsV1().ReplicaSets(o.Namespace).Create(ctx, o, opts)
		return err
	case *appsv1.DaemonSet:
		_, err := c.Client.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, opts)
		return err
	case *appsv1.Deployment:
		_, err := c.Client.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
		return err
	case *corev1.PodTemplate:
		_, err := c.Client.CoreV1().PodTemplates(o.Namespace).Create(ctx, o, opts)
		return err
	case *corev1.ResourceQuota:
		_, err := c.Client.CoreV1().ResourceQuotas(o.Namespace).Create(ctx, o, opts)
		return err
	case *schedulingv1.PriorityClass:
		if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, o, opts); err != nil {
			return err
		}
		cleanup(func(ctx context.Context) error {
			return c.Client.SchedulingV1().PriorityClasses().Delete(ctx, o.Name, del)
		})
	case *corev1.ConfigMap:
		_, err := c.Client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
		return err
	case *corev1.Pod:
		_, err := c.Client.CoreV1().Pods(o.Namespace).Create(ctx, o, opts)
		return err
	case *schedulingv1beta1.PodGroup:
		_, err := c.Client.SchedulingV1beta1().PodGroups(o.Namespace).Create(ctx, o, opts)
		return err
	case *schedulingv1alpha3.CompositePodGroup:
		_, err := c.Client.SchedulingV1alpha3().CompositePodGroups(o.Namespace).Create(ctx, o, opts)
		return err
	case *schedulingv1beta1.Workload:
		_, err := c.Client.SchedulingV1beta1().Workloads(o.Namespace).Create(ctx, o, opts)
		return err
	case *rbacv1.Role:
		_, err := c.Client.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
		return err
	case *rbacv1.RoleBinding:
		_, err := c.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
		return err
	default:
		return fmt.Errorf("framework.Create does not know %T", obj)
	}
	return nil
}
