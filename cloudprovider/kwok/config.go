package kwok

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Config is the kwok provider's configuration file: the node groups it
// simulates and the capacity reservations they draw on.
type Config struct {
	NodeGroups   []NodeGroupConfig   `json:"nodeGroups"`
	Reservations []ReservationConfig `json:"reservations,omitempty"`
	// StateNamespace holds the ConfigMaps (kwok-provider-<group>) in which
	// the provider records its instances, so that a restarted provider
	// still knows the ones that have not registered. Default kube-system;
	// created when missing.
	StateNamespace string `json:"stateNamespace,omitempty"`
}

// DefaultStateNamespace is the namespace of the state ConfigMaps when the
// config does not name one.
const DefaultStateNamespace = "kube-system"

// CapacityType is how a group's nodes are bought.
type CapacityType string

const (
	CapacityOnDemand CapacityType = "on-demand"
	CapacitySpot     CapacityType = "spot"
	CapacityReserved CapacityType = "reserved"
)

// NodeGroupConfig describes one node group.
type NodeGroupConfig struct {
	Name    string `json:"name"`
	MinSize int    `json:"minSize"`
	MaxSize int    `json:"maxSize"`
	// Price per node-hour; nil when unknown.
	Price *float64 `json:"price,omitempty"`
	// CapacityType defaults to on-demand.
	CapacityType CapacityType `json:"capacityType,omitempty"`
	// BootDelay is the time from the request until the Node registers.
	BootDelay metav1.Duration `json:"bootDelay,omitempty"`
	// DriverDelay is the further time until the node's DRA drivers have
	// published their ResourceSlices.
	DriverDelay metav1.Duration `json:"driverDelay,omitempty"`
	Template    TemplateConfig  `json:"template"`
	// Topology holds label values that every node of the group carries
	// (rack, NVLink domain, zone); merged into the template labels.
	Topology map[string]string `json:"topology,omitempty"`
	// PerRequestTopology are topology labels whose value the provider
	// picks per scale-up request: the nodes of one request share one
	// fresh value (a placement group, a capacity block). The template
	// says so (cloudprovider.AnnotationTopologyPerRequest).
	PerRequestTopology []string `json:"perRequestTopology,omitempty"`
	// UnitSize N > 1 makes the group's nodes come and go N at a time (a
	// rack, an NVLink domain sold whole): requests are whole units, each
	// unit draws its own value of the per-request labels, and minSize and
	// maxSize must be multiples of N. 0 or 1: every node alone.
	UnitSize int          `json:"unitSize,omitempty"`
	Faults   FaultsConfig `json:"faults,omitempty"`
	// Options are the group's own autoscaling options (upstream's
	// per-group options); what is unset is the flag's value.
	Options *GroupOptionsConfig `json:"options,omitempty"`
}

// unitSize is the group's unit size, at least 1.
func (g *NodeGroupConfig) unitSize() int { return max(g.UnitSize, 1) }

// GroupOptionsConfig overrides, for one group, the flags of the same
// names (--scale-down-utilization-threshold, ...).
type GroupOptionsConfig struct {
	ScaleDownUtilizationThreshold    *float64         `json:"scaleDownUtilizationThreshold,omitempty"`
	ScaleDownGPUUtilizationThreshold *float64         `json:"scaleDownGpuUtilizationThreshold,omitempty"`
	ScaleDownUnneededTime            *metav1.Duration `json:"scaleDownUnneededTime,omitempty"`
	ScaleDownUnreadyTime             *metav1.Duration `json:"scaleDownUnreadyTime,omitempty"`
	MaxNodeProvisionTime             *metav1.Duration `json:"maxNodeProvisionTime,omitempty"`
	// ZeroOrMaxNodeScaling: the group grows to its max, or shrinks to
	// zero, all at once.
	ZeroOrMaxNodeScaling *bool `json:"zeroOrMaxNodeScaling,omitempty"`
}

