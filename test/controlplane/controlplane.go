package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// KwokNodeAnnotation marks the nodes the kwok controller manages; nodes
// without it are left alone.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// KwokNodeAnnotationValue is the value kwok selects on.
const KwokNodeAnnotationValue = "fake"

// ControlPlane is a running local control plane.
type ControlPlane struct {
	cfg   ClusterConfig
	etcd  *embed.Etcd
	procs []*process // in start order
	// RESTConfig is the admin client configuration.
	RESTConfig *rest.Config
}

// Start brings up etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, each waited for in turn. On failure everything
// already started is stopped and the error names the component that did not
// come up, with the last lines of its log.
func Start(ctx context.Context, cfg ClusterConfig) (*ControlPlane, error) {
	cfg.Defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.path("logs"), 0o755); err != nil {
		return nil, err
	}
	creds, err := ensureCredentials(cfg.path("pki"))
	if err != nil {
		return nil, fmt.Errorf("control plane credentials: %w", err)
	}
	if err := writeKubeconfig(cfg.KubeconfigPath(), cfg.Ports.APIServer, creds); err != nil {
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	cp := &ControlPlane{cfg: cfg}
	if err := cp.start(ctx, creds); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context, creds *credentials) error {
	cfg := &cp.cfg
	var err error
	done := cfg.Progress.Begin("start etcd")
	cp.etcd, err = startEtcd(cfg, cfg.ReadyTimeout)
	if done(err); err != nil {
		return err
	}
	if cp.RESTConfig, err = clientcmd.BuildConfigFromFlags("", cfg.KubeconfigPath()); err != nil {
		return err
	}
	schedConfig, err := writeSchedulerConfig(cfg)
	if err != nil {
		return err
	}
	for _, c := range cp.components(creds, schedConfig) {
		done := cfg.Progress.Begin("start " + c.name)
		p, err := startProcess(c.name, filepath.Join(cfg.BinDir, c.name), c.args, cfg.path("logs", c.name+".log"))
		if err != nil {
			done(err)
			return err
		}
		cp.procs = append(cp.procs, p)
		err = p.waitReady(ctx, cfg.ReadyTimeout, c.ready)
		if done(err); err != nil {
			return err
		}
	}
	return nil
}

// ClusterConfig returns the configuration the control plane runs with.
func (cp *ControlPlane) ClusterConfig() ClusterConfig { return cp.cfg }

