package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const crdFile = "../../deploy/crds/autoscaling.dra-autoscaler.io_capacityreservations.yaml"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

var (
	crdOnce sync.Once
	crdErr  error
)

// reservationsClient installs the CapacityReservation CRD (once per test
// binary, from deploy/crds) and returns a dynamic client for it.
func reservationsClient(t *testing.T, c *framework.Cluster) dynamic.NamespaceableResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() { crdErr = applyCRD(context.Background(), dyn, strictCRD(t)) })
	if crdErr != nil {
		t.Fatalf("installing the CapacityReservation CRD: %v", crdErr)
	}
	return dyn.Resource(v1alpha1.Resource)
}

func strictCRD(t *testing.T) *unstructured.Unstructured {
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// applyCRD creates or replaces the CRD and waits until objects of it can
// be listed.
func applyCRD(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) error {
	crds := dyn.Resource(crdGVR)
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		cur, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd = crd.DeepCopy()
		crd.SetResourceVersion(cur.GetResourceVersion())
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return framework.WaitFor(ctx, time.Minute, "CapacityReservations served", func(ctx context.Context) (bool, string, error) {
		_, err := dyn.Resource(v1alpha1.Resource).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
}

// reservation is a CapacityReservation object.
func reservation(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "CapacityReservation",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// createCapacityBlock creates a CapacityBlock reservation of count nodes
// for group between start and end.
func createCapacityBlock(ctx context.Context, t *testing.T, crs dynamic.NamespaceableResourceInterface, name, group string, count int64, start, end time.Time) {
	t.Helper()
	createReservation(ctx, t, crs, reservation(name, map[string]any{"type": "CapacityBlock", "nodeGroups": []any{group},
		"count": count, "start": rfc3339(start), "end": rfc3339(end)}))
}

// createReservation creates it and deletes it when the test ends.
func createReservation(ctx context.Context, t *testing.T, crs dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) {
	t.Helper()
	if _, err := crs.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CapacityReservation %s: %v", obj.GetName(), err)
	}
	t.Cleanup(func() { _ = crs.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
}

func patchSpec(ctx context.Context, t *testing.T, crs dynamic.NamespaceableResourceInterface, name string, spec map[string]any) {
	t.Helper()
	data := fmt.Sprintf(`{"spec":%s}`, mustJSON(spec))
	if _, err := crs.Patch(ctx, name, types.MergePatchType, []byte(data), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching CapacityReservation %s: %v", name, err)
	}
}

func mustJSON(v any) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		panic(err)
	}
	return string(j)
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// reservationStatus is the object's status.used and status.available and
// the reason of its Active condition.
func reservationStatus(ctx context.Context, crs dynamic.NamespaceableResourceInterface, name string) (used, available int64, active string, err error) {
	u, err := crs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, 0, "", err
	}
	used, _, _ = unstructured.NestedInt64(u.Object, "status", "used")
	available, _, _ = unstructured.NestedInt64(u.Object, "status", "available")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Active" {
			active = fmt.Sprint(m["reason"])
		}
	}
	return used, available, active, nil
}

// metricValue is the value of the series of name whose labels include
// every one of labels (k="v"), or -1.
func metricValue(text, name string, labels ...string) float64 {
	for _, line := range strings.Split(text, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || !(series == name || strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(series, l) {
				match = false
			}
		}
		if match {
			v, err := strconv.ParseFloat(value, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// clusterEvents are the messages of events with reason about a
// cluster-scoped object (they live in the default namespace).
func clusterEvents(ctx context.Context, c *framework.Cluster, name, reason string) ([]string, error) {
	return eventMessages(ctx, c, metav1.NamespaceDefault, name, reason)
}

func reservationsDynamic(t *testing.T, c *framework.Cluster) dynamic.Interface {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}
