package clusterapi

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// ProviderName is the --cloud-provider value.
const ProviderName = "clusterapi"

// DefaultGroup is Cluster API's API group; $CAPI_GROUP replaces it, as
// upstream's provider allows, and every annotation key below follows it.
const DefaultGroup = "cluster.x-k8s.io"

// Upstream's capacity annotations for scale from zero (exact keys).
const (
	capacityPrefix = "capacity.cluster-autoscaler.kubernetes.io/"
	keyCPU         = capacityPrefix + "cpu"
	keyMemory      = capacityPrefix + "memory"
	keyDisk        = capacityPrefix + "ephemeral-disk"
	keyMaxPods     = capacityPrefix + "maxPods"
	keyGPUType     = capacityPrefix + "gpu-type"
	keyGPUCount    = capacityPrefix + "gpu-count"
	keyDRADriver   = capacityPrefix + "dra-driver"
	keyLabels      = capacityPrefix + "labels"
	keyTaints      = capacityPrefix + "taints"
	defaultMaxPods = 110
)

// AnnotationDRATemplate names a ConfigMap, in the scalable resource's
// namespace, holding the ResourceSlices a new node of the group publishes
// (our own extension; docs/providers/clusterapi.md).
const AnnotationDRATemplate = "autoscaling.dra-autoscaler.io/dra-template"

// LabelCapacityReservation, on a MachineDeployment, MachineSet or
// MachinePool, names the CapacityReservation object its Machines land on
// (our own extension; docs/providers/clusterapi.md): the object serves
// the group and the group launches only onto it, never beyond its count.
const LabelCapacityReservation = "autoscaling.dra-autoscaler.io/capacity-reservation"

// DRATemplateKey is the ConfigMap data key holding the slices.
const DRATemplateKey = "resourceslices.yaml"

// keys are the group-dependent annotation and label names.
type keys struct {
	group         string
	minSize       string
	maxSize       string
	deleteMachine string
	nodeMachine   string // on Nodes
	clusterName   string // label on everything, annotation on Nodes
	clusterNS     string // annotation on Nodes
	paused        string
	deployment    string // label on MachineSets and Machines
	set           string // label on Machines
	pool          string // label on MachinePool Machines
	optionsPrefix string // autoscaling-options-<name> prefix
}

func newKeys(group string) keys {
	return keys{
		group:         group,
		minSize:       group + "/cluster-api-autoscaler-node-group-min-size",
		maxSize:       group + "/cluster-api-autoscaler-node-group-max-size",
		deleteMachine: group + "/delete-machine",
		nodeMachine:   group + "/machine",
		clusterName:   group + "/cluster-name",
		clusterNS:     group + "/cluster-namespace",
		paused:        group + "/paused",
		deployment:    group + "/deployment-name",
		set:           group + "/set-name",
		pool:          group + "/pool-name",
		optionsPrefix: group + "/autoscaling-options-",
	}
}

// groupFromEnv is $CAPI_GROUP or the default.
func groupFromEnv() string {
	if g := os.Getenv("CAPI_GROUP"); g != "" {
		return g
	}
	return DefaultGroup
}

// bounds reads the min and max size annotations as upstream does: a
// missing one counts as 0; a non-integer, a negative value or max < min is
// an error. ok is false when neither annotation is present (not a node
// group of the autoscaler).
func (k keys) bounds(annotations map[string]string) (min, max int, ok bool, err error) {
	minS, hasMin := annotations[k.minSize]
	maxS, hasMax := annotations[k.maxSize]
	if !hasMin && !hasMax {
		return 0, 0, false, nil
	}
	parse := func(key, s string, present bool) (int, error) {
		if !present {
			return 0, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("annotation %s=%q: not an integer", key, s)
		}
		if v < 0 {
			return 0, fmt.Errorf("annotation %s=%q: must not be negative", key, s)
		}
		return v, nil
	}
	if min, err = parse(k.minSize, minS, hasMin); err != nil {
		return 0, 0, true, err
	}
	if max, err = parse(k.maxSize, maxS, hasMax); err != nil {
		return 0, 0, true, err
	}
	if max < min {
		return 0, 0, true, fmt.Errorf("annotation %s=%d is below %s=%d", k.maxSize, max, k.minSize, min)
	}
	return min, max, true, nil
}

