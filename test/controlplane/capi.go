package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"
)

// CAPIVersion is the Cluster API core manager built from hack/capi (its own
// module: Cluster API pins k8s.io v0.36 and has replace directives, so
// neither the root module nor `go install module@version` can build it).
const CAPIVersion = "v1.14.2"

// CAPIManagerBinary is the file name of the manager in the bin folder.
const CAPIManagerBinary = "capi-manager"

const capiModule = "sigs.k8s.io/cluster-api"

// EnsureCAPIManager builds the Cluster API core manager into binDir. The
// first build takes ~5.5 minutes on 2 cores (its k8s.io dependencies are not
// ours, so our build cache does not help); later calls find the binary up to
// date and return in about a second.
func EnsureCAPIManager(ctx context.Context, binDir string) error {
	return capiTool.build(ctx, binDir, "/core", CAPIManagerBinary, "Cluster API manager")
}

// CAPICRDDir is the folder of Cluster API's core CRDs (plain YAML, 13 files)
// in the module cache; EnsureCAPIManager has downloaded the module.
func CAPICRDDir(ctx context.Context) (string, error) {
	dir, err := capiTool.moduleDir(ctx)
	if err != nil {
		return "", err
	}
	crds := filepath.Join(dir, "core", "config", "crd", "bases")
	if _, err := os.Stat(crds); err != nil {
		return "", fmt.Errorf("the Cluster API CRDs: %w", err)
	}
	return crds, nil
}

// CAPIConfig says how the Cluster API manager runs against a control plane.
type CAPIConfig struct {
	// Kubeconfig is the admin kubeconfig of the control plane; RESTConfig
	// is the same, for installing the CRDs.
	Kubeconfig string
	RESTConfig *rest.Config
	// BinDir holds capi-manager (see EnsureCAPIManager).
	BinDir string
	// StateDir gets the webhook certificate and the manager's log.
	StateDir string
	// CRDDir holds Cluster API's CRDs (see CAPICRDDir).
	CRDDir string
	// FeatureGates of the manager, e.g. "MachinePool=true" (empty: defaults).
	FeatureGates string
	ReadyTimeout time.Duration
}

// CAPIManager is a running Cluster API core manager.
type CAPIManager struct {
	proc *process
	// WebhookPort serves the CRD conversions (and the webhooks, which no
	// webhook configuration points at).
	WebhookPort int
	LogPath     string
}

// StartCAPIManager installs Cluster API's CRDs with their conversion served
// by the manager (so v1beta1 reads of v1beta2 objects are right), and starts
// the manager on loopback ports. No validating or mutating webhook is
// registered: objects get no defaults, so their creators must set them (see
// test/capi).
func StartCAPIManager(ctx context.Context, cfg CAPIConfig) (*CAPIManager, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	certDir := filepath.Join(cfg.StateDir, "capi-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	// The manager's webhook server refuses to start without a certificate;
	// the API server checks it against the caBundle of the conversion.
	cert, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, fmt.Errorf("the Cluster API webhook certificate: %w", err)
	}
	if err := writeFiles(map[string][]byte{filepath.Join(certDir, "tls.crt"): cert, filepath.Join(certDir, "tls.key"): key}); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if err := installCAPICRDs(ctx, cfg.RESTConfig, cfg.CRDDir, ports[0], cert); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.StateDir, "logs", CAPIManagerBinary+".log")
	args := []string{
		"--kubeconfig=" + cfg.Kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--webhook-port=%d", ports[0]), "--webhook-cert-dir=" + certDir,
		fmt.Sprintf("--health-addr=127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--diagnostics-address=127.0.0.1:%d", ports[2]), "--insecure-diagnostics",
	}
	if cfg.FeatureGates != "" {
		args = append(args, "--feature-gates="+cfg.FeatureGates)
	}
	p, err := startProcess(CAPIManagerBinary, filepath.Join(cfg.BinDir, CAPIManagerBinary), args, logPath)
	if err != nil {
		return nil, err
	}
	m := &CAPIManager{proc: p, WebhookPort: ports[0], LogPath: logPath}
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	// Watching every CRD takes the manager a few seconds before /readyz says ok.
	if err := p.waitReady(ctx, cfg.ReadyTimeout, func(ctx context.Context) error {
		return getOK(ctx, readyz)
	}); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// Stop stops the manager.
func (m *CAPIManager) Stop() error { return m.proc.stop(10 * time.Second) }

// Exited is closed when the manager has stopped, on its own or by Stop.
func (m *CAPIManager) Exited() <-chan struct{} { return m.proc.done }

func getOK(ctx context.Context, url string) error {
	return get(ctx, http.DefaultClient, url, "")
}

// installCAPICRDs creates each CRD of dir (create, not client-side apply: the
// ClusterClass CRD is larger than the last-applied annotation allows) with a
// conversion webhook pointing at the manager. A CRD left by an earlier run
// (a reused control plane) gets its conversion pointed at this manager.
func installCAPICRDs(ctx context.Context, cfg *rest.Config, dir string, port int, caPEM []byte) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no Cluster API CRDs in %s", dir)
	}
	sort.Strings(files)
	conversion := map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", port),
				"caBundle": base64.StdEncoding.EncodeToString(caPEM),
			},
		},
	}
	crds := client.Resource(CRDResource)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := unstructured.SetNestedField(obj.Object, conversion, "spec", "conversion"); err != nil {
			return err
		}
		names = append(names, obj.GetName())
		_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"conversion": conversion}})
			_, err = crds.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", obj.GetName(), err)
		}
	}
	return WaitCRDsEstablished(ctx, cfg, names, time.Minute)
}

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// WaitCRDsEstablished waits until every named CRD is Established.
func WaitCRDsEstablished(ctx context.Context, cfg *rest.Config, names []string, timeout time.Duration) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, name := range names {
		for {
			got, err := client.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
			if err == nil && crdEstablished(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after %s (last error %v)", name, timeout, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
