package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// KueueVersion is the Kueue manager built from hack/kueue (its own module,
// so Kueue's k8s.io pins stay out of the root go.mod). It is the newest
// version the Go module proxy serves (v0.18.0, v0.19.3 and v0.20.0 are
// refused; its version list shows only v0.17.0, but v0.17.1, v0.19.0,
// v0.19.1 and v0.19.2 download).
const KueueVersion = "v0.19.2"

// KueueManagerBinary is the file name of the manager in the bin folder.
const KueueManagerBinary = "kueue-manager"

const kueueModule = "sigs.k8s.io/kueue"

// KueueNamespace is where Kueue keeps its webhook certificate Secret.
const KueueNamespace = "kueue-system"

// The names Kueue's certificate rotator derives from its defaults
// (webhookServiceName kueue-webhook-service, webhookSecretName
// kueue-webhook-server-cert): it reads the Secret and writes its CA into
// these webhook configurations and into the CRDs with a conversion webhook.
const (
	kueueServiceDNS       = "kueue-webhook-service." + KueueNamespace + ".svc"
	kueueSecret           = "kueue-webhook-server-cert"
	kueueMutatingConfig   = "kueue-mutating-webhook-configuration"
	kueueValidatingConfig = "kueue-validating-webhook-configuration"
)

// EnsureKueueManager builds the Kueue manager into binDir. The first build
// took 14m43s on 2 cores shared with other builds (Kueue pins k8s.io v0.36.2
// and k8s.io/kubernetes v1.36.0, none of which our build cache holds); later
// calls find it up to date in about a second.
func EnsureKueueManager(ctx context.Context, binDir string) error {
	return kueueTool.build(ctx, binDir, "/cmd/kueue", KueueManagerBinary, "Kueue manager")
}

// KueueModuleDir is the Kueue module in the module cache (its CRDs under
// config/components/crd, its webhooks under config/components/webhook);
// EnsureKueueManager has downloaded it.
func KueueModuleDir(ctx context.Context) (string, error) {
	return kueueTool.moduleDir(ctx)
}

// KueueConfig says how the Kueue manager runs against a control plane.
type KueueConfig struct {
	Kubeconfig string
	RESTConfig *rest.Config
	BinDir     string
	// StateDir gets the certificates, the configuration and the log.
	StateDir string
	// ModuleDir is Kueue's module (see KueueModuleDir).
	ModuleDir string
	// JobNamespaces selects the namespaces whose Jobs Kueue's webhooks see
	// (and whose Jobs it manages): the tests share a control plane, and
	// other tests' Jobs must not depend on Kueue running.
	JobNamespaces *metav1.LabelSelector
	// Extra is merged into Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)
	// at the top level, e.g. resources.deviceClassMappings.
	Extra        map[string]any
	ReadyTimeout time.Duration
}

// KueueManager is a running Kueue manager.
type KueueManager struct {
	proc    *process
	dyn     dynamic.Interface
	LogPath string
}

