// Package controlplane runs a real, local Kubernetes control plane for
// development, the demo and the end-to-end tests: etcd in-process (embed),
// kube-apiserver, kube-controller-manager and kube-scheduler built from this
// module's k8s.io/kubernetes, and a kwok controller that keeps simulated nodes
// Ready and bound pods Running. `make up` (hack/localcluster) and the e2e
// harness (test/e2e) both go through Start, so what the tests see is what a
// developer sees.
package controlplane

import (
	"fmt"
	"net"
	"path/filepath"
	"time"
)

// DefaultFeatureGates is the GPU-cluster profile: the DRA gates of 1.37 that
// are not on by default, plus the Workload API with gang and topology-aware
// scheduling, CompositePodGroups included. Gates that are locked to their
// default in 1.37 are left out because naming them only produces a warning.
const DefaultFeatureGates = "DRAConsumableCapacity=true,DRADeviceBindingConditions=true," +
	"DRADeviceTaints=true,DRADeviceTaintRules=true,DRAPartitionableDevices=true," +
	"DRAWorkloadResourceClaims=true,GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true"

// DefaultRuntimeConfig serves the Workload/PodGroup API in both versions a
// cluster of 1.37 may offer.
const DefaultRuntimeConfig = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"

// Ports are the loopback ports of the components. Two control planes with
// different ports (and state directories) can run side by side.
type Ports struct {
	Etcd, EtcdPeer, APIServer, ControllerManager, Scheduler, Kwok int
}

// PortsFrom lays the ports out consecutively from base.
func PortsFrom(base int) Ports {
	return Ports{Etcd: base, EtcdPeer: base + 1, APIServer: base + 2,
		ControllerManager: base + 3, Scheduler: base + 4, Kwok: base + 5}
}

// DefaultPortBase is where `make up` puts its ports; tests pick free ones.
const DefaultPortBase = 16440

// ClusterConfig says where the control plane keeps its state and how it runs.
type ClusterConfig struct {
	// StateDir holds certificates, logs, etcd data and the kubeconfig.
	StateDir string
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler
	// and kwok (see EnsureBinaries).
	BinDir string
	// KwokStageDir is kwok's kustomize/stage folder (see KwokStageDir).
	KwokStageDir string
	Ports        Ports
	// FeatureGates is passed to every component (apiserver, controller
	// manager and scheduler must agree).
	FeatureGates  string
	RuntimeConfig string
	// ReadyTimeout bounds the wait for each component.
	ReadyTimeout time.Duration
	// Verbosity is the klog -v of the components.
	Verbosity int
	// Progress hears each component start and become ready; nil is silent.
	Progress Progress `json:"-"`
}

// Defaults fills the zero fields.
func (c *ClusterConfig) Defaults() {
	if c.Ports == (Ports{}) {
		c.Ports = PortsFrom(DefaultPortBase)
	}
	if c.FeatureGates == "" {
		c.FeatureGates = DefaultFeatureGates
	}
	if c.RuntimeConfig == "" {
		c.RuntimeConfig = DefaultRuntimeConfig
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Minute
	}
	if c.Verbosity == 0 {
		c.Verbosity = 1
	}
}

func (c *ClusterConfig) validate() error {
	if c.StateDir == "" {
		return fmt.Errorf("control plane: StateDir is required")
	}
	if c.BinDir == "" {
		return fmt.Errorf("control plane: BinDir is required")
	}
	if c.KwokStageDir == "" {
		return fmt.Errorf("control plane: KwokStageDir is required")
	}
	seen := map[int]string{}
	for name, p := range c.Ports.byName() {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("control plane: port of %s is %d, want 1-65535", name, p)
		}
		if other, dup := seen[p]; dup {
			return fmt.Errorf("control plane: %s and %s both use port %d", name, other, p)
		}
		seen[p] = name
	}
	return nil
}

func (p Ports) byName() map[string]int {
	return map[string]int{"etcd": p.Etcd, "etcd-peer": p.EtcdPeer, "kube-apiserver": p.APIServer,
		"kube-controller-manager": p.ControllerManager, "kube-scheduler": p.Scheduler, "kwok": p.Kwok}
}

// All returns every port, for checks that nothing is left listening.
func (p Ports) All() []int {
	return []int{p.Etcd, p.EtcdPeer, p.APIServer, p.ControllerManager, p.Scheduler, p.Kwok}
}

// KubeconfigPath is where Start writes the admin kubeconfig.
func (c *ClusterConfig) KubeconfigPath() string { return filepath.Join(c.StateDir, "kubeconfig") }

func (c *ClusterConfig) path(elem ...string) string {
	return filepath.Join(append([]string{c.StateDir}, elem...)...)
}

// FreePorts picks unused loopback ports, for tests that run beside a
// developer's control plane. The ports are free when chosen; a race with
// another process remains possible and surfaces as a start-up error.
func FreePorts() (Ports, error) {
	var ps [6]int
	for i := range ps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return Ports{}, err
		}
		defer l.Close()
		ps[i] = l.Addr().(*net.TCPAddr).Port
	}
	return Ports{Etcd: ps[0], EtcdPeer: ps[1], APIServer: ps[2], ControllerManager: ps[3], Scheduler: ps[4], Kwok: ps[5]}, nil
}
