package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/klog/v2"
)

// rawFlags holds flag values that need parsing beyond what pflag does.
type rawFlags struct {
	nodes                []string
	expander             string
	coresTotal, memTotal string
	scaleDown            *scaleDownFlags
	// gangPlacementCycle is read by nothing: the flag stays for a release so
	// deployments that set it still start.
	gangPlacementCycle bool
}

// Parse parses the command line into options. An unknown flag or a
// malformed value is an error that names the flag.
func Parse(args []string) (*Options, error) {
	o := Default()
	fs := pflag.NewFlagSet("dra-autoscaler", pflag.ContinueOnError)
	raw := o.addFlags(fs)
	// klog's own flags (--v, --vmodule, ...).
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	// klog's log_dir is upstream's --log-dir, as component-base spells it.
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if o.Version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := o.complete(raw); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *Options) addFlags(fs *pflag.FlagSet) *rawFlags {
	raw := &rawFlags{
		expander:   strings.Join(o.Expanders, ","),
		coresTotal: fmt.Sprintf("%d:%d", o.CoresTotal.Min, o.CoresTotal.Max),
		memTotal:   fmt.Sprintf("%d:%d", o.MemoryTotal.Min, o.MemoryTotal.Max),
	}
	fs.BoolVar(&o.Version, "version", false, "Print the version and exit.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; empty means in-cluster configuration.")
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider, "Cloud provider type (kwok, externalgrpc, clusterapi).")
	fs.StringVar(&o.CloudConfig, "cloud-config", o.CloudConfig, "Path to the cloud provider's configuration file (kwok: the node groups file; externalgrpc: the server's address and TLS files; clusterapi: the management cluster's kubeconfig, default --kubeconfig).")
	fs.StringArrayVar(&o.NodeGroupAutoDiscovery, "node-group-auto-discovery", nil, "Node group auto-discovery spec (repeatable), clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value>.")
	fs.StringArrayVar(&raw.nodes, "nodes", nil, "Node group to scale, as min:max:name (repeatable). Without it, every group the provider declares is used with the provider's sizes.")
	fs.DurationVar(&o.ScanInterval, "scan-interval", o.ScanInterval, "How often the cluster is reevaluated for scale up or down.")
	fs.StringVar(&raw.expander, "expander", raw.expander, "Comma-separated chain of expanders choosing the node group to grow: "+strings.Join(KnownExpanders, ", ")+".")
	fs.IntVar(&o.MaxNodesTotal, "max-nodes-total", o.MaxNodesTotal, "Maximum number of nodes in all node groups, booting ones included; 0 means no limit.")
	fs.StringVar(&raw.coresTotal, "cores-total", raw.coresTotal, "Minimum and maximum number of cores in the cluster, as min:max.")
	fs.StringVar(&raw.memTotal, "memory-total", raw.memTotal, "Minimum and maximum GiB of memory in the cluster, as min:max.")
	fs.DurationVar(&o.MaxNodeProvisionTime, "max-node-provision-time", o.MaxNodeProvisionTime, "How long a requested node may take to register before the request is given up.")
	fs.DurationVar(&o.DRAPoolStallTime, "dra-pool-stall-time", o.DRAPoolStallTime, "How long a registered, Ready node's incomplete DRA pool may stay unchanged before the node stops counting as coming capacity: pending pods then scale elsewhere, and an event names the node, driver and pool. The node itself is still given up at --max-node-provision-time.")
	fs.IntVar(&o.MaxNodesPerScaleUp, "max-nodes-per-scaleup", o.MaxNodesPerScaleUp, "Maximum number of nodes added in one scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBinpackingDuration, "max-nodegroup-binpacking-duration", o.MaxNodeGroupBinpackingDuration, "Maximum time spent estimating one node group.")
	fs.BoolVar(&o.ScaleUpFromZero, "scale-up-from-zero", o.ScaleUpFromZero, "Scale up groups that have no nodes, from their templates.")
	fs.BoolVar(&raw.gangPlacementCycle, "gang-placement-cycle", true,
		"Deprecated, no effect; to be removed. Every gang (a PodGroup with minCount, or a CompositePodGroup tree) is planned with the scheduler's own pod group cycle (docs/gangs.md).")
	// pflag warns whoever sets it; it cannot fail for a flag just defined.
	_ = fs.MarkDeprecated("gang-placement-cycle", "every gang is planned with the scheduler's own pod group cycle; the flag has no effect and will be removed")
	fs.DurationVar(&o.NewPodScaleUpDelay, "new-pod-scale-up-delay", o.NewPodScaleUpDelay, "Pods younger than this are not yet considered for scale-up.")
	fs.IntVar(&o.ExpendablePodsPriorityCutoff, "expendable-pods-priority-cutoff", o.ExpendablePodsPriorityCutoff, "Pods with priority below this never trigger a scale-up.")
	fs.DurationVar(&o.InitialNodeGroupBackoffDuration, "initial-node-group-backoff-duration", o.InitialNodeGroupBackoffDuration, "First backoff of a node group after a failed scale-up.")
	fs.DurationVar(&o.MaxNodeGroupBackoffDuration, "max-node-group-backoff-duration", o.MaxNodeGroupBackoffDuration, "Longest backoff of a node group after repeated failures.")
	fs.DurationVar(&o.NodeGroupBackoffResetTimeout, "node-group-backoff-reset-timeout", o.NodeGroupBackoffResetTimeout, "Time without failure after which a group's backoff starts again from the initial duration.")
	fs.StringVar(&o.PriorityExpanderConfigMap, "priority-expander-configmap", o.PriorityExpanderConfigMap, "ConfigMap (in --namespace) of the priority expander.")
	fs.StringVar(&o.Address, "address", o.Address, "Address serving /metrics and /health-check.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the autoscaler's own objects (status, priority ConfigMap).")
	fs.StringVar(&o.SchedulerConfigFile, "scheduler-config-file", o.SchedulerConfigFile, "KubeSchedulerConfiguration of the simulated scheduler; empty means the default profile.")
	fs.StringVar(&o.FeatureGates, "feature-gates", o.FeatureGates, "Feature gates of the simulated scheduler, as the cluster's scheduler has them (Gate=true,...).")
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fs)
	o.Health.addFlags(fs)
	o.Sharing.addFlags(fs)
	raw.scaleDown = o.ScaleDown.addFlags(fs)
	o.ExplainOptions.addFlags(fs)
	o.ProvisioningRequests.addFlags(fs)
	o.CapacityBuffers.addFlags(fs)
	o.Nominations.addFlags(fs)
	o.Simulation.addFlags(fs)
	o.Reservations.addFlags(fs)
	o.Balancing.addFlags(fs)
	o.KubeClient.addFlags(fs)
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go profiles (net/http/pprof) under /debug/pprof/ on --profiling-address (not on --address).")
	fs.StringVar(&o.ProfilingAddress, "profiling-address", o.ProfilingAddress, "Address serving /debug/pprof/ with --profiling; loopback by default (reach it with kubectl port-forward). Bind it elsewhere only on a network you trust.")
	o.compat.addFlags(fs)
	o.softTaint.addFlags(fs)
	return raw
}

