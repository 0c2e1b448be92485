package config

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// ExplainOptions configure what the autoscaler tells users: the status
// ConfigMap and the detection of disagreements with the scheduler.
type ExplainOptions struct {
	// WriteStatusConfigMap writes the status ConfigMap every loop.
	WriteStatusConfigMap bool
	// StatusConfigMapName is its name, in --namespace.
	StatusConfigMapName string
	// WriteNodeGroupObjects keeps a NodeGroup object per node group.
	WriteNodeGroupObjects bool
	// SchedulerDisagreementThreshold is how long a pod the simulation
	// places on an existing node may stay unschedulable before it is
	// reported as a disagreement with the scheduler.
	SchedulerDisagreementThreshold time.Duration
}

// DefaultExplain returns upstream's defaults for the status, ours for the
// rest.
func DefaultExplain() ExplainOptions {
	return ExplainOptions{
		WriteStatusConfigMap:           true,
		StatusConfigMapName:            "cluster-autoscaler-status",
		WriteNodeGroupObjects:          true,
		SchedulerDisagreementThreshold: 5 * time.Minute,
	}
}

func (e *ExplainOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&e.WriteStatusConfigMap, "write-status-configmap", e.WriteStatusConfigMap, "Write the autoscaler's status to a ConfigMap (in --namespace) every loop.")
	fs.StringVar(&e.StatusConfigMapName, "status-config-map-name", e.StatusConfigMapName, "Name of the status ConfigMap.")
	fs.BoolVar(&e.WriteNodeGroupObjects, "write-node-group-objects", e.WriteNodeGroupObjects,
		"Keep a NodeGroup object (autoscaling.dra-autoscaler.io/v1alpha1) per node group, its status written when it changes: sizes, template devices, backoff, provisioning times and what can be provisioned now. Without the CRD installed nothing is written.")
	fs.DurationVar(&e.SchedulerDisagreementThreshold, "scheduler-disagreement-threshold", e.SchedulerDisagreementThreshold,
		"How long a pending pod that the simulation places on an existing node may stay unschedulable before it is reported as a disagreement with the scheduler (event SchedulerDisagreement).")
}

func (e *ExplainOptions) validate() error {
	var errs []error
	if e.WriteStatusConfigMap && e.StatusConfigMapName == "" {
		errs = append(errs, fmt.Errorf("--status-config-map-name: required with --write-status-configmap"))
	}
	if e.SchedulerDisagreementThreshold <= 0 {
		errs = append(errs, fmt.Errorf("--scheduler-disagreement-threshold=%s: must be positive", e.SchedulerDisagreementThreshold))
	}
	return errors.Join(errs...)
}

// ExplainRequest is what `dra-autoscaler explain` was asked.
type ExplainRequest struct {
	Pod types.NamespacedName
	// Output is "table" or "json".
	Output string
}

// ParseExplain parses `explain [flags] <namespace>/<pod>`: the
// autoscaler's own flags (so that the simulation is configured exactly
// as the running autoscaler) plus -o/--output.
func ParseExplain(args []string) (*Options, *ExplainRequest, error) {
	o := Default()
	req := &ExplainRequest{}
	fs := pflag.NewFlagSet("dra-autoscaler explain", pflag.ContinueOnError)
	raw := o.addFlags(fs)
	fs.StringVarP(&req.Output, "output", "o", "table", "Output format: table or json.")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	// klog's log_dir is upstream's --log-dir, as component-base spells it.
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() != 1 {
		return nil, nil, fmt.Errorf("explain: want one <namespace>/<pod>, got %d argument(s)", fs.NArg())
	}
	ns, name, ok := strings.Cut(fs.Arg(0), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, nil, fmt.Errorf("explain: %q is not <namespace>/<pod>", fs.Arg(0))
	}
	req.Pod = types.NamespacedName{Namespace: ns, Name: name}
	if req.Output != "table" && req.Output != "json" {
		return nil, nil, fmt.Errorf("explain: -o %q: want table or json", req.Output)
	}
	if err := o.complete(raw); err != nil {
		return nil, nil, err
	}
	// The explanation never scales nor leads: no lease, no status writes.
	o.LeaderElection.LeaderElect = false
	o.WriteStatusConfigMap = false
	o.WriteNodeGroupObjects = false
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	return o, req, nil
}