// options applies the autoscaling-options-<name> annotations to defaults.
// Values are lower-cased and a bad one is reported and ignored, as
// upstream does; ok is false when no annotation is present.
func (k keys) options(annotations map[string]string, defaults cloudprovider.NodeGroupAutoscalingOptions) (out cloudprovider.NodeGroupAutoscalingOptions, ok bool, bad []string) {
	out = defaults
	float := func(name string, dst *float64) {
		if v, present := annotations[k.optionsPrefix+name]; present {
			ok = true
			f, err := strconv.ParseFloat(strings.ToLower(v), 64)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s%s=%q: %v", k.optionsPrefix, name, v, err))
				return
			}
			*dst = f
		}
	}
	duration := func(name string, dst *time.Duration) {
		if v, present := annotations[k.optionsPrefix+name]; present {
			ok = true
			d, err := time.ParseDuration(strings.ToLower(v))
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s%s=%q: %v", k.optionsPrefix, name, v, err))
				return
			}
			*dst = d
		}
	}
	float("scaledownutilizationthreshold", &out.ScaleDownUtilizationThreshold)
	float("scaledowngpuutilizationthreshold", &out.ScaleDownGpuUtilizationThreshold)
	duration("scaledownunneededtime", &out.ScaleDownUnneededTime)
	duration("scaledownunreadytime", &out.ScaleDownUnreadyTime)
	duration("maxnodeprovisiontime", &out.MaxNodeProvisionTime)
	return out, ok, bad
}

// quantity parses a capacity annotation with resource.ParseQuantity;
// absent or empty is zero.
func quantity(annotations map[string]string, key string) (resource.Quantity, error) {
	v := annotations[key]
	if v == "" {
		return resource.Quantity{}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("annotation %s=%q: %v", key, v, err)
	}
	return q, nil
}

// integer parses an integer capacity annotation (gpu-count, maxPods) in
// base 10, with upstream's error text.
func integer(annotations map[string]string, key string) (int64, error) {
	v := annotations[key]
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q from annotation %q expected to be an integer: %v", v, key, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("value %q from annotation %q must not be negative", v, key)
	}
	return n, nil
}

// discoverySpec is one --node-group-auto-discovery=clusterapi:... value:
// every set field must match (AND); specs are ORed.
type discoverySpec struct {
	namespace   string
	clusterName string
	labels      labels.Selector
}

// parseDiscoverySpecs parses upstream's syntax:
// clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value>,...
func parseDiscoverySpecs(raw []string) ([]discoverySpec, error) {
	var out []discoverySpec
	for _, s := range raw {
		parts := strings.Split(s, ":")
		if len(parts) != 2 {
			return nil, fmt.Errorf("--node-group-auto-discovery=%q: want clusterapi:key=value[,key=value...]", s)
		}
		if parts[0] != ProviderName {
			return nil, fmt.Errorf("--node-group-auto-discovery=%q: unknown discoverer %q (want %s)", s, parts[0], ProviderName)
		}
		spec := discoverySpec{labels: labels.Everything()}
		set := labels.Set{}
		for _, kv := range strings.Split(parts[1], ",") {
			pair := strings.Split(kv, "=")
			if len(pair) != 2 || pair[0] == "" {
				return nil, fmt.Errorf("--node-group-auto-discovery=%q: %q is not key=value", s, kv)
			}
			switch pair[0] {
			case "namespace":
				spec.namespace = pair[1]
			case "clusterName":
				spec.clusterName = pair[1]
			default:
				set[pair[0]] = pair[1]
			}
		}
		if len(set) > 0 {
			sel, err := labels.ValidatedSelectorFromSet(set)
			if err != nil {
				return nil, fmt.Errorf("--node-group-auto-discovery=%q: %v", s, err)
			}
			spec.labels = sel
		}
		out = append(out, spec)
	}
	return out, nil
}

// watchNamespace is the one namespace every spec names, or "" (all).
func watchNamespace(specs []discoverySpec) string {
	ns := ""
	for i, s := range specs {
		if s.namespace == "" || (i > 0 && s.namespace != ns) {
			return ""
		}
		ns = s.namespace
	}
	return ns
}
