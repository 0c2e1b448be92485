package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// ScaleDownOptions configure scale-down; flag names and defaults are
// upstream's.
type ScaleDownOptions struct {
	Enabled bool
	// DelayAfterAdd, DelayAfterDelete and DelayAfterFailure are the
	// cooldowns after a scale-up, a node deletion and a failed removal.
	// DelayAfterDelete 0 means the scan interval, as upstream.
	DelayAfterAdd     time.Duration
	DelayAfterDelete  time.Duration
	DelayAfterFailure time.Duration
	// UnneededTime is how long a node must stay unneeded before removal.
	UnneededTime time.Duration
	// UnreadyEnabled lets scale-down remove unready nodes, once they
	// have been unneeded for UnreadyTime (instead of UnneededTime).
	UnreadyEnabled bool
	UnreadyTime    time.Duration
	// UtilizationThreshold and GPUUtilizationThreshold: nodes under them
	// (nodes with DRA devices under the second) are candidates.
	UtilizationThreshold    float64
	GPUUtilizationThreshold float64
	// MaxParallelism bounds the nodes removed at once; MaxDrainParallelism
	// those among them that are drained (not empty).
	MaxParallelism      int
	MaxDrainParallelism int
	// MaxEmptyBulkDelete bounds the empty nodes removed in one pass (a
	// budget of the safety gate, pkg/safety).
	MaxEmptyBulkDelete int
	// NonEmptyCandidatesCount bounds the nodes with pods whose removal is
	// simulated per loop.
	NonEmptyCandidatesCount int
	// MaxGracefulTermination caps the grace period of evicted pods;
	// MaxPodEvictionTime bounds the retries of one eviction.
	MaxGracefulTermination time.Duration
	MaxPodEvictionTime     time.Duration
	// SkipNodesWithLocalStorage and SkipNodesWithSystemPods keep nodes
	// with pods using local storage or kube-system pods without a PDB.
	SkipNodesWithLocalStorage bool
	SkipNodesWithSystemPods   bool
	// SkipNodesWithCustomControllerPods keeps nodes with pods whose
	// controller is not a ReplicaSet, ReplicationController, Job,
	// StatefulSet or DaemonSet: nothing says it would recreate them.
	SkipNodesWithCustomControllerPods bool
	// CordonNodeBeforeTerminating marks a node unschedulable, besides
	// its deletion taint, before it is drained and deleted.
	CordonNodeBeforeTerminating bool
	// DaemonSetEvictionForEmptyNodes and DaemonSetEvictionForOccupiedNodes
	// evict a node's DaemonSet pods (best effort, not waited for) before
	// an empty, respectively drained, node is deleted, so they end
	// gracefully instead of with the node.
	DaemonSetEvictionForEmptyNodes    bool
	DaemonSetEvictionForOccupiedNodes bool
	// PartialUnits lets scale-down remove nodes of a unit (a group whose
	// nodes come in units: racks, NVLink domains) while the rest of the
	// unit stays, for clouds that can shrink one. Off, a unit goes whole.
	PartialUnits bool
}

// DefaultScaleDown returns upstream's defaults.
func DefaultScaleDown() ScaleDownOptions {
	return ScaleDownOptions{
		Enabled:                   true,
		DelayAfterAdd:             10 * time.Minute,
		DelayAfterFailure:         3 * time.Minute,
		UnneededTime:              10 * time.Minute,
		UnreadyEnabled:            true,
		UnreadyTime:               20 * time.Minute,
		UtilizationThreshold:      0.5,
		GPUUtilizationThreshold:   0.5,
		MaxParallelism:            10,
		MaxDrainParallelism:       1,
		MaxEmptyBulkDelete:        10,
		NonEmptyCandidatesCount:   30,
		MaxGracefulTermination:    600 * time.Second,
		MaxPodEvictionTime:        2 * time.Minute,
		SkipNodesWithLocalStorage: true,
		SkipNodesWithSystemPods:   true,

		SkipNodesWithCustomControllerPods: true,
		CordonNodeBeforeTerminating:       true,
		DaemonSetEvictionForOccupiedNodes: true,
	}
}

// scaleDownFlags holds values pflag cannot bind directly.
type scaleDownFlags struct {
	maxGracefulTerminationSec int
}

