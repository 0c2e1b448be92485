package kwok

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	resourceinternal "k8s.io/kubernetes/pkg/apis/resource"
	_ "k8s.io/kubernetes/pkg/apis/resource/install" // conversions for slice validation
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// maxGroupNameLength keeps "<group>-template" (a node name that is also a
// kubernetes.io/hostname label value) within the 63 characters of a label.
const maxGroupNameLength = validation.LabelValueMaxLength - len("-template")

// maxCapacity is the largest node quantity whose milli-value fits an int64.
const maxCapacity = math.MaxInt64 / 1000

// Validate checks the whole config and returns every problem found, each
// naming the node group or reservation and the field.
func (c *Config) Validate() error {
	var errs []error
	if len(c.NodeGroups) == 0 {
		errs = append(errs, errors.New("nodeGroups: at least one node group is required"))
	}
	groups := sets.New[string]()
	for i := range c.NodeGroups {
		g := &c.NodeGroups[i]
		ref := fmt.Sprintf("nodeGroups[%d]", i)
		if g.Name != "" {
			ref = fmt.Sprintf("node group %q", g.Name)
		}
		if groups.Has(g.Name) {
			errs = append(errs, fmt.Errorf("%s: duplicate name", ref))
		}
		groups.Insert(g.Name)
		for _, err := range g.validate() {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
		}
	}
	if c.StateNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(c.StateNamespace) {
			errs = append(errs, fmt.Errorf("stateNamespace %q: %s", c.StateNamespace, msg))
		}
	}
	ids := sets.New[string]()
	for i := range c.Reservations {
		r := &c.Reservations[i]
		ref := fmt.Sprintf("reservations[%d]", i)
		if r.ID != "" {
			ref = fmt.Sprintf("reservation %q", r.ID)
		}
		if ids.Has(r.ID) {
			errs = append(errs, fmt.Errorf("%s: duplicate id", ref))
		}
		ids.Insert(r.ID)
		for _, err := range r.validate(groups) {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

func (g *NodeGroupConfig) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case g.Name == "":
		add("name is required")
	case len(g.Name) > maxGroupNameLength:
		add("name: must be at most %d characters (node names add a suffix)", maxGroupNameLength)
	default:
		for _, msg := range validation.IsDNS1123Label(g.Name) {
			add("name %q: %s", g.Name, msg)
		}
	}
	if g.MinSize < 0 {
		add("minSize (%d) must not be negative", g.MinSize)
	}
	if g.MaxSize < 0 {
		add("maxSize (%d) must not be negative", g.MaxSize)
	}
	if g.MaxSize < g.MinSize {
		add("maxSize (%d) is less than minSize (%d)", g.MaxSize, g.MinSize)
	}
	switch n := g.UnitSize; {
	case n < 0:
		add("unitSize (%d) must not be negative", n)
	case n > 1 && (g.MinSize%n != 0 || g.MaxSize%n != 0):
		add("minSize (%d) and maxSize (%d) must be multiples of unitSize (%d): the group grows and shrinks in whole units", g.MinSize, g.MaxSize, n)
	}
	if g.Price != nil && *g.Price < 0 {
		add("price (%g) must not be negative", *g.Price)
	}
	switch g.CapacityType {
	case "", CapacityOnDemand, CapacitySpot, CapacityReserved:
	default:
		add("capacityType %q: must be one of on-demand, spot, reserved", g.CapacityType)
	}
	if g.BootDelay.Duration < 0 {
		add("bootDelay (%s) must not be negative", g.BootDelay.Duration)
	}
	if o := g.Options; o != nil {
		for _, t := range []struct {
			name string
			v    *float64
		}{{"scaleDownUtilizationThreshold", o.ScaleDownUtilizationThreshold}, {"scaleDownGpuUtilizationThreshold", o.ScaleDownGPUUtilizationThreshold}} {
			if t.v != nil && !(*t.v >= 0 && *t.v <= 1) { // also catches NaN
				add("options.%s (%g) must be between 0 and 1", t.name, *t.v)
			}
		}
		for _, d := range []struct {
			name string
			v    *metav1.Duration
		}{{"scaleDownUnneededTime", o.ScaleDownUnneededTime}, {"scaleDownUnreadyTime", o.ScaleDownUnreadyTime}, {"maxNodeProvisionTime", o.MaxNodeProvisionTime}} {
			if d.v != nil && d.v.Duration <= 0 {
				add("options.%s (%s) must be positive", d.name, d.v.Duration)
			}
		}
	}
	if g.DriverDelay.Duration < 0 {
		add("driverDelay (%s) must not be negative", g.DriverDelay.Duration)
	}
	errs = append(errs, g.Faults.validate()...)
	errs = append(errs, g.validateLabels()...)
	errs = append(errs, g.Template.validateNodeFields()...)
	errs = append(errs, g.validateDrivers()...)
	return errs
}