// StartKueueManager installs Kueue's CRDs and its webhooks for Kueue's own
// objects and batch/v1 Jobs, then starts the manager on loopback ports.
//
// The webhooks and CRD conversions are registered by URL
// (https://127.0.0.1:<port>): this control plane routes no Services. Kueue
// cannot run without its internal certificate management (without it,
// it reads its metrics certificate from a fixed /etc path), so the test
// plays cert-manager: it writes a CA and a serving certificate for both
// 127.0.0.1 and the Service name into the Secret Kueue's rotator reads.
// The rotator finds them valid, keeps them and injects the same CA into
// the webhook configurations and CRDs; the certificate files it waits for
// in the cert dir (a kubelet would mount the Secret) are written too.
func StartKueueManager(ctx context.Context, cfg KueueConfig) (*KueueManager, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	certDir := filepath.Join(cfg.StateDir, "kueue-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	certs, err := newKueueCerts()
	if err != nil {
		return nil, fmt.Errorf("the Kueue webhook certificates: %w", err)
	}
	if err := writeFiles(map[string][]byte{filepath.Join(certDir, "tls.crt"): certs.cert, filepath.Join(certDir, "tls.key"): certs.key}); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, err
	}
	if err := writeKueueSecret(ctx, kube, certs); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	if err := installKueueCRDs(ctx, cfg.RESTConfig, cfg.ModuleDir, url, certs.ca); err != nil {
		return nil, err
	}
	if err := installKueueWebhooks(ctx, dyn, cfg.ModuleDir, url, certs.ca, cfg.JobNamespaces); err != nil {
		return nil, err
	}
	conf := map[string]any{
		"apiVersion":             "config.kueue.x-k8s.io/v1beta2",
		"kind":                   "Configuration",
		"namespace":              KueueNamespace,
		"health":                 map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", ports[1])},
		"metrics":                map[string]any{"bindAddress": fmt.Sprintf("127.0.0.1:%d", ports[2])},
		"webhook":                map[string]any{"host": "127.0.0.1", "port": ports[0], "certDir": certDir},
		"leaderElection":         map[string]any{"leaderElect": false},
		"internalCertManagement": map[string]any{"enable": true},
		"integrations":           map[string]any{"frameworks": []any{"batch/job"}},
		// The visibility API is an aggregated API server of its own, on a
		// fixed port; nothing here uses it.
		"featureGates": map[string]any{"VisibilityOnDemand": false},
	}
	if cfg.JobNamespaces != nil {
		conf["managedJobsNamespaceSelector"] = cfg.JobNamespaces
	}
	for k, v := range cfg.Extra {
		conf[k] = v
	}
	confData, err := yaml.Marshal(conf)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(cfg.StateDir, "kueue-config.yaml")
	if err := writeFiles(map[string][]byte{confPath: confData}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.StateDir, "logs", KueueManagerBinary+".log")
	args := []string{"--kubeconfig=" + cfg.Kubeconfig, "--config=" + confPath, "--zap-log-level=3"}
	p, err := startProcess(KueueManagerBinary, filepath.Join(cfg.BinDir, KueueManagerBinary), args, logPath)
	if err != nil {
		return nil, err
	}
	m := &KueueManager{proc: p, dyn: dyn, LogPath: logPath}
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	// Ready once the certificates are in place and the webhook server listens.
	if err := p.waitReady(ctx, cfg.ReadyTimeout, func(ctx context.Context) error {
		return getOK(ctx, readyz)
	}); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// Stop stops the manager and removes its webhook configurations: their
// failurePolicy is Fail, so on a control plane that outlives the manager
// (make up) they would refuse every Kueue object.
func (m *KueueManager) Stop() error {
	err := m.proc.stop(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, wh := range []struct {
		res  string
		name string
	}{{"mutatingwebhookconfigurations", kueueMutatingConfig}, {"validatingwebhookconfigurations", kueueValidatingConfig}} {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: wh.res}
		if derr := m.dyn.Resource(gvr).Delete(ctx, wh.name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) && err == nil {
			err = derr
		}
	}
	return err
}

// Exited is closed when the manager has stopped, on its own or by Stop.
func (m *KueueManager) Exited() <-chan struct{} { return m.proc.done }

type kueueCerts struct{ ca, caKey, cert, key []byte }

// newKueueCerts makes what Kueue's rotator accepts as valid (see
// cert-controller's ValidCert): a CA whose DNS name is "kueue-ca", with a
// PKCS#1 RSA key, and a serving certificate it signed for the Service name,
// here also for 127.0.0.1, valid well past the rotator's 90-day lookahead.
func newKueueCerts() (*kueueCerts, error) {
	now := time.Now()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kueue-ca", Organization: []string{"kueue"}},
		DNSNames: []string{"kueue-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: kueueServiceDNS},
		DNSNames: []string{kueueServiceDNS}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	pemOf := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	return &kueueCerts{
		ca: pemOf("CERTIFICATE", caDER), caKey: pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey)),
		cert: pemOf("CERTIFICATE", der), key: pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)),
	}, nil
}

// writeKueueSecret creates (or, on a reused control plane, replaces) the
// Secret the rotator reads, in its namespace.
func writeKueueSecret(ctx context.Context, kube kubernetes.Interface, c *kueueCerts) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", KueueNamespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kueueSecret, Namespace: KueueNamespace},
		Data:       map[string][]byte{"ca.crt": c.ca, "ca.key": c.caKey, "tls.crt": c.cert, "tls.key": c.key},
	}
	secrets := kube.CoreV1().Secrets(KueueNamespace)
	_, err := secrets.Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", KueueNamespace, kueueSecret, err)
	}
	return nil
}

