package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CRD in file (relative to the module root) unless
// it exists, and waits until the API server serves it (Established, and
// listed by discovery). Idempotent: tests sharing a control plane may all
// call it; the CRD stays for the rest of the run.
func (c *Cluster) InstallCRD(ctx context.Context, t testing.TB, file string) {
	t.Helper()
	root := filepath.Dir(filepath.Dir(c.BinDir)) // _out/bin -> module root
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := client.Resource(crdResource)
	if _, err := crds.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating CRD %s: %v", obj.GetName(), err)
	}
	group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	Eventually(ctx, t, time.Minute, "CRD "+obj.GetName()+" established and discovered", func(ctx context.Context) (bool, string, error) {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, x := range conds {
			if m, ok := x.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		if !established {
			return false, "not established", nil
		}
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if served, _ := m["served"].(bool); !served {
				continue
			}
			list, err := c.Client.Discovery().ServerResourcesForGroupVersion(group + "/" + name)
			if err != nil {
				return false, fmt.Sprintf("discovery of %s/%s: %v", group, name, err), nil
			}
			found := false
			for _, r := range list.APIResources {
				found = found || r.Name == plural
			}
			if !found {
				return false, fmt.Sprintf("%s not in %s/%s yet", plural, group, name), nil
			}
		}
		return true, "", nil
	})
}
