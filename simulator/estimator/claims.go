package estimator

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	resourcedefaults "k8s.io/kubernetes/pkg/apis/resource/v1"
	"k8s.io/utils/ptr"
)

// A copied placement must create the claims the framework would create for
// the pod's template claims, under the same names, or estimates with and
// without the memo would differ. The framework keeps its claim simulation
// (simulator/framework claims.go) unexported, so what follows mirrors it:
// the resourceclaim controller's naming with the random suffix replaced by
// a hash of pod UID and claim name, its owner reference, annotation,
// labels and defaulted spec. TestMemoIsExact compares claim names and
// contents between both paths, so any drift fails it.

// claimFor returns the claim a pod claim resolves to; for a template claim
// not created yet, a new claim (made reports that) which the caller
// stores. Nil without error when the controller decided no claim is
// needed. Memoizable pods own no claims yet (see resolve), so unlike the
// framework there is no orphan to look for first.
func (r *run) claimFor(pod *v1.Pod, podClaim *v1.PodResourceClaim) (claim *resourceapi.ResourceClaim, made bool, err error) {
	if !notMadeYet(pod, podClaim) {
		// Checked first: resourceclaim.Name reports a claim not made yet
		// with an error, which costs more to build than the check.
		name, _, err := resourceclaim.Name(pod, podClaim)
		switch {
		case err == nil && name == nil:
			return nil, false, nil
		case err == nil:
			claim, err := r.snap.ResourceClaims().Get(pod.Namespace, *name)
			return claim, false, err
		default:
			return nil, false, err
		}
	}
	tmpl, ok := r.snap.ResourceClaimTemplate(pod.Namespace, *podClaim.ResourceClaimTemplateName)
	if !ok {
		return nil, false, fmt.Errorf("claim template %s/%s not in the snapshot", pod.Namespace, *podClaim.ResourceClaimTemplateName)
	}
	annotations := maps.Clone(tmpl.Spec.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourceapi.PodResourceClaimAnnotation] = podClaim.Name
	claim = &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			GenerateName: generateNameFor(pod.Name, podClaim.Name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
			}},
			Annotations: annotations,
			Labels:      maps.Clone(tmpl.Spec.ObjectMeta.Labels),
		},
		Spec: r.templateSpec(tmpl),
	}
	claim.Name = r.freeName(pod.Namespace, claim.GenerateName, string(pod.UID)+"/"+podClaim.Name)
	claim.UID = types.UID("simulated-" + pod.Namespace + "-" + claim.Name)
	return claim, true, nil
}

// notMadeYet reports a template claim without a claim recorded in the
// pod's status, which the controller still has to make.
func notMadeYet(pod *v1.Pod, podClaim *v1.PodResourceClaim) bool {
	return podClaim.ResourceClaimName == nil && podClaim.ResourceClaimTemplateName != nil &&
		!slices.ContainsFunc(pod.Status.ResourceClaimStatuses, func(s v1.PodResourceClaimStatus) bool { return s.Name == podClaim.Name })
}

// templateSpec returns the defaulted spec of a template, computed once per
// template object and shared by the claims made from it (read-only, like
// everything stored in the snapshot).
func (r *run) templateSpec(tmpl *resourceapi.ResourceClaimTemplate) resourceapi.ResourceClaimSpec {
	if spec, ok := r.specs[tmpl]; ok {
		return spec
	}
	c := &resourceapi.ResourceClaim{Spec: *tmpl.Spec.Spec.DeepCopy()}
	defaultClaim(c)
	if r.specs == nil {
		r.specs = map[*resourceapi.ResourceClaimTemplate]resourceapi.ResourceClaimSpec{}
	}
	r.specs[tmpl] = c.Spec
	return c.Spec
}

// generateNameFor is the resourceclaim controller's generateName: long
// names are truncated in proportion, leaving room for "-" and 5 characters.
func generateNameFor(podName, podClaimName string) string {
	name := podName + "-" + podClaimName + "-"
	const maxBaseLen = 57
	if len(name) > maxBaseLen {
		name = podName[0:len(podName)*maxBaseLen/len(name)] + "-" +
			podClaimName[0:len(podClaimName)*maxBaseLen/len(name)]
	}
	return name
}

// suffixAlphabet is the apiserver's name generator alphabet.
const suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// freeName returns base plus a 5-character suffix derived from seed,
// unused in the namespace.
func (r *run) freeName(namespace, base, seed string) string {
	for attempt := 0; ; attempt++ {
		name := base + nameSuffix(seed, attempt)
		if _, taken := r.snap.ResourceClaim(namespace, name); !taken {
			return name
		}
	}
}

// nameSuffix is 5 characters of the FNV-1a hash of "<seed>#<attempt>",
// hashed without fmt: this runs for every claim a copied placement makes.
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

// defaultClaim applies API defaulting, as the framework does for claims
// built in memory (the allocator refuses requests without allocationMode).
func defaultClaim(c *resourceapi.ResourceClaim) {
	resourcedefaults.SetObjectDefaults_ResourceClaim(c)
}

// needsDefaults reports a claim spec API defaulting would change.
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
