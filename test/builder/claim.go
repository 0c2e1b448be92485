package builder

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// RequestBuilder builds one device request of a claim: either an exact
// request (class, count, selectors, capacity, tolerations) or, when made by
// FirstAvailable, a prioritized list of sub-requests.
type RequestBuilder struct {
	name  string
	exact resourceapi.ExactDeviceRequest
	subs  []resourceapi.DeviceSubRequest
}

// Request starts an exact request for one device of deviceClass. Count and
// allocation mode are filled (ExactCount, 1) as API defaulting would, because
// the allocator refuses undefaulted requests.
func Request(name, deviceClass string) *RequestBuilder {
	return &RequestBuilder{name: name, exact: resourceapi.ExactDeviceRequest{
		DeviceClassName: deviceClass,
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
	}}
}

// FirstAvailable starts a request satisfied by the first alternative that can
// be allocated, in order. Each alternative's name becomes its sub-request name.
func FirstAvailable(name string, alternatives ...*RequestBuilder) *RequestBuilder {
	b := &RequestBuilder{name: name}
	for _, a := range alternatives {
		b.subs = append(b.subs, a.subRequest())
	}
	return b
}

// Count asks for n devices.
func (b *RequestBuilder) Count(n int64) *RequestBuilder {
	b.exact.AllocationMode = resourceapi.DeviceAllocationModeExactCount
	b.exact.Count = n
	return b
}

// All asks for every matching device of the node.
func (b *RequestBuilder) All() *RequestBuilder {
	b.exact.AllocationMode = resourceapi.DeviceAllocationModeAll
	b.exact.Count = 0
	return b
}

// Selector adds a CEL selector, e.g. `device.attributes["gpu.example.com"].model == "a100"`.
func (b *RequestBuilder) Selector(expression string) *RequestBuilder {
	b.exact.Selectors = append(b.exact.Selectors, celSelector(expression))
	return b
}

// Capacity asks for an amount of a consumable capacity, e.g. ("memory", "10Gi").
func (b *RequestBuilder) Capacity(name, value string) *RequestBuilder {
	if b.exact.Capacity == nil {
		b.exact.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
	}
	b.exact.Capacity.Requests[resourceapi.QualifiedName(name)] = quantity(value)
	return b
}

// Tolerate tolerates a device taint; an empty value means operator Exists,
// an empty effect tolerates every effect.
func (b *RequestBuilder) Tolerate(key, value string, effect resourceapi.DeviceTaintEffect) *RequestBuilder {
	t := resourceapi.DeviceToleration{Key: key, Value: value, Effect: effect, Operator: resourceapi.DeviceTolerationOpEqual}
	if value == "" {
		t.Operator = resourceapi.DeviceTolerationOpExists
	}
	b.exact.Tolerations = append(b.exact.Tolerations, t)
	return b
}

func (b *RequestBuilder) request() resourceapi.DeviceRequest {
	if len(b.subs) > 0 {
		r := resourceapi.DeviceRequest{Name: b.name}
		for _, s := range b.subs {
			r.FirstAvailable = append(r.FirstAvailable, *s.DeepCopy())
		}
		return r
	}
	return resourceapi.DeviceRequest{Name: b.name, Exactly: b.exact.DeepCopy()}
}

func (b *RequestBuilder) subRequest() resourceapi.DeviceSubRequest {
	e := b.exact.DeepCopy()
	return resourceapi.DeviceSubRequest{
		Name:            b.name,
		DeviceClassName: e.DeviceClassName,
		Selectors:       e.Selectors,
		AllocationMode:  e.AllocationMode,
		Count:           e.Count,
		Tolerations:     e.Tolerations,
		Capacity:        e.Capacity,
	}
}

// claimSpec holds what claims and claim templates share.
type claimSpec struct {
	spec resourceapi.ResourceClaimSpec
}

func (s *claimSpec) addRequests(reqs []*RequestBuilder) {
	for _, r := range reqs {
		s.spec.Devices.Requests = append(s.spec.Devices.Requests, r.request())
	}
}

func (s *claimSpec) addConstraint(c resourceapi.DeviceConstraint) {
	s.spec.Devices.Constraints = append(s.spec.Devices.Constraints, c)
}

// ClaimBuilder builds a ResourceClaim.
type ClaimBuilder struct {
	claimSpec
	claim resourceapi.ResourceClaim
}