func (f *FaultsConfig) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, c := range []struct {
		name string
		n    *int
	}{{"outOfResourcesAfter", f.OutOfResourcesAfter}, {"neverRegisterAfter", f.NeverRegisterAfter}, {"neverReadyAfter", f.NeverReadyAfter}} {
		if c.n != nil && *c.n < 0 {
			add("faults.%s (%d) must not be negative", c.name, *c.n)
		}
	}
	if f.NeverRegister && f.NeverRegisterAfter != nil {
		add("faults: set neverRegister or neverRegisterAfter, not both")
	}
	if f.NeverReady && f.NeverReadyAfter != nil {
		add("faults: set neverReady or neverReadyAfter, not both")
	}
	if f.DriversNeverPublish && f.IncompletePool {
		add("faults: set driversNeverPublish or incompletePool, not both")
	}
	for _, r := range []struct {
		name string
		rate float64
	}{{"failureRate", f.FailureRate}, {"nodesErrorRate", f.NodesErrorRate}, {"targetSizeErrorRate", f.TargetSizeErrorRate}} {
		if !(r.rate >= 0 && r.rate <= 1) { // also catches NaN
			add("faults.%s (%g) must be between 0 and 1", r.name, r.rate)
		}
	}
	switch f.FailureMode {
	case "", FailAtRequest, FailNeverRegister, FailNeverReady:
	default:
		add("faults.failureMode %q: must be one of atRequest, neverRegister, neverReady", f.FailureMode)
	}
	if d := f.InstancesVisibleAfter.Duration; d < 0 {
		add("faults.instancesVisibleAfter (%s) must not be negative", d)
	}
	return errs
}

// validateLabels checks template labels and topology values, and that
// neither overrides a label the provider sets itself.
func (g *NodeGroupConfig) validateLabels() []error {
	var errs []error
	errs = append(errs, fieldErrors(metav1validation.ValidateLabels(g.Template.Labels, field.NewPath("template", "labels")))...)
	errs = append(errs, fieldErrors(metav1validation.ValidateLabels(g.Topology, field.NewPath("topology")))...)
	for k, v := range g.Topology {
		if tv, ok := g.Template.Labels[k]; ok && tv != v {
			errs = append(errs, fmt.Errorf("topology[%s]: %q conflicts with template label value %q", k, v, tv))
		}
	}
	for i, k := range g.PerRequestTopology {
		path := field.NewPath("perRequestTopology").Index(i)
		errs = append(errs, fieldErrors(metav1validation.ValidateLabelName(k, path))...)
		_, inTemplate := g.Template.Labels[k]
		_, inTopology := g.Topology[k]
		if inTemplate || inTopology || k == LabelNodeGroup || k == LabelCapacityType || k == corev1.LabelHostname {
			errs = append(errs, fmt.Errorf("%s: %s has a fixed value already; a per-request label must not", path, k))
		}
	}
	for _, l := range cloudprovider.LaunchLabels(g.buildSlices(templateNodeName(g.Name))) {
		if !slices.Contains(g.PerRequestTopology, l) {
			errs = append(errs, fmt.Errorf("template.drivers: a device attribute is %s, but %s is not in perRequestTopology: its value would never be picked",
				cloudprovider.LaunchValue(l), l))
		}
	}
	for _, reserved := range []string{LabelNodeGroup, LabelCapacityType, corev1.LabelHostname} {
		if _, ok := g.Template.Labels[reserved]; ok {
			errs = append(errs, fmt.Errorf("template.labels[%s]: set by the provider, remove it", reserved))
		}
		if _, ok := g.Topology[reserved]; ok {
			errs = append(errs, fmt.Errorf("topology[%s]: set by the provider, remove it", reserved))
		}
	}
	return errs
}