func (o *ScaleDownOptions) addFlags(fs *pflag.FlagSet) *scaleDownFlags {
	raw := &scaleDownFlags{maxGracefulTerminationSec: int(o.MaxGracefulTermination / time.Second)}
	fs.BoolVar(&o.Enabled, "scale-down-enabled", o.Enabled, "Remove unneeded nodes.")
	fs.DurationVar(&o.DelayAfterAdd, "scale-down-delay-after-add", o.DelayAfterAdd, "How long after a scale-up scale-down evaluation resumes.")
	fs.DurationVar(&o.DelayAfterDelete, "scale-down-delay-after-delete", o.DelayAfterDelete, "How long after a node deletion scale-down evaluation resumes; 0 means --scan-interval.")
	fs.DurationVar(&o.DelayAfterFailure, "scale-down-delay-after-failure", o.DelayAfterFailure, "How long after a failed scale-down scale-down evaluation resumes.")
	fs.DurationVar(&o.UnneededTime, "scale-down-unneeded-time", o.UnneededTime, "How long a node must be unneeded before it is removed.")
	fs.BoolVar(&o.UnreadyEnabled, "scale-down-unready-enabled", o.UnreadyEnabled, "Remove unneeded nodes that are unready.")
	fs.DurationVar(&o.UnreadyTime, "scale-down-unready-time", o.UnreadyTime, "How long an unready node must be unneeded before it is removed.")
	fs.Float64Var(&o.UtilizationThreshold, "scale-down-utilization-threshold", o.UtilizationThreshold, "Nodes without accelerators whose utilization (the highest of CPU, memory and DRA device use) is under this are considered for removal.")
	fs.Float64Var(&o.GPUUtilizationThreshold, "scale-down-gpu-utilization-threshold", o.GPUUtilizationThreshold, "Nodes with accelerators (DRA devices) whose utilization is under this are considered for removal.")
	fs.IntVar(&o.MaxParallelism, "max-scale-down-parallelism", o.MaxParallelism, "Maximum number of nodes removed at the same time.")
	fs.IntVar(&o.MaxDrainParallelism, "max-drain-parallelism", o.MaxDrainParallelism, "Maximum number of non-empty nodes drained at the same time.")
	fs.IntVar(&o.MaxEmptyBulkDelete, "max-empty-bulk-delete", o.MaxEmptyBulkDelete, "Maximum number of empty nodes removed in one loop, whatever removes them (scale-down, or giving up a failed scale-up).")
	fs.IntVar(&o.NonEmptyCandidatesCount, "scale-down-non-empty-candidates-count", o.NonEmptyCandidatesCount, "Maximum number of non-empty nodes whose removal is simulated in one loop.")
	fs.IntVar(&raw.maxGracefulTerminationSec, "max-graceful-termination-sec", raw.maxGracefulTerminationSec, "Maximum number of seconds an evicted pod is given to terminate.")
	fs.DurationVar(&o.MaxPodEvictionTime, "max-pod-eviction-time", o.MaxPodEvictionTime, "How long the eviction of one pod is retried before the node's scale-down fails.")
	fs.BoolVar(&o.SkipNodesWithLocalStorage, "skip-nodes-with-local-storage", o.SkipNodesWithLocalStorage, "Never remove nodes with pods using local storage (emptyDir, hostPath).")
	fs.BoolVar(&o.SkipNodesWithSystemPods, "skip-nodes-with-system-pods", o.SkipNodesWithSystemPods, "Never remove nodes with kube-system pods that are not DaemonSet pods and have no PodDisruptionBudget.")
	fs.BoolVar(&o.SkipNodesWithCustomControllerPods, "skip-nodes-with-custom-controller-pods", o.SkipNodesWithCustomControllerPods, "Never remove nodes with pods whose controller is not a ReplicaSet, ReplicationController, Job, StatefulSet or DaemonSet.")
	fs.BoolVar(&o.CordonNodeBeforeTerminating, "cordon-node-before-terminating", o.CordonNodeBeforeTerminating, "Mark a node unschedulable (cordon), besides its deletion taint, before it is drained and deleted.")
	fs.BoolVar(&o.DaemonSetEvictionForEmptyNodes, "daemonset-eviction-for-empty-nodes", o.DaemonSetEvictionForEmptyNodes, "Evict the DaemonSet pods of an empty node before it is deleted.")
	fs.BoolVar(&o.PartialUnits, "scale-down-partial-units", o.PartialUnits, "Let scale-down remove idle nodes of a unit (a group whose nodes come in units: racks, NVLink domains) while the rest of the unit stays; only for clouds that can shrink a unit. Off: a unit goes whole or not at all.")
	fs.BoolVar(&o.DaemonSetEvictionForOccupiedNodes, "daemonset-eviction-for-occupied-nodes", o.DaemonSetEvictionForOccupiedNodes, "Evict the DaemonSet pods of a drained node before it is deleted.")
	return raw
}

func (o *ScaleDownOptions) complete(raw *scaleDownFlags) {
	o.MaxGracefulTermination = time.Duration(raw.maxGracefulTerminationSec) * time.Second
}

func (o *ScaleDownOptions) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for name, v := range map[string]float64{
		"scale-down-utilization-threshold":     o.UtilizationThreshold,
		"scale-down-gpu-utilization-threshold": o.GPUUtilizationThreshold,
	} {
		if v < 0 || v > 1 {
			add("--%s=%v: must be between 0 and 1", name, v)
		}
	}
	for name, d := range map[string]time.Duration{
		"scale-down-delay-after-add":     o.DelayAfterAdd,
		"scale-down-delay-after-delete":  o.DelayAfterDelete,
		"scale-down-delay-after-failure": o.DelayAfterFailure,
		"scale-down-unneeded-time":       o.UnneededTime,
		"max-graceful-termination-sec":   o.MaxGracefulTermination,
	} {
		if d < 0 {
			add("--%s: must not be negative", name)
		}
	}
	if o.UnreadyTime <= 0 {
		add("--scale-down-unready-time=%s: must be positive", o.UnreadyTime)
	}
	if o.MaxPodEvictionTime <= 0 {
		add("--max-pod-eviction-time=%s: must be positive", o.MaxPodEvictionTime)
	}
	for name, n := range map[string]int{
		"max-scale-down-parallelism":            o.MaxParallelism,
		"max-drain-parallelism":                 o.MaxDrainParallelism,
		"max-empty-bulk-delete":                 o.MaxEmptyBulkDelete,
		"scale-down-non-empty-candidates-count": o.NonEmptyCandidatesCount,
	} {
		if n <= 0 {
			add("--%s=%d: must be positive", name, n)
		}
	}
	return errs
}

// DelayAfterDeleteOr is the cooldown after a deletion, the scan interval
// when the flag is 0.
func (o *ScaleDownOptions) DelayAfterDeleteOr(scanInterval time.Duration) time.Duration {
	if o.DelayAfterDelete == 0 {
		return scanInterval
	}
	return o.DelayAfterDelete
}