// installKueueCRDs creates Kueue's CRDs; those Kueue's kustomization gives
// a conversion webhook (its patches/webhook_in_*.yaml) get one at url. The
// rest are served without conversion, as upstream installs them.
func installKueueCRDs(ctx context.Context, cfg *rest.Config, moduleDir, url string, caPEM []byte) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crdDir := filepath.Join(moduleDir, "config", "components", "crd")
	var kustomization struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := readYAML(filepath.Join(crdDir, "kustomization.yaml"), &kustomization); err != nil {
		return err
	}
	converted := map[string]bool{}
	for _, p := range kustomization.Patches {
		var patch struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := readYAML(filepath.Join(crdDir, p.Path), &patch); err != nil {
			return err
		}
		converted[patch.Metadata.Name] = true
	}
	conversion := map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig":             map[string]any{"url": url + "/convert", "caBundle": base64.StdEncoding.EncodeToString(caPEM)},
		},
	}
	crds := client.Resource(CRDResource)
	var names []string
	for _, f := range kustomization.Resources {
		obj := &unstructured.Unstructured{}
		if err := readYAML(filepath.Join(crdDir, f), &obj.Object); err != nil {
			return err
		}
		var patch []byte
		if converted[obj.GetName()] {
			if err := unstructured.SetNestedField(obj.Object, conversion, "spec", "conversion"); err != nil {
				return err
			}
			patch, _ = json.Marshal(map[string]any{"spec": map[string]any{"conversion": conversion}})
		}
		names = append(names, obj.GetName())
		// Create, not apply: the Workload CRD is larger than the
		// last-applied annotation allows.
		_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && patch != nil {
			_, err = crds.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		} else if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", obj.GetName(), err)
		}
	}
	return WaitCRDsEstablished(ctx, cfg, names, time.Minute)
}

// installKueueWebhooks registers Kueue's own webhooks (for kueue.x-k8s.io
// objects, and batch/v1 Jobs, the one integration enabled) by URL, from
// the module's manifests. The Job webhooks get jobNamespaces as their
// namespace selector.
func installKueueWebhooks(ctx context.Context, dyn dynamic.Interface, moduleDir, url string, caPEM []byte, jobNamespaces *metav1.LabelSelector) error {
	data, err := os.ReadFile(filepath.Join(moduleDir, "config", "components", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	names := map[string]string{"MutatingWebhookConfiguration": kueueMutatingConfig, "ValidatingWebhookConfiguration": kueueValidatingConfig}
	var selector map[string]any
	if jobNamespaces != nil {
		raw, _ := json.Marshal(jobNamespaces)
		if err := json.Unmarshal(raw, &selector); err != nil {
			return err
		}
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		name, ok := names[obj.GetKind()]
		if !ok {
			return fmt.Errorf("unexpected %s in Kueue's webhook manifests", obj.GetKind())
		}
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		var kept []any
		for _, h := range hooks {
			hook := h.(map[string]any)
			group, path := webhookTarget(hook)
			if group != "kueue.x-k8s.io" && group != "batch" {
				continue
			}
			hook["clientConfig"] = map[string]any{"url": url + path, "caBundle": base64.StdEncoding.EncodeToString(caPEM)}
			if group == "batch" && selector != nil {
				hook["namespaceSelector"] = selector
			}
			kept = append(kept, hook)
		}
		if err := unstructured.SetNestedSlice(obj.Object, kept, "webhooks"); err != nil {
			return err
		}
		obj.SetName(name)
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: strings.ToLower(obj.GetKind()) + "s"}
		client := dyn.Resource(gvr)
		if old, err := client.Get(ctx, name, metav1.GetOptions{}); err == nil {
			obj.SetResourceVersion(old.GetResourceVersion())
			_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
			if err != nil {
				return fmt.Errorf("updating %s: %w", name, err)
			}
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
	}
	return nil
}

// webhookTarget is the API group of a webhook's first rule and the path of
// its service reference.
func webhookTarget(hook map[string]any) (group, path string) {
	path, _, _ = unstructured.NestedString(hook, "clientConfig", "service", "path")
	rules, _, _ := unstructured.NestedSlice(hook, "rules")
	if len(rules) > 0 {
		groups, _, _ := unstructured.NestedStringSlice(rules[0].(map[string]any), "apiGroups")
		if len(groups) > 0 {
			group = groups[0]
		}
	}
	return group, path
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
