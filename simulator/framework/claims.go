package framework

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	resourcedefaults "k8s.io/kubernetes/pkg/apis/resource/v1"
	"k8s.io/utils/ptr"
)

// preparePod returns the pod as the scheduler would see it once the
// resourceclaim controller has done its part: for each template claim
// without a ResourceClaim yet, a simulated claim is stored in the snapshot
// and recorded in the returned copy's status.resourceClaimStatuses. Claims
// the pod uses are defaulted (allocationMode, count) where in-memory input
// left that to an API server that never saw them. The caller's pod is not
// modified; callers fork the snapshot around this.
func (r *Runner) preparePod(pod *v1.Pod) (*v1.Pod, error) {
	if pod == nil {
		return nil, fmt.Errorf("nil pod")
	}
	if pod.UID == "" {
		// Claims are owned by the pod's UID and NodeInfo keys pods by it.
		return nil, fmt.Errorf("pod %s/%s has no UID", pod.Namespace, pod.Name)
	}
	out := pod
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		var name *string
		var err error
		notMade := ClaimNotMadeYet(out, podClaim)
		if !notMade {
			name, _, err = resourceclaim.Name(out, podClaim)
		}
		switch {
		case notMade:
			claimName, err := r.simulateTemplateClaim(pod, podClaim)
			if err != nil {
				return nil, err
			}
			if claimName == "" {
				continue
			}
			if out == pod {
				// A shallow copy with a status list of its own: the
				// framework only reads pods, and so does the snapshot.
				cp := *pod
				cp.Status.ResourceClaimStatuses = slices.Clip(pod.Status.ResourceClaimStatuses)
				out = &cp
			}
			out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses,
				v1.PodResourceClaimStatus{Name: podClaim.Name, ResourceClaimName: ptr.To(claimName)})
		case err == nil && name != nil:
			if err := r.defaultClaim(pod.Namespace, *name); err != nil {
				return nil, err
			}
		case err == nil:
			// The controller decided no claim is needed.
		default:
			return nil, fmt.Errorf("pod %s/%s claim %s: %w", pod.Namespace, pod.Name, podClaim.Name, err)
		}
	}
	return out, nil
}

// ClaimNotMadeYet reports a template claim the resourceclaim controller has not
// made yet, which resourceclaim.Name reports with an error (ErrClaimNotFound):
// the simulation asks about such claims on every cycle, and building that
// error costs more than this check.
func ClaimNotMadeYet(pod *v1.Pod, podClaim *v1.PodResourceClaim) bool {
	return podClaim.ResourceClaimName == nil && podClaim.ResourceClaimTemplateName != nil &&
		!slices.ContainsFunc(pod.Status.ResourceClaimStatuses, func(s v1.PodResourceClaimStatus) bool { return s.Name == podClaim.Name })
}

// simulateTemplateClaim finds or creates the claim the resourceclaim
// controller makes for a pod's template claim (pkg/controller/resourceclaim:
// generateName "<owner>-<podClaim>-", the owner as controller, the
// pod-claim-name annotation, the template's labels, annotations and spec).
// The owner is the pod, or its PodGroup for a claim of the group
// (groupclaims.go). The random suffix of the real name becomes a hash of
// the owner's UID and claim name, so a simulation is repeatable. It
// returns "" when the template is unknown; the DRA plugin then reports the
// claim as missing.
func (r *Runner) simulateTemplateClaim(pod *v1.Pod, podClaim *v1.PodResourceClaim) (string, error) {
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}
	if pg := r.GroupClaimOwner(pod, podClaim); pg != nil {
		if name := r.groupClaimMade(pg, podClaim.Name); name != "" {
			return name, r.defaultClaim(pod.Namespace, name)
		}
		owner = metav1.OwnerReference{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup",
			Name: pg.Name, UID: pg.UID, Controller: ptr.To(true)}
	}
	// The controller may have created the claim without the status
	// showing it yet (or an earlier member's simulation made the group's):
	// it looks for such an orphan first, and so do we.
	for _, c := range r.snap.ClaimsOwnedBy(owner.UID) {
		if c.Annotations[resourceapi.PodResourceClaimAnnotation] == podClaim.Name {
			return c.Name, r.defaultClaim(c.Namespace, c.Name)
		}
	}
	tmpl, ok := r.snap.ResourceClaimTemplate(pod.Namespace, *podClaim.ResourceClaimTemplateName)
	if !ok {
		r.logger.V(4).Info("Claim template not in snapshot", "pod", klog.KObj(pod), "owner", owner.Kind, "template", *podClaim.ResourceClaimTemplateName)
		return "", nil
	}
	claim := r.ownedClaim(pod.Namespace, owner, podClaim.Name, tmpl)
	if err := r.snap.SetResourceClaim(claim); err != nil {
		return "", fmt.Errorf("simulate claim %s for %s %s/%s: %w", podClaim.Name, owner.Kind, pod.Namespace, owner.Name, err)
	}
	r.logger.V(5).Info("Simulated template claim", "pod", klog.KObj(pod), "owner", owner.Kind, "claim", klog.KObj(claim))
	return claim.Name, nil
}

// TemplateClaim returns, without storing it, the claim the resourceclaim
// controller would make from tmpl for the pod's template claim: named
// "<pod>-<podClaim>-" plus a suffix hashed from pod UID and claim name (free
// in the snapshot), owned by the pod, with the pod-claim-name annotation,
// the template's labels and annotations and its defaulted spec (shared,
// read-only). The estimator makes the same claims when it copies
// placements, so both paths name and shape them alike.
func (r *Runner) TemplateClaim(pod *v1.Pod, podClaim *v1.PodResourceClaim, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	return r.ownedClaim(pod.Namespace, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)},
		podClaim.Name, tmpl)
}

