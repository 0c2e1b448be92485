package snapshot

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
)

var resourceGroup = resourceapi.Resource

// SetResourceSlice upserts a ResourceSlice.
func (s *Snapshot) SetResourceSlice(slice *resourceapi.ResourceSlice) error {
	if slice == nil {
		return fmt.Errorf("set resource slice: nil slice")
	}
	if err := validName("resource slice", slice.Name); err != nil {
		return fmt.Errorf("set resource slice: %w", err)
	}
	if old, ok := s.slices[slice.Name]; ok {
		del(&s.j, s.slicesOfNode[sliceNode(old)], slice.Name)
		s.touch(sliceNode(old))
	}
	s.touch(sliceNode(slice))
	put(&s.j, s.slices, slice.Name, slice)
	put(&s.j, innerSet(&s.j, s.slicesOfNode, sliceNode(slice)), slice.Name, sets.Empty{})
	s.patchedSlices.set(&s.j, slice.Name, applyTaintRules(slice, s.activeTaintRules()))
	return nil
}

// RemoveResourceSlice deletes a ResourceSlice.
func (s *Snapshot) RemoveResourceSlice(name string) error {
	old, ok := s.slices[name]
	if !ok {
		return fmt.Errorf("remove resource slice %s: not in the snapshot", name)
	}
	del(&s.j, s.slicesOfNode[sliceNode(old)], name)
	s.touch(sliceNode(old))
	del(&s.j, s.slices, name)
	s.patchedSlices.remove(&s.j, name)
	return nil
}

// SetDeviceTaintRule upserts a DeviceTaintRule.
func (s *Snapshot) SetDeviceTaintRule(rule *resourceapi.DeviceTaintRule) error {
	if rule == nil {
		return fmt.Errorf("set device taint rule: nil rule")
	}
	if err := validName("device taint rule", rule.Name); err != nil {
		return fmt.Errorf("set device taint rule: %w", err)
	}
	put(&s.j, s.taintRules, rule.Name, rule)
	s.repatchSlices()
	return nil
}

// RemoveDeviceTaintRule deletes a DeviceTaintRule.
func (s *Snapshot) RemoveDeviceTaintRule(name string) error {
	if _, ok := s.taintRules[name]; !ok {
		return fmt.Errorf("remove device taint rule %s: not in the snapshot", name)
	}
	del(&s.j, s.taintRules, name)
	s.repatchSlices()
	return nil
}

// SetDeviceClass upserts a DeviceClass.
func (s *Snapshot) SetDeviceClass(class *resourceapi.DeviceClass) error {
	if class == nil {
		return fmt.Errorf("set device class: nil class")
	}
	if err := validName("device class", class.Name); err != nil {
		return fmt.Errorf("set device class: %w", err)
	}
	if old, ok := s.classes[class.Name]; ok && old.Spec.ExtendedResourceName != nil {
		del(&s.j, s.extClasses[v1.ResourceName(*old.Spec.ExtendedResourceName)], class.Name)
	}
	s.touch("")
	s.readClass(class)
	put(&s.j, s.classes, class.Name, class)
	if ext := class.Spec.ExtendedResourceName; ext != nil {
		put(&s.j, innerSet(&s.j, s.extClasses, v1.ResourceName(*ext)), class.Name, sets.Empty{})
	}
	return nil
}

// RemoveDeviceClass deletes a DeviceClass.
func (s *Snapshot) RemoveDeviceClass(name string) error {
	old, ok := s.classes[name]
	if !ok {
		return fmt.Errorf("remove device class %s: not in the snapshot", name)
	}
	if old.Spec.ExtendedResourceName != nil {
		del(&s.j, s.extClasses[v1.ResourceName(*old.Spec.ExtendedResourceName)], name)
	}
	s.touch("")
	del(&s.j, s.classes, name)
	return nil
}

// SetResourceClaimTemplate upserts a ResourceClaimTemplate. The scheduler
// never reads templates; the simulator does, to create the claims the
// resourceclaim controller has not created yet.
func (s *Snapshot) SetResourceClaimTemplate(t *resourceapi.ResourceClaimTemplate) error {
	if t == nil {
		return fmt.Errorf("set resource claim template: nil template")
	}
	if err := validName("resource claim template", t.Name); err != nil {
		return fmt.Errorf("set resource claim template: %w", err)
	}
	s.readClaim(&t.Spec.Spec)
	put(&s.j, s.templates, nsKey(t.Namespace, t.Name), t)
	return nil
}

// RemoveResourceClaimTemplate deletes a ResourceClaimTemplate.
func (s *Snapshot) RemoveResourceClaimTemplate(namespace, name string) error {
	key := nsKey(namespace, name)
	if _, ok := s.templates[key]; !ok {
		return fmt.Errorf("remove resource claim template %s: not in the snapshot", key)
	}
	del(&s.j, s.templates, key)
	return nil
}

