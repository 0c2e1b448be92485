package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// Kueue is the real Kueue manager (controlplane.KueueVersion) on the test
// control plane, with the ProvisioningRequest CRD installed before it
// starts (Kueue sets up its ProvisioningRequest admission check only when
// the API is served).
type Kueue struct {
	c       *Cluster
	Dynamic dynamic.Interface
	Manager *controlplane.KueueManager
}

const (
	// KueueNamespaceLabel marks the namespaces whose Jobs Kueue manages
	// (ManageNamespace sets it); Jobs elsewhere never reach its webhooks.
	KueueNamespaceLabel = "e2e.dra-autoscaler.io/kueue"
	// KueueGPUClass is the DeviceClass Kueue counts as KueueGPUResource
	// (its resources.deviceClassMappings are read once, at start-up, so
	// the name is fixed for the binary).
	KueueGPUClass    = "kueue-e2e-gpu"
	KueueGPUResource = "example.com/gpu"
	// KueueAPIVersion is the version of Kueue's objects the tests write.
	KueueAPIVersion = "kueue.x-k8s.io/v1beta2"
)

// The ProvisioningRequest CRD the autoscaler serves (deploy/crds).
const provisioningRequestCRD = "deploy/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"

var (
	kueueOnce sync.Once
	kueueEnv  *Kueue
	kueueErr  error
)

// Kueue starts Kueue the first time a test of this binary asks for it (a
// few seconds once built; `make binaries` builds it) and returns it to
// every later caller. It stops when the binary's tests end.
func (c *Cluster) Kueue(t testing.TB) *Kueue {
	t.Helper()
	// The CRD must be served before Kueue starts: installed here, outside
	// the Once, so a test's own InstallCRD (idempotent) changes nothing.
	c.InstallCRD(context.Background(), t, provisioningRequestCRD)
	kueueOnce.Do(func() { kueueEnv, kueueErr = c.startKueue() })
	if kueueErr != nil {
		t.Fatalf("starting Kueue: %v", kueueErr)
	}
	return kueueEnv
}

func (c *Cluster) startKueue() (*Kueue, error) {
	ctx := context.Background()
	start := time.Now()
	if err := controlplane.EnsureKueueManager(ctx, c.BinDir); err != nil {
		return nil, err
	}
	modDir, err := controlplane.KueueModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	stateDir := c.StateDir
	if stateDir == "" {
		if stateDir, err = os.MkdirTemp("", "e2e-kueue-"); err != nil {
			return nil, err
		}
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	mgr, err := controlplane.StartKueueManager(ctx, controlplane.KueueConfig{
		Kubeconfig: c.Kubeconf, RESTConfig: c.Config, BinDir: c.BinDir, StateDir: stateDir, ModuleDir: modDir,
		JobNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{KueueNamespaceLabel: "true"}},
		Extra: map[string]any{"resources": map[string]any{"deviceClassMappings": []any{
			map[string]any{"name": KueueGPUResource, "deviceClassNames": []any{KueueGPUClass}},
		}}},
	})
	if err != nil {
		return nil, err
	}
	c.atExit = append(c.atExit, mgr.Stop)
	fmt.Fprintf(os.Stderr, "e2e: Kueue %s ready in %s (manager log %s)\n", controlplane.KueueVersion,
		time.Since(start).Round(time.Millisecond), filepath.Join(stateDir, "logs", controlplane.KueueManagerBinary+".log"))
	return &Kueue{c: c, Dynamic: dyn, Manager: mgr}, nil
}

// ManageNamespace lets Kueue's Job webhooks see the Jobs of ns.
func (k *Kueue) ManageNamespace(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, KueueNamespaceLabel)
	if _, err := k.c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling namespace %s for Kueue: %v", ns, err)
	}
}

// KueueResource is the resource of a Kueue kind (ClusterQueue ->
// clusterqueues) at KueueAPIVersion.
func KueueResource(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: strings.ToLower(kind) + "s"}
}

// Create creates Kueue objects. Cluster-scoped ones (ClusterQueue,
// ResourceFlavor, AdmissionCheck, ProvisioningRequestConfig) are deleted
// when the test ends; namespaced ones go with the namespace.
func (k *Kueue) Create(ctx context.Context, t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		res := k.Dynamic.Resource(KueueResource(o.GetKind()))
		var ri dynamic.ResourceInterface = res
		if o.GetNamespace() != "" {
			ri = res.Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetNamespace() == "" {
			name := o.GetName()
			t.Cleanup(func() { _ = res.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
}

// KueueObject is a Kueue object of kind named name (namespace "" for the
// cluster-scoped kinds) with spec.
func KueueObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": KueueAPIVersion, "kind": kind, "spec": spec}}
	o.SetName(name)
	o.SetNamespace(ns)
	return o
}

// Workloads lists the Workloads of ns.
func (k *Kueue) Workloads(ctx context.Context, ns string) ([]unstructured.Unstructured, error) {
	list, err := k.Dynamic.Resource(KueueResource("Workload")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// UpdateWorkloadStatus writes a Workload's status as a controller would
// (tests act as the controller of an admission check of their own).
func (k *Kueue) UpdateWorkloadStatus(ctx context.Context, wl *unstructured.Unstructured) error {
	_, err := k.Dynamic.Resource(KueueResource("Workload")).Namespace(wl.GetNamespace()).UpdateStatus(ctx, wl, metav1.UpdateOptions{})
	return err
}

// SetActive sets an AdmissionCheck's Active condition, as its controller
// would: a ClusterQueue admits nothing while one of its checks is not
// active.
func (k *Kueue) SetActive(ctx context.Context, t testing.TB, check string) {
	t.Helper()
	status := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": "Active", "status": "True", "reason": "Active", "message": "the test controls it",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}
	patch, _ := json.Marshal(status)
	if _, err := k.Dynamic.Resource(KueueResource("AdmissionCheck")).Patch(ctx, check, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("activating AdmissionCheck %s: %v", check, err)
	}
}