// ownedClaim is the claim made from tmpl for owner's claim podClaim (see
// TemplateClaim).
func (r *Runner) ownedClaim(namespace string, owner metav1.OwnerReference, podClaim string, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	annotations := maps.Clone(tmpl.Spec.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourceapi.PodResourceClaimAnnotation] = podClaim
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       namespace,
			GenerateName:    generateNameFor(owner.Name, podClaim),
			OwnerReferences: []metav1.OwnerReference{owner},
			Annotations:     annotations,
			Labels:          maps.Clone(tmpl.Spec.ObjectMeta.Labels),
		},
		Spec: r.templateSpec(tmpl),
	}
	claim.Name = r.freeName(namespace, claim.GenerateName, string(owner.UID)+"/"+podClaim)
	claim.UID = simulatedUID(namespace, claim.Name)
	return claim
}

// DefaultedSpec returns the claim's spec with API defaulting applied, or
// the spec itself when defaulting would change nothing (claims read from an
// API server): the allocator refuses requests without allocationMode.
func DefaultedSpec(claim *resourceapi.ResourceClaim) resourceapi.ResourceClaimSpec {
	if !needsDefaults(&claim.Spec) {
		return claim.Spec
	}
	d := claim.DeepCopy()
	resourcedefaults.SetObjectDefaults_ResourceClaim(d)
	return d.Spec
}

// maxTemplateSpecs bounds the defaulted template specs a runner keeps: a
// planner's claim templates number in the dozens, and templates replaced in
// the snapshot leave entries behind, so the cache is simply dropped when
// it grows past this.
const maxTemplateSpecs = 1024

// templateSpec returns the spec of a template with API defaults applied,
// computed once per template object (stored objects are never modified,
// so the pointer identifies the content) and shared, read-only, by every
// claim made from it.
func (r *Runner) templateSpec(tmpl *resourceapi.ResourceClaimTemplate) resourceapi.ResourceClaimSpec {
	if spec, ok := r.specs[tmpl]; ok {
		return spec
	}
	c := &resourceapi.ResourceClaim{Spec: *tmpl.Spec.Spec.DeepCopy()}
	resourcedefaults.SetObjectDefaults_ResourceClaim(c)
	if r.specs == nil || len(r.specs) >= maxTemplateSpecs {
		r.specs = map[*resourceapi.ResourceClaimTemplate]resourceapi.ResourceClaimSpec{}
	}
	r.specs[tmpl] = c.Spec
	return c.Spec
}

// generateNameFor mirrors the controller: long names are truncated in
// proportion to their lengths, leaving room for "-" and 5 characters.
func generateNameFor(podName, podClaimName string) string {
	name := podName + "-" + podClaimName + "-"
	const maxBaseLen = 57
	if len(name) > maxBaseLen {
		name = podName[0:len(podName)*maxBaseLen/len(name)] + "-" +
			podClaimName[0:len(podClaimName)*maxBaseLen/len(name)]
	}
	return name
}

// suffixAlphabet is the apiserver's name generator alphabet (no vowels, no
// confusable digits), so simulated names look like real ones.
const suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// freeName returns base plus a 5-character suffix derived from seed, unused
// in the namespace.
func (r *Runner) freeName(namespace, base, seed string) string {
	for attempt := 0; ; attempt++ {
		name := base + nameSuffix(seed, attempt)
		if _, taken := r.snap.ResourceClaim(namespace, name); !taken {
			return name
		}
	}
}

// nameSuffix is the suffix freeName tries at attempt: 5 characters of the
// FNV-1a hash of "<seed>#<attempt>", hashed without fmt: this runs for
// every simulated claim.
func nameSuffix(seed string, attempt int) string {
	h := fnv.New64a()
	var buf [20]byte
	_, _ = io.WriteString(h, seed)
	_, _ = h.Write(strconv.AppendInt(append(buf[:0], '#'), int64(attempt), 10))
	sum := h.Sum64()
	var suffix [5]byte
	for i := range suffix {
		suffix[i] = suffixAlphabet[sum%uint64(len(suffixAlphabet))]
		sum /= uint64(len(suffixAlphabet))
	}
	return string(suffix[:])
}

// simulatedUID marks objects that exist only in the simulation.
func simulatedUID(namespace, name string) types.UID {
	return types.UID("simulated-" + namespace + "-" + name)
}

// defaultClaim applies API defaulting to a stored claim that lacks it: the
// allocator refuses requests without allocationMode ("unsupported count
// mode"). Claims read from an API server are already defaulted and untouched.
func (r *Runner) defaultClaim(namespace, name string) error {
	claim, ok := r.snap.ResourceClaim(namespace, name)
	if !ok || !needsDefaults(&claim.Spec) {
		// A missing claim is the DRA plugin's to report.
		return nil
	}
	c := *claim
	c.Spec = DefaultedSpec(claim)
	claim = &c
	if err := r.snap.SetResourceClaim(claim); err != nil {
		return fmt.Errorf("default claim %s/%s: %w", namespace, name, err)
	}
	return nil
}

func needsDefaults(spec *resourceapi.ResourceClaimSpec) bool {
	undefaulted := func(mode resourceapi.DeviceAllocationMode, count int64) bool {
		return mode == "" || (mode == resourceapi.DeviceAllocationModeExactCount && count == 0)
	}
	for _, req := range spec.Devices.Requests {
		if req.Exactly != nil && undefaulted(req.Exactly.AllocationMode, req.Exactly.Count) {
			return true
		}
		if slices.ContainsFunc(req.FirstAvailable, func(s resourceapi.DeviceSubRequest) bool {
			return undefaulted(s.AllocationMode, s.Count)
		}) {
			return true
		}
	}
	return false
}
