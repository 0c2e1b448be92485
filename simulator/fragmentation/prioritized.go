package fragmentation

import (
	resourceapi "k8s.io/api/resource/v1"
)

// FirstAlternativeOnly returns spec with every prioritized list cut to its
// first alternative, as an exact request of the same name, and whether
// anything changed: what a pod gets when the autoscaler insists on its
// first choice (--dra-prioritized-list-policy=prefer-first-alternative).
func FirstAlternativeOnly(spec resourceapi.ResourceClaimSpec) (resourceapi.ResourceClaimSpec, bool) {
	changed := false
	var reqs []resourceapi.DeviceRequest
	for _, r := range spec.Devices.Requests {
		if len(r.FirstAvailable) == 0 {
			reqs = append(reqs, r)
			continue
		}
		changed = true
		first := r.FirstAvailable[0]
		reqs = append(reqs, resourceapi.DeviceRequest{Name: r.Name, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: first.DeviceClassName,
			Selectors:       first.Selectors,
			AllocationMode:  first.AllocationMode,
			Count:           first.Count,
			Tolerations:     first.Tolerations,
			Capacity:        first.Capacity,
		}})
	}
	if !changed {
		return spec, false
	}
	out := *spec.DeepCopy()
	out.Devices.Requests = reqs
	return out, true
}

// HasPrioritizedList reports whether a claim spec has a request with
// alternatives.
func HasPrioritizedList(spec *resourceapi.ResourceClaimSpec) bool {
	for _, r := range spec.Devices.Requests {
		if len(r.FirstAvailable) > 0 {
			return true
		}
	}
	return false
}

// subRequestIndex is the position of sub among the alternatives of request
// parent, -1 when there is no such alternative.
func subRequestIndex(reqs []resourceapi.DeviceRequest, parent, sub string) int {
	for _, r := range reqs {
		if r.Name != parent {
			continue
		}
		for i, s := range r.FirstAvailable {
			if s.Name == sub {
				return i
			}
		}
	}
	return -1
}