// TemplateConfig is what every node of a group looks like once registered.
type TemplateConfig struct {
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations go on every node; kwok.x-k8s.io/node names the kwok
	// controller that keeps the nodes alive ("fake" unless set).
	Annotations map[string]string `json:"annotations,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
	// Capacity is also the node's allocatable. pods defaults to 110.
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	Drivers  []DriverConfig      `json:"drivers,omitempty"`
	// CSIDrivers are the CSI drivers the node's kubelet registers in its
	// CSINode, with how many of their volumes it attaches at most.
	CSIDrivers []CSIDriverConfig `json:"csiDrivers,omitempty"`
}

// CSIDriverConfig is one CSI driver of a node's CSINode.
type CSIDriverConfig struct {
	Name string `json:"name"`
	// MaxVolumes caps the driver's volumes attached to the node (the
	// CSINode's allocatable count); nil means no limit.
	MaxVolumes   *int32   `json:"maxVolumes,omitempty"`
	TopologyKeys []string `json:"topologyKeys,omitempty"`
}

// DriverConfig is what one DRA driver publishes for a node, in
// resource.k8s.io/v1 shapes.
type DriverConfig struct {
	Driver string `json:"driver"`
	// SharedCounters are published in a slice of their own in the node's
	// pool, as the API requires; devices consume them by counter set name.
	SharedCounters []resourceapi.CounterSet `json:"sharedCounters,omitempty"`
	Devices        []resourceapi.Device     `json:"devices,omitempty"`
}

// FaultsConfig injects failures so that back-off, rollback and gang
// handling can be tested; docs/kwok-faults.md describes each. Counts are of
// the group's live instances (registered plus booting): deleting nodes
// frees room, as with a quota.
type FaultsConfig struct {
	// OutOfResourcesAfter: creations that would take the group beyond this
	// many instances fail with OutOfResources. nil means never.
	OutOfResourcesAfter *int `json:"outOfResourcesAfter,omitempty"`
	// NeverRegister: instances are created but their Node never appears.
	NeverRegister bool `json:"neverRegister,omitempty"`
	// NeverRegisterAfter: only instances beyond this count never register
	// (a partial failure). nil means never.
	NeverRegisterAfter *int `json:"neverRegisterAfter,omitempty"`

	// FailureRate is the probability (0..1) that a new instance fails, in
	// the way FailureMode says, drawn from a source seeded with Seed.
	FailureRate float64 `json:"failureRate,omitempty"`
	// FailureMode is how a randomly failed instance fails; default atRequest.
	FailureMode FailureMode `json:"failureMode,omitempty"`
	// Seed seeds the group's random sources (failureRate and the error
	// rates): the same seed gives the same failures for the same calls.
	Seed int64 `json:"seed,omitempty"`

	// NeverReady: Nodes register but stay NotReady (the kwok controller
	// does not manage them).
	NeverReady bool `json:"neverReady,omitempty"`
	// NeverReadyAfter: only instances beyond this count never become
	// Ready. nil means never.
	NeverReadyAfter *int `json:"neverReadyAfter,omitempty"`

	// DriversNeverPublish: nodes register but no ResourceSlice appears.
	DriversNeverPublish bool `json:"driversNeverPublish,omitempty"`
	// IncompletePool: each driver's pool announces one slice more than it
	// publishes, so that the scheduler never allocates from it.
	IncompletePool bool `json:"incompletePool,omitempty"`

	// InstancesVisibleAfter: IncreaseSize returns no ids and Nodes() omits
	// an instance until this long after its creation.
	InstancesVisibleAfter metav1.Duration `json:"instancesVisibleAfter,omitempty"`

	// NodesErrorRate and TargetSizeErrorRate are the probabilities (0..1)
	// that a call of Nodes() or TargetSize() fails, like a cloud API hiccup.
	NodesErrorRate      float64 `json:"nodesErrorRate,omitempty"`
	TargetSizeErrorRate float64 `json:"targetSizeErrorRate,omitempty"`
}

// FailureMode is how an instance struck by faults.failureRate fails.
type FailureMode string

const (
	// FailAtRequest: the creation fails at once, reported in Nodes() with
	// ErrorInfo and not counted in the target size.
	FailAtRequest FailureMode = "atRequest"
	// FailNeverRegister: the request succeeds but the Node never appears.
	FailNeverRegister FailureMode = "neverRegister"
	// FailNeverReady: the Node registers but never becomes Ready.
	FailNeverReady FailureMode = "neverReady"
)

// ReservationConfig declares capacity that is already paid for.
type ReservationConfig struct {
	ID         string                        `json:"id"`
	Kind       cloudprovider.ReservationKind `json:"kind"`
	NodeGroups []string                      `json:"nodeGroups"`
	Count      int                           `json:"count"`
	// Start and End (RFC3339) bound the window; required for capacity blocks.
	Start *metav1.Time `json:"start,omitempty"`
	End   *metav1.Time `json:"end,omitempty"`
	Price *float64     `json:"price,omitempty"`
}

// LoadConfig reads, decodes and validates a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kwok config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("kwok config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a config strictly (unknown and duplicate fields are
// errors) and validates it.
func ParseConfig(data []byte) (*Config, error) {
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, explainDecodeError(data, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// explainDecodeError turns a decoding error into one that names the node
// group or reservation and the field at fault. The JSON decoder reports
// errors of custom unmarshalers (quantities, durations, times) without any
// position, so the document is decoded again piece by piece to find the
// innermost value that fails.
func explainDecodeError(data []byte, decodeErr error) error {
	plain := cleanDecodeError(decodeErr)
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		return plain
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(asJSON, &top); err != nil {
		return plain
	}
	for _, key := range slices.Sorted(maps.Keys(top)) {
		var elemType reflect.Type
		switch key {
		case "stateNamespace":
			if _, err := locateDecodeError(top[key], reflect.TypeFor[string]()); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			continue
		case "nodeGroups":
			elemType = reflect.TypeFor[NodeGroupConfig]()
		case "reservations":
			elemType = reflect.TypeFor[ReservationConfig]()
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(top[key], &items); err != nil {
			return fmt.Errorf("%s: must be a list", key)
		}
		for i, item := range items {
			path, err := locateDecodeError(item, elemType)
			if err == nil {
				continue
			}
			if path == "" {
				return fmt.Errorf("%s: %w", itemRef(key, i, item), err)
			}
			return fmt.Errorf("%s: %s: %w", itemRef(key, i, item), strings.TrimPrefix(path, "."), err)
		}
	}
	return plain
}

// itemRef names a list item by its name or id when it has one.
func itemRef(list string, i int, item json.RawMessage) string {
	var named struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	}
	_ = json.Unmarshal(item, &named)
	switch {
	case list == "nodeGroups" && named.Name != "":
		return fmt.Sprintf("node group %q (%s[%d])", named.Name, list, i)
	case list == "reservations" && named.ID != "":
		return fmt.Sprintf("reservation %q (%s[%d])", named.ID, list, i)
	}
	return fmt.Sprintf("%s[%d]", list, i)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// locateDecodeError returns the path (".a.b[2][key]") of the innermost
// value in data that does not decode into t, and that value's error; nil
// when data decodes.
func locateDecodeError(data json.RawMessage, t reflect.Type) (string, error) {
	err := yaml.UnmarshalStrict(data, reflect.New(t).Interface())
	if err == nil {
		return "", nil
	}
	decodeErr := cleanDecodeError(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return "", decodeErr
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(data, &fields) != nil {
			return "", decodeErr
		}
		for _, key := range slices.Sorted(maps.Keys(fields)) {
			ft, ok := fieldType(t, key)
			if !ok {
				return "." + key, fmt.Errorf("unknown field %q", key)
			}
			if p, err := locateDecodeError(fields[key], ft); err != nil {
				return "." + key + p, err
			}
		}
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return "", decodeErr
		}
		for i, item := range items {
			if p, err := locateDecodeError(item, t.Elem()); err != nil {
				return fmt.Sprintf("[%d]%s", i, p), err
			}
		}
	case reflect.Map:
		var entries map[string]json.RawMessage
		if json.Unmarshal(data, &entries) != nil {
			return "", decodeErr
		}
		for _, key := range slices.Sorted(maps.Keys(entries)) {
			if p, err := locateDecodeError(entries[key], t.Elem()); err != nil {
				return fmt.Sprintf("[%s]%s", key, p), err
			}
		}
	}
	return "", decodeErr
}

// fieldType finds the struct field that a JSON key decodes into, following
// inlined embedded structs and matching names without regard to case, as
// encoding/json does.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if ft, ok := fieldType(inner, key); ok {
					return ft, true
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.IsExported() && strings.EqualFold(name, key) {
			return f.Type, true
		}
	}
	return nil, false
}

// cleanDecodeError drops the layers of prefixes sigs.k8s.io/yaml adds.
func cleanDecodeError(err error) error {
	msg := err.Error()
	for _, prefix := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return fmt.Errorf("%s", msg)
}
