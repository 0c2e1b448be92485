package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/dra-autoscaler/dra-autoscaler/test/capi"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// CAPI is Cluster API on the test control plane: the real core manager
// (webhook-less, see controlplane.StartCAPIManager) and the dev
// infrastructure provider of test/capi/infra, running in this test binary.
type CAPI struct {
	c       *Cluster
	Dynamic dynamic.Interface
	Manager *controlplane.CAPIManager
}

var (
	capiOnce sync.Once
	capiEnv  *CAPI
	capiErr  error
)

// CAPI starts Cluster API the first time a test of this binary asks for it
// (a few seconds once built; `make binaries` builds it) and returns it to
// every later caller. It stops when the binary's tests end.
func (c *Cluster) CAPI(t testing.TB) *CAPI {
	t.Helper()
	capiOnce.Do(func() { capiEnv, capiErr = c.startCAPI() })
	if capiErr != nil {
		t.Fatalf("starting Cluster API: %v", capiErr)
	}
	return capiEnv
}

func (c *Cluster) startCAPI() (*CAPI, error) {
	ctx := context.Background()
	start := time.Now()
	if err := controlplane.EnsureCAPIManager(ctx, c.BinDir); err != nil {
		return nil, err
	}
	crdDir, err := controlplane.CAPICRDDir(ctx)
	if err != nil {
		return nil, err
	}
	stateDir := c.StateDir
	if stateDir == "" {
		if stateDir, err = os.MkdirTemp("", "e2e-capi-"); err != nil {
			return nil, err
		}
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	names, err := infra.InstallCRDs(ctx, dyn)
	if err != nil {
		return nil, err
	}
	if err := controlplane.WaitCRDsEstablished(ctx, c.Config, names, time.Minute); err != nil {
		return nil, err
	}
	mgr, err := controlplane.StartCAPIManager(ctx, controlplane.CAPIConfig{
		Kubeconfig: c.Kubeconf, RESTConfig: c.Config, BinDir: c.BinDir, StateDir: stateDir, CRDDir: crdDir,
	})
	if err != nil {
		return nil, err
	}
	ictx, stop := context.WithCancel(ctx)
	ctrl := infra.New(dyn, c.Client, infra.Options{KubeletVersion: controlplane.KubernetesVersion})
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ictx) }()
	c.atExit = append(c.atExit, func() error {
		stop()
		return mgr.Stop()
	})
	fmt.Fprintf(os.Stderr, "e2e: Cluster API %s ready in %s (manager log %s)\n", controlplane.CAPIVersion,
		time.Since(start).Round(time.Millisecond), filepath.Join(stateDir, "logs", controlplane.CAPIManagerBinary+".log"))
	return &CAPI{c: c, Dynamic: dyn, Manager: mgr}, nil
}

// NewCluster makes a Cluster API Cluster named name in ns whose workload
// cluster is the test control plane itself: the fake control plane, the
// <name>-kubeconfig Secret (admin), the Cluster; it waits until Cluster API
// reports the control plane initialized.
func (e *CAPI) NewCluster(ctx context.Context, t testing.TB, ns, name string) {
	t.Helper()
	kubeconfig, err := os.ReadFile(e.c.Kubeconf)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns,
			// The manager caches only Secrets with this label.
			Labels: map[string]string{capi.ClusterNameLabel: name}},
		Data: map[string][]byte{capi.KubeconfigSecretKey: kubeconfig},
		Type: "cluster.x-k8s.io/secret",
	}
	if _, err := e.c.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Secret %s/%s: %v", ns, secret.Name, err)
	}
	e.Create(ctx, t, capi.ControlPlane(ns, name+"-cp"), capi.Cluster(ns, name, u.Hostname(), port))
	Eventually(ctx, t, time.Minute, "Cluster "+ns+"/"+name+" control plane initialized", func(ctx context.Context) (bool, string, error) {
		got, err := e.Dynamic.Resource(capi.ClusterResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ok, _, _ := unstructured.NestedBool(got.Object, "status", "initialization", "controlPlaneInitialized")
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		return ok, "phase " + phase, nil
	})
}

// Create creates Cluster API and dev infrastructure objects (see test/capi).
// They go with the test's namespace.
func (e *CAPI) Create(ctx context.Context, t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		res, err := capi.ResourceOf(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Dynamic.Resource(res).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// Annotate merges annotations (a nil value removes one) into an object of
// kind res, e.g. a fault onto a DevMachineTemplate or delete-machine onto a
// Machine.
func (e *CAPI) Annotate(ctx context.Context, t testing.TB, obj *unstructured.Unstructured, ann map[string]*string) {
	t.Helper()
	res, err := capi.ResourceOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dynamic.Resource(res).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

// Scale sets a MachineDeployment's, MachineSet's or MachinePool's
// spec.replicas through its scale subresource, as an autoscaler does.
func (e *CAPI) Scale(ctx context.Context, t testing.TB, group *unstructured.Unstructured, replicas int32) {
	t.Helper()
	res, err := capi.ResourceOf(group)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := e.Dynamic.Resource(res).Namespace(group.GetNamespace()).Patch(ctx, group.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("scaling %s %s/%s to %d: %v", group.GetKind(), group.GetNamespace(), group.GetName(), replicas, err)
	}
}

// Machines lists the Machines of a MachineDeployment or MachineSet (by its
// name label), or all of ns when group is "".
func (e *CAPI) Machines(ctx context.Context, ns, deployment string) ([]capi.Machine, []unstructured.Unstructured, error) {
	sel := labels.Everything()
	if deployment != "" {
		sel = labels.SelectorFromSet(labels.Set{capi.DeploymentNameLabel: deployment})
	}
	list, err := e.Dynamic.Resource(capi.MachineResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, err
	}
	return capi.Machines(list.Items), list.Items, nil
}

// WaitMachines waits until the Machines of deployment satisfy ok.
func (e *CAPI) WaitMachines(ctx context.Context, t testing.TB, timeout time.Duration, ns, deployment, what string, ok func([]capi.Machine) bool) []capi.Machine {
	t.Helper()
	var got []capi.Machine
	Eventually(ctx, t, timeout, what, func(ctx context.Context) (bool, string, error) {
		var err error
		if got, _, err = e.Machines(ctx, ns, deployment); err != nil {
			return false, "", err
		}
		return ok(got), capi.Summary(got), nil
	})
	return got
}

// RunningWithNodes is a WaitMachines condition: exactly n Machines, each
// Running with its Node.
func RunningWithNodes(n int) func([]capi.Machine) bool {
	return func(ms []capi.Machine) bool {
		if len(ms) != n {
			return false
		}
		for _, m := range ms {
			if m.Phase != "Running" || m.NodeName == "" || m.Deleting {
				return false
			}
		}
		return true
	}
}

// AutoscalerArgs are the dra-autoscaler flags for its clusterapi provider
// on this Cluster API, with upstream's meanings: the management cluster's
// kubeconfig in --cloud-config (here the same API server) and the node
// groups of cluster in ns discovered. Append them to StartAutoscaler's
// args (later flags override its kwok defaults).
func (e *CAPI) AutoscalerArgs(ns, cluster string) []string {
	return []string{
		"--cloud-provider=clusterapi",
		"--cloud-config=" + e.c.Kubeconf,
		"--node-group-auto-discovery=clusterapi:namespace=" + ns + ",clusterName=" + cluster,
	}
}
