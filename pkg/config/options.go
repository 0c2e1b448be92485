// Package config holds the autoscaler's options, their command-line flags
// (named and defaulted as the upstream cluster autoscaler's where the
// concept is the same) and their validation.
package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config"
)

// NodeGroupSpec is one --nodes=min:max:name.
type NodeGroupSpec struct {
	Name     string
	Min, Max int
}

// ParseNodeGroupSpec parses min:max:name.
func ParseNodeGroupSpec(s string) (NodeGroupSpec, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || parts[2] == "" {
		return NodeGroupSpec{}, fmt.Errorf("--nodes=%q: want min:max:name", s)
	}
	min, err := strconv.Atoi(parts[0])
	if err != nil || min < 0 {
		return NodeGroupSpec{}, fmt.Errorf("--nodes=%q: min %q is not a non-negative integer", s, parts[0])
	}
	max, err := strconv.Atoi(parts[1])
	if err != nil || max < 0 {
		return NodeGroupSpec{}, fmt.Errorf("--nodes=%q: max %q is not a non-negative integer", s, parts[1])
	}
	if max < min {
		return NodeGroupSpec{}, fmt.Errorf("--nodes=%q: max %d is below min %d", s, max, min)
	}
	return NodeGroupSpec{Name: parts[2], Min: min, Max: max}, nil
}

// Range is a min:max pair (--cores-total, --memory-total).
type Range struct{ Min, Max int64 }

// ParseRange parses "min:max" of non-negative integers.
func ParseRange(flag, s string) (Range, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return Range{}, fmt.Errorf("--%s=%q: want min:max", flag, s)
	}
	min, err1 := strconv.ParseInt(parts[0], 10, 64)
	max, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || min < 0 || max < 0 {
		return Range{}, fmt.Errorf("--%s=%q: min and max must be non-negative integers", flag, s)
	}
	if max < min {
		return Range{}, fmt.Errorf("--%s=%q: max is below min", flag, s)
	}
	return Range{Min: min, Max: max}, nil
}

// Options is everything the autoscaler is configured with.
type Options struct {
	// Version asks for the version to be printed and nothing else done
	// (--version); the other options are then left unchecked.
	Version bool

	Kubeconfig    string
	CloudProvider string
	CloudConfig   string
	// NodeGroupAutoDiscovery are --node-group-auto-discovery specs
	// (clusterapi:key=value,...), for providers that discover groups.
	NodeGroupAutoDiscovery []string
	// NodeGroups come from --nodes; empty means every group the provider has.
	NodeGroups []NodeGroupSpec

	ScanInterval         time.Duration
	Expanders            []string
	MaxNodesTotal        int
	CoresTotal           Range
	MemoryTotal          Range // GiB, as upstream
	MaxNodeProvisionTime time.Duration
	// DRAPoolStallTime is how long a Ready node's incomplete DRA pool may
	// stay unchanged before the node stops counting as coming capacity.
	DRAPoolStallTime               time.Duration
	MaxNodesPerScaleUp             int
	MaxNodeGroupBinpackingDuration time.Duration
	ScaleUpFromZero                bool
	NewPodScaleUpDelay             time.Duration
	ExpendablePodsPriorityCutoff   int

	InitialNodeGroupBackoffDuration time.Duration
	MaxNodeGroupBackoffDuration     time.Duration
	NodeGroupBackoffResetTimeout    time.Duration

	// PriorityExpanderConfigMap is the ConfigMap (in Namespace) of the
	// priority expander, upstream's name by default.
	PriorityExpanderConfigMap string

	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	Address        string
	Namespace      string

	// SchedulerConfigFile is a KubeSchedulerConfiguration for the
	// simulated scheduler; empty means the default profile of 1.37.
	SchedulerConfigFile string
	// FeatureGates are the simulated scheduler's, which must match the
	// cluster's scheduler.
	FeatureGates string

	Health    HealthOptions
	Sharing   SharingOptions
	ScaleDown ScaleDownOptions
	ExplainOptions
	ProvisioningRequests ProvisioningRequestOptions
	CapacityBuffers      CapacityBufferOptions
	Reservations         ReservationOptions
	Nominations          NominationOptions
	Simulation           SimulationOptions

	Balancing  BalancingOptions
	KubeClient KubeClientOptions
	// Profiling serves net/http/pprof under /debug/pprof/ on
	// ProfilingAddress, a listener of its own (loopback by default):
	// profiles show memory contents and cost CPU, so they are not served
	// to whoever can reach /metrics.
	Profiling        bool
	ProfilingAddress string

	compat    compatFlags
	softTaint softTaintOptions
}

// DefaultProfilingAddress is --profiling-address's default: loopback,
// reached with `kubectl port-forward` (Go's usual pprof port).
const DefaultProfilingAddress = "127.0.0.1:6060"

// Default returns the options with upstream's defaults.
func Default() *Options {
	return &Options{
		CloudProvider:                   "kwok",
		ScanInterval:                    10 * time.Second,
		Expanders:                       []string{"reserved", "least-waste"},
		CoresTotal:                      Range{Min: 0, Max: 320000},
		MemoryTotal:                     Range{Min: 0, Max: 6400000},
		MaxNodeProvisionTime:            15 * time.Minute,
		DRAPoolStallTime:                5 * time.Minute,
		MaxNodesPerScaleUp:              1000,
		MaxNodeGroupBinpackingDuration:  10 * time.Second,
		ScaleUpFromZero:                 true,
		ExpendablePodsPriorityCutoff:    -10,
		InitialNodeGroupBackoffDuration: 5 * time.Minute,
		MaxNodeGroupBackoffDuration:     30 * time.Minute,
		NodeGroupBackoffResetTimeout:    3 * time.Hour,
		PriorityExpanderConfigMap:       "cluster-autoscaler-priority-expander",
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      "cluster-autoscaler",
			ResourceNamespace: "kube-system",
		},
		Address:          ":8085",
		ProfilingAddress: DefaultProfilingAddress,
		Namespace:        "kube-system",
		Health:           DefaultHealth(),
		Sharing:          DefaultSharing(),
		ScaleDown:        DefaultScaleDown(),
		ExplainOptions:   DefaultExplain(),

		ProvisioningRequests: DefaultProvisioningRequestOptions(),
		CapacityBuffers:      DefaultCapacityBufferOptions(),
		Reservations:         defaultReservationOptions(),
		Nominations:          DefaultNominations(),
		Simulation:           DefaultSimulation(),

		KubeClient: DefaultKubeClient(),
		compat:     compatFlags{estimator: "binpacking", dynamicResources: true},
		softTaint:  softTaintOptions{count: 10, time: 3 * time.Second},
	}
}