func (o *Options) complete(raw *rawFlags) error {
	var errs []error
	o.ScaleDown.complete(raw.scaleDown)
	for _, n := range raw.nodes {
		spec, err := ParseNodeGroupSpec(n)
		errs = append(errs, err)
		o.NodeGroups = append(o.NodeGroups, spec)
	}
	o.Expanders = nil
	for _, e := range strings.Split(raw.expander, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.Expanders = append(o.Expanders, e)
		}
	}
	var err error
	o.CoresTotal, err = ParseRange("cores-total", raw.coresTotal)
	errs = append(errs, err)
	o.MemoryTotal, err = ParseRange("memory-total", raw.memTotal)
	errs = append(errs, err)
	return errors.Join(errs...)
}

// KnownExpanders are the names --expander accepts.
var KnownExpanders = []string{"reserved", "least-waste", "most-pods", "least-nodes", "price", "priority", "random", "fragmentation"}

// Validate checks the options together.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.ScanInterval <= 0 {
		add("--scan-interval=%s: must be positive", o.ScanInterval)
	}
	if len(o.Expanders) == 0 {
		add("--expander: at least one expander is needed")
	}
	for _, e := range o.Expanders {
		if !contains(KnownExpanders, e) {
			add("--expander: unknown expander %q (known: %s)", e, strings.Join(KnownExpanders, ", "))
		}
	}
	seen := map[string]bool{}
	for _, g := range o.NodeGroups {
		if seen[g.Name] {
			add("--nodes: node group %q given twice", g.Name)
		}
		seen[g.Name] = true
	}
	if o.MaxNodesTotal < 0 {
		add("--max-nodes-total=%d: must not be negative", o.MaxNodesTotal)
	}
	if o.MaxNodesPerScaleUp <= 0 {
		add("--max-nodes-per-scaleup=%d: must be positive", o.MaxNodesPerScaleUp)
	}
	for name, d := range map[string]interface{ Seconds() float64 }{
		"max-node-provision-time":             o.MaxNodeProvisionTime,
		"dra-pool-stall-time":                 o.DRAPoolStallTime,
		"max-nodegroup-binpacking-duration":   o.MaxNodeGroupBinpackingDuration,
		"initial-node-group-backoff-duration": o.InitialNodeGroupBackoffDuration,
		"max-node-group-backoff-duration":     o.MaxNodeGroupBackoffDuration,
	} {
		if d.Seconds() <= 0 {
			add("--%s: must be positive", name)
		}
	}
	if o.NewPodScaleUpDelay < 0 {
		add("--new-pod-scale-up-delay: must not be negative")
	}
	if o.MaxNodeGroupBackoffDuration < o.InitialNodeGroupBackoffDuration {
		add("--max-node-group-backoff-duration is below --initial-node-group-backoff-duration")
	}
	if _, _, err := net.SplitHostPort(o.Address); err != nil {
		add("--address=%q: %v", o.Address, err)
	}
	if _, _, err := net.SplitHostPort(o.ProfilingAddress); o.Profiling && err != nil {
		add("--profiling-address=%q: %v", o.ProfilingAddress, err)
	}
	if o.CloudProvider == "" {
		add("--cloud-provider: required")
	}
	if o.LeaderElection.LeaderElect && o.LeaderElection.RenewDeadline.Duration >= o.LeaderElection.LeaseDuration.Duration {
		add("--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration")
	}
	errs = append(errs, o.Health.validate()...)
	errs = append(errs, o.Sharing.validate()...)
	errs = append(errs, o.ScaleDown.validate()...)
	errs = append(errs, o.ExplainOptions.validate())
	errs = append(errs, o.ProvisioningRequests.validate())
	errs = append(errs, o.Nominations.validate())
	errs = append(errs, o.Simulation.validate())
	errs = append(errs, o.Reservations.validate()...)
	errs = append(errs, o.Balancing.validate()...)
	errs = append(errs, o.KubeClient.validate()...)
	errs = append(errs, o.compat.validate()...)
	errs = append(errs, o.softTaint.validate()...)
	if len(o.NodeGroupAutoDiscovery) > 0 && o.CloudProvider != "clusterapi" {
		add("--node-group-auto-discovery: only --cloud-provider=clusterapi discovers node groups (got %q); list the groups in its --cloud-config or with --nodes", o.CloudProvider)
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
