package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// BalancingOptions are upstream's --balance-similar-node-groups and its
// label flags: a scale-up of a group is spread over the groups similar
// to it.
type BalancingOptions struct {
	Enabled bool
	// IgnoreLabels are labels that may differ between similar groups, on
	// top of the ones ignored always (zone, region, hostname, ...).
	IgnoreLabels []string
	// Labels, when set, are the only thing compared: groups whose
	// templates agree on every one of them are similar.
	Labels []string
}

func (o *BalancingOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "balance-similar-node-groups", o.Enabled, "Split scale-ups across similar node groups (same template shape, DRA devices included, and labels aside from the ignored ones), smallest first.")
	fs.StringArrayVar(&o.IgnoreLabels, "balancing-ignore-label", o.IgnoreLabels, "Label that may differ between similar node groups, besides zone, region and hostname (repeatable).")
	fs.StringArrayVar(&o.Labels, "balancing-label", o.Labels, "Label that similar node groups must share (repeatable); when set, only these labels are compared. Cannot be combined with --balancing-ignore-label.")
}

func (o *BalancingOptions) validate() []error {
	if len(o.Labels) > 0 && len(o.IgnoreLabels) > 0 {
		return []error{fmt.Errorf("--balancing-label and --balancing-ignore-label cannot be combined")}
	}
	return nil
}

// KubeClientOptions shape the one REST config every Kubernetes client of
// the autoscaler is made from.
type KubeClientOptions struct {
	QPS         float64
	Burst       int
	ContentType string
	UserAgent   string
}

// DefaultKubeClient returns upstream's defaults.
func DefaultKubeClient() KubeClientOptions {
	return KubeClientOptions{QPS: 5, Burst: 10, ContentType: "application/json", UserAgent: "cluster-autoscaler"}
}

func (o *KubeClientOptions) addFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&o.QPS, "kube-client-qps", o.QPS, "Queries per second of the Kubernetes clients.")
	fs.IntVar(&o.Burst, "kube-client-burst", o.Burst, "Burst of the Kubernetes clients.")
	fs.StringVar(&o.ContentType, "kube-api-content-type", o.ContentType, "Content type of requests to the API server.")
	fs.StringVar(&o.UserAgent, "user-agent", o.UserAgent, "User agent of requests to the API server.")
}

func (o *KubeClientOptions) validate() []error {
	var errs []error
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-client-qps=%v: must be positive", o.QPS))
	}
	if o.Burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-client-burst=%d: must be positive", o.Burst))
	}
	switch o.ContentType {
	case "application/vnd.kubernetes.protobuf", "application/json":
	default:
		errs = append(errs, fmt.Errorf("--kube-api-content-type=%q: want application/vnd.kubernetes.protobuf or application/json", o.ContentType))
	}
	return errs
}

// compatFlags are upstream flags accepted for drop-in command lines whose
// only accepted value is what this autoscaler always does.
type compatFlags struct {
	estimator               string
	dynamicResources        bool
	emitPerNodeGroupMetrics bool
}

func (c *compatFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.estimator, "estimator", c.estimator, "Estimator of the nodes a scale-up needs; binpacking is the only one.")
	fs.BoolVar(&c.dynamicResources, "enable-dynamic-resource-allocation", c.dynamicResources, "Dynamic Resource Allocation is always on; only true is accepted.")
	fs.BoolVar(&c.emitPerNodeGroupMetrics, "emit-per-nodegroup-metrics", c.emitPerNodeGroupMetrics, "Accepted for upstream command lines; per node group metrics are always emitted.")
}

func (c *compatFlags) validate() []error {
	var errs []error
	if c.estimator != "binpacking" {
		errs = append(errs, fmt.Errorf("--estimator=%q: only binpacking exists", c.estimator))
	}
	if !c.dynamicResources {
		errs = append(errs, fmt.Errorf("--enable-dynamic-resource-allocation=false: DRA cannot be turned off here"))
	}
	return errs
}

// softTaintOptions are upstream's bounds on the DeletionCandidate soft
// taints; this autoscaler puts none, so they are only checked.
type softTaintOptions struct {
	count int
	time  time.Duration
}

func (o *softTaintOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.count, "max-bulk-soft-taint-count", o.count, "Accepted for upstream command lines; no DeletionCandidate soft taints are put here.")
	fs.DurationVar(&o.time, "max-bulk-soft-taint-time", o.time, "Accepted for upstream command lines; no DeletionCandidate soft taints are put here.")
}

func (o *softTaintOptions) validate() []error {
	var errs []error
	if o.count < 0 {
		errs = append(errs, fmt.Errorf("--max-bulk-soft-taint-count=%d: must not be negative", o.count))
	}
	if o.time < 0 {
		errs = append(errs, fmt.Errorf("--max-bulk-soft-taint-time=%s: must not be negative", o.time))
	}
	return errs
}
