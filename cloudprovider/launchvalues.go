package cloudprovider

import (
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// LaunchValue is what a template's device attribute holds when its value
// is the one the provider picks per request (or unit) for label
// (AnnotationTopologyPerRequest): the string "$(<label>)". NVIDIA's
// ComputeDomain driver publishes IMEX channel devices whose clique
// attribute is the node's nvidia.com/gpu.clique: a new unit's channels
// carry the unit's fresh clique, never the clique of the node a template
// was read off. Instantiating a template fills it from the node's label
// (docs/design/units-of-scale.md).
func LaunchValue(label string) string { return "$(" + label + ")" }

// launchLabel is the label a LaunchValue names.
func launchLabel(v string) (string, bool) {
	if !strings.HasPrefix(v, "$(") || !strings.HasSuffix(v, ")") || len(v) < 4 {
		return "", false
	}
	return v[2 : len(v)-1], true
}

// LaunchLabels are the labels the string attributes of slices name as
// LaunchValues, each once, in the order met.
func LaunchLabels(from []*resourceapi.ResourceSlice) []string {
	var out []string
	for _, s := range from {
		for _, d := range s.Spec.Devices {
			for _, a := range d.Attributes {
				if a.StringValue == nil {
					continue
				}
				if l, ok := launchLabel(*a.StringValue); ok && !slices.Contains(out, l) {
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// FillLaunchValues is slices with every LaunchValue attribute replaced by
// value(label). A slice with none is returned as is; one with some is a
// copy whose changed devices are copies: the input, shared with the
// template, is never changed.
func FillLaunchValues(in []*resourceapi.ResourceSlice, value func(label string) string) []*resourceapi.ResourceSlice {
	out, copied := in, false
	for i, s := range in {
		devices := rewriteAttributes(s.Spec.Devices, func(v string) (string, bool) {
			l, ok := launchLabel(v)
			if !ok {
				return "", false
			}
			return value(l), true
		})
		if devices == nil {
			continue
		}
		if !copied {
			out, copied = slices.Clone(in), true
		}
		c := *s
		c.Spec.Devices = devices
		out[i] = &c
	}
	return out
}

// markLaunchValues is FillLaunchValues' inverse for a template read off a
// running node: string attributes equal to the node's value of a label the
// provider picks per request (values: value to label) become that label's
// LaunchValue. The slices are the template's own: changed in place.
func markLaunchValues(in []*resourceapi.ResourceSlice, values map[string]string) {
	if len(values) == 0 {
		return
	}
	for _, s := range in {
		devices := rewriteAttributes(s.Spec.Devices, func(v string) (string, bool) {
			l, ok := values[v]
			if !ok {
				return "", false
			}
			return LaunchValue(l), true
		})
		if devices != nil {
			s.Spec.Devices = devices
		}
	}
}

// rewriteAttributes returns devices with each string attribute for which
// with answers ok replaced by its answer, or nil when none is: changed
// devices get attribute maps of their own.
func rewriteAttributes(devices []resourceapi.Device, with func(string) (string, bool)) []resourceapi.Device {
	var out []resourceapi.Device
	for i, d := range devices {
		var attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
		for name, a := range d.Attributes {
			if a.StringValue == nil {
				continue
			}
			v, ok := with(*a.StringValue)
			if !ok {
				continue
			}
			if attrs == nil {
				attrs = maps.Clone(d.Attributes)
			}
			attrs[name] = resourceapi.DeviceAttribute{StringValue: &v}
		}
		if attrs == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(devices)
		}
		out[i].Attributes = attrs
	}
	return out
}