// Exited reports the first component that stopped on its own, for
// supervisors that must not keep a half-dead control plane.
func (cp *ControlPlane) Exited(ctx context.Context) error {
	for {
		for _, p := range cp.procs {
			select {
			case <-p.done:
				return p.failure(fmt.Sprintf("exited (%v)", p.err))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-cp.etcd.Err():
			return fmt.Errorf("etcd: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// Stop stops the components in reverse order and then etcd. It is safe on a
// partly started control plane.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for i := len(cp.procs) - 1; i >= 0; i-- {
		if err := cp.procs[i].stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	cp.procs = nil
	if cp.etcd != nil {
		cp.etcd.Close()
		cp.etcd = nil
	}
	return errors.Join(errs...)
}

type component struct {
	name  string
	args  []string
	ready func(context.Context) error
}

func (cp *ControlPlane) components(creds *credentials, schedConfig string) []component {
	cfg := &cp.cfg
	kubeconfig := cfg.KubeconfigPath()
	v := fmt.Sprintf("--v=%d", cfg.Verbosity)
	gates := "--feature-gates=" + cfg.FeatureGates
	secure := func(port int) []string {
		return []string{"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)}
	}
	delegated := []string{"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig}

	apiserver := append(secure(cfg.Ports.APIServer),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", cfg.Ports.Etcd),
		"--advertise-address=127.0.0.1",
		// The kubernetes Service cannot point at loopback; nothing here needs it.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file="+creds.servingCert, "--tls-private-key-file="+creds.servingKey,
		"--token-auth-file="+creds.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+creds.saKey, "--service-account-signing-key-file="+creds.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--runtime-config="+cfg.RuntimeConfig,
		gates, v)
	kcm := append(append(secure(cfg.Ports.ControllerManager), delegated...),
		"--leader-elect=false",
		"--service-account-private-key-file="+creds.saKey,
		"--root-ca-file="+creds.servingCert,
		"--use-service-account-credentials=false",
		"--controllers=*,-bootstrap-signer-controller,-token-cleaner-controller",
		"--profiling=false",
		gates, v)
	scheduler := append(append(secure(cfg.Ports.Scheduler), delegated...),
		"--config="+schedConfig, "--profiling=false", gates, v)
	kwok := append(KwokArgs(kubeconfig, cfg.KwokStageDir, KwokNodeAnnotationValue, cfg.Ports.Kwok), v)
	return []component{
		{"kube-apiserver", apiserver, cp.httpsReady(cfg.Ports.APIServer, "/readyz", creds)},
		{"kube-controller-manager", kcm, cp.httpsReady(cfg.Ports.ControllerManager, "/healthz", nil)},
		{"kube-scheduler", scheduler, cp.httpsReady(cfg.Ports.Scheduler, "/readyz", nil)},
		{"kwok", kwok, func(ctx context.Context) error {
			return get(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", cfg.Ports.Kwok), "")
		}},
	}
}

// KwokArgs are the arguments of a kwok controller that manages the nodes
// annotated KwokNodeAnnotation=value (and their pods), serving its health
// on port. The control plane runs one for "fake"; a test may run another
// for nodes of its own, to stop and start their heartbeats together (a
// zone outage).
func KwokArgs(kubeconfig, stageDir, value string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + value,
		"--config=" + strings.Join(kwokStages(stageDir), ","),
		fmt.Sprintf("--server-address=127.0.0.1:%d", port),
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
	}
}

// kwokStages are the stage configs kwok needs: nodes become Ready and keep a
// Lease (so the node lifecycle controller leaves them alone), bound pods
// become Running, deleted pods go away.
func kwokStages(stageDir string) []string {
	var files []string
	for _, dir := range []string{"node/fast", "node/heartbeat-with-lease", "pod/fast"} {
		matches, _ := filepath.Glob(filepath.Join(stageDir, dir, "*.yaml"))
		for _, m := range matches {
			if filepath.Base(m) != "kustomization.yaml" {
				files = append(files, m)
			}
		}
	}
	return files
}

// The scheduler's second profile, beside default-scheduler: it adds to
// every pod it schedules a node affinity requiring PoolLabel=PoolValue
// (NodeAffinityArgs.addedAffinity). Only pods that name it in
// spec.schedulerName meet it, so tests sharing the control plane are
// undisturbed; the e2e tests use it for a profile argument the
// autoscaler must honour.
const (
	PoolSchedulerName = "pool-scheduler"
	PoolLabel         = "e2e.dra-autoscaler.io/pool"
	PoolValue         = "accel"
)

// PoolSchedulerProfile is the profile named PoolSchedulerName, for an
// autoscaler's --scheduler-config-file to simulate.
func PoolSchedulerProfile() *builder.SchedulerProfileBuilder {
	return builder.SchedulerProfile(PoolSchedulerName).RequireNodeLabel(PoolLabel, PoolValue)
}

func writeSchedulerConfig(cfg *ClusterConfig) (string, error) {
	path := cfg.path("kube-scheduler.yaml")
	profiles, err := builder.SchedulerProfilesYAML(builder.SchedulerProfile(corev1.DefaultSchedulerName), PoolSchedulerProfile())
	if err != nil {
		return "", err
	}
	data := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
%s`, cfg.KubeconfigPath(), profiles)
	return path, os.WriteFile(path, []byte(data), 0o644)
}

// httpsReady checks a component's health endpoint. The apiserver is checked
// against our CA with the admin token; the other components serve a
// self-signed certificate and allow health checks without credentials.
func (cp *ControlPlane) httpsReady(port int, path string, creds *credentials) func(context.Context) error {
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback health check of a self-signed component
	token := ""
	if creds != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(creds.caData)
		tlsConfig = &tls.Config{RootCAs: pool}
		token = creds.token
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
	return func(ctx context.Context) error { return get(ctx, client, url, token) }
}

func get(ctx context.Context, client *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, tail(string(body), 5))
	}
	return httpBodyOK(body)
}
