package builder

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DeviceClassBuilder builds a DeviceClass.
type DeviceClassBuilder struct {
	class resourceapi.DeviceClass
}

// DeviceClass starts a DeviceClass that selects nothing until Driver or
// Selector is called (an empty class matches every device).
func DeviceClass(name string) *DeviceClassBuilder {
	return &DeviceClassBuilder{class: resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uidFor("deviceclass", "", name)},
	}}
}

// Driver adds the CEL selector device.driver == "<driver>".
func (b *DeviceClassBuilder) Driver(driver string) *DeviceClassBuilder {
	return b.Selector(fmt.Sprintf("device.driver == %q", driver))
}

// Selector adds a CEL selector.
func (b *DeviceClassBuilder) Selector(expression string) *DeviceClassBuilder {
	b.class.Spec.Selectors = append(b.class.Spec.Selectors, celSelector(expression))
	return b
}

// ExtendedResource makes the class back an extended resource: a pod that
// requests it (e.g. example.com/gpu) without a claim gets a device of the class.
func (b *DeviceClassBuilder) ExtendedResource(name string) *DeviceClassBuilder {
	b.class.Spec.ExtendedResourceName = ptr.To(name)
	return b
}

// Obj returns a copy of the class.
func (b *DeviceClassBuilder) Obj() *resourceapi.DeviceClass {
	return b.class.DeepCopy()
}

// DeviceTaintRuleBuilder builds a DeviceTaintRule.
type DeviceTaintRuleBuilder struct {
	rule resourceapi.DeviceTaintRule
}

// DeviceTaintRule starts a rule that taints the selected devices with
// key=value:effect. Without Driver/Pool/Device it taints every device.
func DeviceTaintRule(name, key, value string, effect resourceapi.DeviceTaintEffect) *DeviceTaintRuleBuilder {
	return &DeviceTaintRuleBuilder{rule: resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uidFor("devicetaintrule", "", name)},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{},
			Taint:          resourceapi.DeviceTaint{Key: key, Value: value, Effect: effect},
		},
	}}
}

// Driver limits the rule to one driver.
func (b *DeviceTaintRuleBuilder) Driver(driver string) *DeviceTaintRuleBuilder {
	b.rule.Spec.DeviceSelector.Driver = ptr.To(driver)
	return b
}

// Pool limits the rule to one pool.
func (b *DeviceTaintRuleBuilder) Pool(pool string) *DeviceTaintRuleBuilder {
	b.rule.Spec.DeviceSelector.Pool = ptr.To(pool)
	return b
}

// Device limits the rule to one device name.
func (b *DeviceTaintRuleBuilder) Device(device string) *DeviceTaintRuleBuilder {
	b.rule.Spec.DeviceSelector.Device = ptr.To(device)
	return b
}

// Obj returns a copy of the rule.
func (b *DeviceTaintRuleBuilder) Obj() *resourceapi.DeviceTaintRule {
	return b.rule.DeepCopy()
}

func celSelector(expression string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}
}
