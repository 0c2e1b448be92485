// Package framework is the end-to-end harness: one real local control plane
// per test binary (test/controlplane), a namespace per test, and waits that
// say what they last saw when they time out.
package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// KubeconfigEnv, when set, makes the tests use a running control plane (for
// example one from `make up`) instead of starting their own.
const KubeconfigEnv = "E2E_KUBECONFIG"

var (
	readyTimeout = flag.Duration("e2e.ready-timeout", 2*time.Minute, "how long to wait for each control-plane component")
	featureGates = flag.String("e2e.feature-gates", controlplane.DefaultFeatureGates, "feature gates of the control plane")
	keepState    = flag.Bool("e2e.keep-state", false, "keep the control plane's state directory (logs) after the run")
)

// Cluster is the control plane the tests of one binary share.
type Cluster struct {
	Config    *rest.Config
	Client    kubernetes.Interface
	StateDir  string // empty when reusing a running control plane
	BinDir    string
	Kubeconf  string
	ControlPl *controlplane.ControlPlane
	// atExit stops what tests started on demand (Cluster API), before the
	// control plane stops.
	atExit []func() error
}

var cluster *Cluster

// Run is the body of a TestMain: it brings the control plane up, runs the
// tests and stops it.
func Run(m *testing.M) int {
	flag.Parse()
	ctx := context.Background()
	c, err := setUp(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	cluster = c
	code := m.Run()
	for _, f := range c.atExit {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
	}
	if c.ControlPl != nil {
		if err := c.ControlPl.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping the control plane: %v\n", err)
		}
		if code == 0 && !*keepState {
			os.RemoveAll(c.StateDir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: control-plane logs kept in %s\n", filepath.Join(c.StateDir, "logs"))
		}
	}
	return code
}

func setUp(ctx context.Context) (*Cluster, error) {
	root, err := controlplane.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	binDir := filepath.Join(root, "_out", "bin")
	if kc := os.Getenv(KubeconfigEnv); kc != "" {
		return connect(kc, &Cluster{Kubeconf: kc, BinDir: binDir})
	}
	if err := controlplane.EnsureBinaries(ctx, binDir); err != nil {
		return nil, err
	}
	stageDir, err := controlplane.KwokStageDir(ctx)
	if err != nil {
		return nil, err
	}
	ports, err := controlplane.FreePorts()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, "_out", "e2e"), 0o755); err != nil {
		return nil, err
	}
	stateDir, err := os.MkdirTemp(filepath.Join(root, "_out", "e2e"), "cluster-")
	if err != nil {
		return nil, err
	}
	cfg := controlplane.ClusterConfig{StateDir: stateDir, BinDir: binDir, KwokStageDir: stageDir, Ports: ports,
		FeatureGates: *featureGates, ReadyTimeout: *readyTimeout}
	start := time.Now()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane ready in %s (state %s)\n", time.Since(start).Round(time.Millisecond), stateDir)
	return connect(cfg.KubeconfigPath(), &Cluster{StateDir: stateDir, BinDir: binDir,
		Kubeconf: cfg.KubeconfigPath(), ControlPl: cp})
}

func connect(kubeconfig string, c *Cluster) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	// Tests create objects in bursts; client-side throttling only slows them.
	cfg.QPS, cfg.Burst = 200, 400
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	c.Config = cfg
	if c.ControlPl != nil {
		c.ControlPl.RESTConfig = cfg
	}
	return c, nil
}

// Get returns the cluster of this test binary; Run must have set it up.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if cluster == nil {
		t.Fatal("e2e: no control plane; call framework.Run from TestMain")
	}
	return cluster
}