func (t *TemplateConfig) validateNodeFields() []error {
	var errs []error
	seen := map[string]bool{}
	for i, d := range t.CSIDrivers {
		for _, msg := range validation.IsDNS1123Subdomain(d.Name) {
			errs = append(errs, fmt.Errorf("template.csiDrivers[%d].name %q: %s", i, d.Name, msg))
		}
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("template.csiDrivers[%d].name %q: listed twice", i, d.Name))
		}
		seen[d.Name] = true
		if d.MaxVolumes != nil && *d.MaxVolumes < 0 {
			errs = append(errs, fmt.Errorf("template.csiDrivers[%d].maxVolumes (%d) must not be negative", i, *d.MaxVolumes))
		}
	}
	errs = append(errs, fieldErrors(apivalidation.ValidateAnnotations(t.Annotations, field.NewPath("template", "annotations")))...)
	for i, taint := range t.Taints {
		for _, msg := range validation.IsQualifiedName(taint.Key) {
			errs = append(errs, fmt.Errorf("template.taints[%d].key %q: %s", i, taint.Key, msg))
		}
		if taint.Value != "" {
			for _, msg := range validation.IsValidLabelValue(taint.Value) {
				errs = append(errs, fmt.Errorf("template.taints[%d].value %q: %s", i, taint.Value, msg))
			}
		}
		switch taint.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("template.taints[%d].effect %q: must be NoSchedule, PreferNoSchedule or NoExecute", i, taint.Effect))
		}
	}
	for name, q := range t.Capacity {
		for _, msg := range validation.IsQualifiedName(string(name)) {
			errs = append(errs, fmt.Errorf("template.capacity[%s]: %s", name, msg))
		}
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("template.capacity[%s] (%s) must not be negative", name, q.String()))
		}
		// The scheduler compares milli-values in an int64: a larger
		// quantity saturates and every pod would seem to fit.
		if q.CmpInt64(maxCapacity) > 0 {
			errs = append(errs, fmt.Errorf("template.capacity[%s] (%s) is too large (at most %d)", name, q.String(), int64(maxCapacity)))
		}
	}
	return errs
}

// validateDrivers checks what a node's drivers publish: the checks that
// span slices here, everything else by the API server's own validation of
// each device and counter set, so that a config the provider accepts never
// fails when its slices are created.
func (g *NodeGroupConfig) validateDrivers() []error {
	var errs []error
	drivers, sanitized := sets.New[string](), map[string]string{}
	for i, d := range g.Template.Drivers {
		ref := fmt.Sprintf("template.drivers[%d]", i)
		if d.Driver == "" {
			errs = append(errs, fmt.Errorf("%s.driver: driver name is required", ref))
			continue
		}
		ref = fmt.Sprintf("%s (%s)", ref, d.Driver)
		if drivers.Has(d.Driver) {
			errs = append(errs, fmt.Errorf("%s: duplicate driver", ref))
		} else if other, ok := sanitized[sanitizeDriver(d.Driver)]; ok {
			errs = append(errs, fmt.Errorf("%s: slice names would collide with driver %s", ref, other))
		}
		drivers.Insert(d.Driver)
		sanitized[sanitizeDriver(d.Driver)] = d.Driver
		if len(d.Devices) == 0 {
			errs = append(errs, fmt.Errorf("%s.devices: at least one device is required", ref))
		}
		errs = append(errs, d.validateReferences(ref)...)
		errs = append(errs, d.validateWithAPI(ref, templateNodeName(g.Name))...)
	}
	return errs
}

// validateReferences checks unique names and that every counter a device
// consumes exists in a counter set of the same driver.
func (d *DriverConfig) validateReferences(ref string) []error {
	var errs []error
	counterSets := map[string]resourceapi.CounterSet{}
	for i, cs := range d.SharedCounters {
		if _, dup := counterSets[cs.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.sharedCounters[%d]: duplicate counter set %q", ref, i, cs.Name))
		}
		counterSets[cs.Name] = cs
	}
	devices := sets.New[string]()
	for i, dev := range d.Devices {
		devRef := fmt.Sprintf("%s.devices[%d] (%s)", ref, i, dev.Name)
		if devices.Has(dev.Name) {
			errs = append(errs, fmt.Errorf("%s: duplicate device name", devRef))
		}
		devices.Insert(dev.Name)
		for j, c := range dev.ConsumesCounters {
			set, ok := counterSets[c.CounterSet]
			if !ok {
				errs = append(errs, fmt.Errorf("%s.consumesCounters[%d]: unknown counter set %q", devRef, j, c.CounterSet))
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(c.Counters)) {
				have, ok := set.Counters[name]
				if !ok {
					errs = append(errs, fmt.Errorf("%s.consumesCounters[%d]: counter set %q has no counter %q", devRef, j, c.CounterSet, name))
					continue
				}
				// Such a device could never be allocated: the allocator
				// would see it as free yet never fitting.
				if want := c.Counters[name].Value; want.Cmp(have.Value) > 0 {
					errs = append(errs, fmt.Errorf("%s.consumesCounters[%d]: consumes %s of counter %q, but set %q holds %s",
						devRef, j, want.String(), name, c.CounterSet, have.Value.String()))
				}
			}
		}
	}
	return errs
}