// Claim starts a ResourceClaim in namespace ns.
func Claim(ns, name string) *ClaimBuilder {
	return &ClaimBuilder{claim: resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidFor("resourceclaim", ns, name)},
	}}
}

// Request appends device requests.
func (b *ClaimBuilder) Request(reqs ...*RequestBuilder) *ClaimBuilder {
	b.addRequests(reqs)
	return b
}

// MatchAttribute requires the devices of the listed requests (all requests
// when none is listed) to have the same value of a fully qualified attribute,
// e.g. "resource.kubernetes.io/pcieRoot".
func (b *ClaimBuilder) MatchAttribute(attribute string, requests ...string) *ClaimBuilder {
	b.addConstraint(resourceapi.DeviceConstraint{Requests: requests, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(attribute))})
	return b
}

// DistinctAttribute requires distinct values of a fully qualified attribute.
func (b *ClaimBuilder) DistinctAttribute(attribute string, requests ...string) *ClaimBuilder {
	b.addConstraint(resourceapi.DeviceConstraint{Requests: requests, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(attribute))})
	return b
}

// Allocated records an allocation of devices pinned to nodeName, as the
// scheduler writes it for node-local devices.
func (b *ClaimBuilder) Allocated(nodeName string, results ...resourceapi.DeviceRequestAllocationResult) *ClaimBuilder {
	b.claim.Status.Allocation = &resourceapi.AllocationResult{
		Devices:      resourceapi.DeviceAllocationResult{Results: results},
		NodeSelector: NodeNameSelector(nodeName),
	}
	return b
}

// ReservedFor adds pods to status.reservedFor.
func (b *ClaimBuilder) ReservedFor(pods ...*corev1.Pod) *ClaimBuilder {
	for _, p := range pods {
		b.claim.Status.ReservedFor = append(b.claim.Status.ReservedFor,
			resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return b
}

// OwnedByPod marks the claim as generated for pod's claim podClaimName, as the
// resourceclaim controller does (owner reference and pod-claim-name annotation).
func (b *ClaimBuilder) OwnedByPod(pod *corev1.Pod, podClaimName string) *ClaimBuilder {
	b.claim.OwnerReferences = append(b.claim.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	if b.claim.Annotations == nil {
		b.claim.Annotations = map[string]string{}
	}
	b.claim.Annotations[resourceapi.PodResourceClaimAnnotation] = podClaimName
	return b
}

// Obj returns a copy of the claim.
func (b *ClaimBuilder) Obj() *resourceapi.ResourceClaim {
	c := b.claim.DeepCopy()
	c.Spec = *b.spec.DeepCopy()
	return c
}

// ClaimTemplateBuilder builds a ResourceClaimTemplate.
type ClaimTemplateBuilder struct {
	claimSpec
	tmpl resourceapi.ResourceClaimTemplate
}

// ClaimTemplate starts a ResourceClaimTemplate in namespace ns.
func ClaimTemplate(ns, name string) *ClaimTemplateBuilder {
	return &ClaimTemplateBuilder{tmpl: resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidFor("resourceclaimtemplate", ns, name)},
	}}
}

// Request appends device requests.
func (b *ClaimTemplateBuilder) Request(reqs ...*RequestBuilder) *ClaimTemplateBuilder {
	b.addRequests(reqs)
	return b
}

// MatchAttribute: see ClaimBuilder.MatchAttribute.
func (b *ClaimTemplateBuilder) MatchAttribute(attribute string, requests ...string) *ClaimTemplateBuilder {
	b.addConstraint(resourceapi.DeviceConstraint{Requests: requests, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(attribute))})
	return b
}

// DistinctAttribute: see ClaimBuilder.DistinctAttribute.
func (b *ClaimTemplateBuilder) DistinctAttribute(attribute string, requests ...string) *ClaimTemplateBuilder {
	b.addConstraint(resourceapi.DeviceConstraint{Requests: requests, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(attribute))})
	return b
}

// Obj returns a copy of the template.
func (b *ClaimTemplateBuilder) Obj() *resourceapi.ResourceClaimTemplate {
	t := b.tmpl.DeepCopy()
	t.Spec.Spec = *b.spec.DeepCopy()
	return t
}

// AllocatedDevice is one allocated device, for ClaimBuilder.Allocated.
func AllocatedDevice(request, driver, pool, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: pool, Device: device}
}

// NodeNameSelector selects exactly the node named nodeName by field, the way
// allocations of node-local devices pin a claim to its node.
func NodeNameSelector(nodeName string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName},
		}},
	}}}
}