// ResourceClaimTemplate returns a template.
func (s *Snapshot) ResourceClaimTemplate(namespace, name string) (*resourceapi.ResourceClaimTemplate, bool) {
	return byName(s.templates, namespace, name)
}

// ResourceSlices returns the slice lister; DeviceTaintRules are applied
// when the DRADeviceTaintRules gate is on.
func (s *Snapshot) ResourceSlices() fwk.ResourceSliceLister { return sliceLister{s} }

// DeviceClasses returns the device class lister.
func (s *Snapshot) DeviceClasses() fwk.DeviceClassLister { return classLister{s} }

// DeviceClassResolver maps extended resource names to device classes.
func (s *Snapshot) DeviceClassResolver() fwk.DeviceClassResolver { return classLister{s} }

type sliceLister struct{ s *Snapshot }

// ListWithDeviceTaintRules returns all slices, with the taints of matching
// DeviceTaintRules appended to their devices. The list is maintained as
// slices and rules change, in insertion order, and is shared: callers must
// not modify it. While a slice scope is set (ScopeSlices), only the slices
// in scope are listed, in the same order.
func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	if l.s.sliceScope != nil {
		return l.s.scopedSlices(), nil
	}
	return l.s.patchedSlices.items, nil
}

// DeviceTaintRules returns the rules the listed slices carry, sorted by
// name: none with the DRADeviceTaintRules gate off. Callers must not
// modify them.
func (s *Snapshot) DeviceTaintRules() []*resourceapi.DeviceTaintRule {
	return s.activeTaintRules()
}

// activeTaintRules returns the rules to apply, sorted by name so that taints
// are appended in a stable order; none when the DRADeviceTaintRules gate is off.
func (s *Snapshot) activeTaintRules() []*resourceapi.DeviceTaintRule {
	if !s.gates.deviceTaintRules || len(s.taintRules) == 0 {
		return nil
	}
	rules := make([]*resourceapi.DeviceTaintRule, 0, len(s.taintRules))
	for _, r := range s.taintRules {
		rules = append(rules, r)
	}
	sort.Slice(rules, func(i, k int) bool { return rules[i].Name < rules[k].Name })
	return rules
}

// repatchSlices applies the current rules to every slice again: O(slices),
// paid only when a DeviceTaintRule changes.
func (s *Snapshot) repatchSlices() {
	s.touch("")
	rules := s.activeTaintRules()
	for _, name := range append([]string(nil), s.patchedSlices.keys...) {
		s.patchedSlices.replace(&s.j, name, applyTaintRules(s.slices[name], rules))
	}
}

// applyTaintRules mirrors the ResourceSlice tracker of
// k8s.io/dynamic-resource-allocation (resourceslice/tracker, applyPatches):
// a rule without selector matches nothing, nil selector fields match
// everything, and a matching rule's taint is appended to the device. The
// slice is copied only when a rule matches.
func applyTaintRules(slice *resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) *resourceapi.ResourceSlice {
	patched := slice
	for _, rule := range rules {
		sel := rule.Spec.DeviceSelector
		if sel == nil ||
			(sel.Driver != nil && *sel.Driver != slice.Spec.Driver) ||
			(sel.Pool != nil && *sel.Pool != slice.Spec.Pool.Name) {
			continue
		}
		for i, dev := range slice.Spec.Devices {
			if sel.Device != nil && *sel.Device != dev.Name {
				continue
			}
			if patched == slice {
				patched = slice.DeepCopy()
			}
			patched.Spec.Devices[i].Taints = append(patched.Spec.Devices[i].Taints, rule.Spec.Taint)
		}
	}
	return patched
}

type classLister struct{ s *Snapshot }

// List returns all device classes sorted by name.
func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	list := make([]*resourceapi.DeviceClass, 0, len(l.s.classes))
	for _, c := range l.s.classes {
		list = append(list, c)
	}
	sort.Slice(list, func(i, k int) bool { return list[i].Name < list[k].Name })
	return list, nil
}

// Get returns a device class, or a NotFound error the DRA plugin turns into
// "device class does not exist".
func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l.s.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceGroup("deviceclasses"), name)
}

// GetDeviceClass resolves an extended resource name the way the
// scheduler's extended resource cache does: the implicit name
// deviceclass.resource.kubernetes.io/<class> names that class; an explicit
// extendedResourceName shared by several classes resolves to the newest
// class, ties broken by the lowest name. Unlike that cache, the answer does
// not depend on the order in which classes were added.
func (l classLister) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	s := l.s
	if !s.gates.extendedResource {
		return nil
	}
	var best *resourceapi.DeviceClass
	for className := range s.extClasses[name] {
		c := s.classes[className]
		if c == nil {
			continue
		}
		if best == nil || c.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&best.CreationTimestamp) && c.Name < best.Name) {
			best = c
		}
	}
	if best != nil {
		return best
	}
	if className, ok := strings.CutPrefix(string(name), resourceapi.ResourceDeviceClassPrefix); ok {
		return s.classes[className]
	}
	return nil
}