// validateWithAPI runs the API server's ResourceSlice validation on each
// counter set and each device on its own, so that errors point at one item.
func (d *DriverConfig) validateWithAPI(ref, nodeName string) []error {
	var errs []error
	check := func(itemRef, prefix string, spec resourceapi.ResourceSliceSpec) {
		spec.Driver = d.Driver
		spec.NodeName = &nodeName
		spec.Pool = resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}
		slice := &resourceapi.ResourceSlice{Spec: spec}
		slice.Name = nodeName + "-validation"
		var internal resourceinternal.ResourceSlice
		if err := legacyscheme.Scheme.Convert(slice, &internal, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", itemRef, err))
			return
		}
		for _, e := range resourcevalidation.ValidateResourceSlice(&internal) {
			if strings.HasPrefix(e.Field, "spec.driver") {
				e.Field = "driver"
				errs = append(errs, fmt.Errorf("%s: %s", ref, e.Error()))
				continue
			}
			e.Field = strings.TrimPrefix(strings.TrimPrefix(e.Field, prefix), ".")
			errs = append(errs, fmt.Errorf("%s: %s", itemRef, e.Error()))
		}
	}
	for i, cs := range d.SharedCounters {
		check(fmt.Sprintf("%s.sharedCounters[%d]", ref, i), "spec.sharedCounters[0]",
			resourceapi.ResourceSliceSpec{SharedCounters: []resourceapi.CounterSet{cs}})
	}
	for i, dev := range d.Devices {
		check(fmt.Sprintf("%s.devices[%d]", ref, i), "spec.devices[0]",
			resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{dev}})
	}
	if len(d.SharedCounters) == 0 && len(d.Devices) == 0 {
		check(ref, "spec", resourceapi.ResourceSliceSpec{})
	}
	return dedupe(errs)
}

func (r *ReservationConfig) validate(groups sets.Set[string]) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.ID == "" {
		add("id is required")
	}
	switch r.Kind {
	case cloudprovider.ReservationOpen, cloudprovider.ReservationTargeted, cloudprovider.ReservationCapacityBlock:
	case "":
		add("kind is required (Open, Targeted or CapacityBlock)")
	default:
		add("kind %q: must be Open, Targeted or CapacityBlock", r.Kind)
	}
	if len(r.NodeGroups) == 0 {
		add("nodeGroups: at least one node group is required")
	}
	for i, name := range r.NodeGroups {
		if !groups.Has(name) {
			add("nodeGroups[%d]: unknown node group %q", i, name)
		}
	}
	if r.Count < 0 {
		add("count (%d) must not be negative", r.Count)
	}
	if r.Start != nil && r.End != nil && !r.End.After(r.Start.Time) {
		add("end (%s) must be after start (%s)", r.End.UTC().Format("2006-01-02T15:04:05Z"), r.Start.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if r.Kind == cloudprovider.ReservationCapacityBlock && (r.Start == nil || r.End == nil) {
		add("a CapacityBlock needs both start and end")
	}
	if r.Price != nil && *r.Price < 0 {
		add("price (%g) must not be negative", *r.Price)
	}
	return errs
}

// fieldErrors turns apimachinery field errors into plain errors.
func fieldErrors(list field.ErrorList) []error {
	var errs []error
	for _, e := range list {
		errs = append(errs, errors.New(e.Error()))
	}
	return errs
}

func dedupe(errs []error) []error {
	seen := sets.New[string]()
	var out []error
	for _, err := range errs {
		if !seen.Has(err.Error()) {
			seen.Insert(err.Error())
			out = append(out, err)
		}
	}
	return out
}
