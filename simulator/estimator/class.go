package estimator

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// perPodLabels differ between the pods of one controller by design; no
// scheduler rule keys on them in practice, so they do not split classes.
var perPodLabels = map[string]bool{
	"statefulset.kubernetes.io/pod-name":       true,
	"apps.kubernetes.io/pod-index":             true,
	"batch.kubernetes.io/job-completion-index": true,
}

// class is an equivalence class of pods: same controller and same
// scheduling-relevant spec, so the scheduler's verdict for one pod of the
// class on a node is its verdict for every other pod of the class there.
type class struct {
	id  int
	key string
	// Sort keys of first-fit decreasing.
	accel, cpu, mem int64
	// memoizable classes can reuse verdicts and placements across nodes in
	// the same state (see memo.go): their verdict on a node depends only
	// on that node's content, and resources only shrink during an
	// estimate. Inter-pod (anti-)affinity, topology spread, volumes
	// claimed across nodes, groups owning claims (inertGroup) and shared
	// claims break that.
	memoizable bool
	// antiAffinity: placing a pod of this class can reject other pods
	// anywhere in its topology domain, which invalidates memoized verdicts.
	antiAffinity bool
	// fitsLater: a pod of the class turned down by a node may fit there
	// once other pods are placed (mayFitLater: hard topology spread, the
	// profile's included, required pod affinity, members of groups that
	// own claims), so no node is closed to the class and no empty node's
	// verdict is kept for it.
	fitsLater bool
	// unplaceable is the verdict on an empty new node once a pod of the
	// class failed there: no other pod of the class is tried.
	unplaceable *framework.NodeResult
	// open lists the hypothetical nodes not yet closed to the class, in
	// opening order; seen counts the nodes of the estimate already
	// considered for it, closed flags nodes (by index) a pod of the class
	// failed on.
	open   []*hnode
	seen   int
	closed []bool
}

// refresh appends the nodes opened since the last call.
func (c *class) refresh(nodes []*hnode) {
	c.open = append(c.open, nodes[c.seen:]...)
	c.seen = len(nodes)
	for len(c.closed) < len(nodes) {
		c.closed = append(c.closed, false)
	}
}

func (c *class) close(n *hnode) { c.closed[n.index] = true }

// reopen forgets which nodes the class's earlier pods were turned down
// by: the next refresh opens every node again.
func (c *class) reopen() {
	c.open, c.seen = c.open[:0], 0
	clear(c.closed)
}

// compact drops closed nodes from the open list.
func (c *class) compact() {
	kept := c.open[:0]
	for _, n := range c.open {
		if !c.closed[n.index] {
			kept = append(kept, n)
		}
	}
	clear(c.open[len(kept):])
	c.open = kept
}

// shape is what the key of a class is computed from: every pod field the
// in-tree Filter and Reserve plugins read (resources and ports, node
// selection, tolerations, inter-pod rules with the labels they match,
// volumes, DRA claims by their content rather than their names), plus the
// controller and priority. Two pods with the same shape are interchangeable
// for the scheduler.
type shape struct {
	Namespace        string
	Owner            types.UID
	Labels           map[string]string
	Containers       []containerShape
	InitContainers   []containerShape
	Overhead         v1.ResourceList
	Resources        *v1.ResourceRequirements
	NodeSelector     map[string]string
	Affinity         *v1.Affinity
	Tolerations      []v1.Toleration
	Spread           []v1.TopologySpreadConstraint
	NodeName         string
	Volumes          []v1.Volume
	HostNetwork      bool
	Priority         *int32
	PreemptionPolicy *v1.PreemptionPolicy
	SchedulingGroup  *v1.PodSchedulingGroup
	OS               *v1.PodOS
	Claims           []claimShape
}

type containerShape struct {
	Resources     v1.ResourceRequirements
	Ports         []v1.ContainerPort
	RestartPolicy *v1.ContainerRestartPolicy
}

type claimShape struct {
	Name string
	// Which of the following are set depends on how the claim resolves.
	None       bool                           // the controller decided no claim is needed
	Template   *resourceapi.ResourceClaimSpec // claim still to be made from a template
	Spec       *resourceapi.ResourceClaimSpec // existing claim
	Allocation *resourceapi.AllocationResult  // existing claim's allocation, if any
	Shared     string                         // name of a claim several pods use
	Missing    string                         // neither claim nor template is known
}

// claimRef is what one pod claim resolves to in the snapshot. Snapshot
// objects are never modified in place, so a claimRef with the same
// pointers means the same content: the class cache relies on that.
type claimRef struct {
	none    bool // the controller decided no claim is needed
	claim   *resourceapi.ResourceClaim
	tmpl    *resourceapi.ResourceClaimTemplate
	missing string
	// shared: other pods share the claim's state (used by several of the
	// pods, reserved or allocated already, or made by the controller but
	// not yet in the pod status).
	shared bool
}

// resolve looks up the claims of a pod. sharedClaims holds the "ns/name"
// of claims several of the estimated pods use.
func resolve(snap *snapshot.Snapshot, pod *v1.Pod, sharedClaims map[string]bool) ([]claimRef, error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	refs := make([]claimRef, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		ref := &refs[i]
		// Checked first: resourceclaim.Name reports a claim not made yet
		// with an error, which costs more to build than the check.
		made := !framework.ClaimNotMadeYet(pod, podClaim)
		var name *string
		var err error
		if made {
			name, _, err = resourceclaim.Name(pod, podClaim)
		}
		switch {
		case made && err != nil:
			return nil, fmt.Errorf("pod %s/%s claim %s: %w", pod.Namespace, pod.Name, podClaim.Name, err)
		case made && name == nil:
			ref.none = true
		case made:
			claim, gerr := snap.ResourceClaims().Get(pod.Namespace, *name)
			if gerr != nil {
				ref.missing, ref.shared = *name, true
				continue
			}
			ref.claim = claim
			ref.shared = sharedClaims[pod.Namespace+"/"+*name] || claim.Status.Allocation != nil || len(claim.Status.ReservedFor) > 0
		default:
			t, ok := snap.ResourceClaimTemplate(pod.Namespace, *podClaim.ResourceClaimTemplateName)
			if !ok {
				ref.missing, ref.shared = "template/"+*podClaim.ResourceClaimTemplateName, true
				continue
			}
			ref.tmpl = t
			// A claim the controller made without the pod status showing
			// it yet is the framework's to find, and a PodGroup's claim is
			// one for all its members: such pods are not memoized.
			ref.shared = len(snap.ClaimsOwnedBy(pod.UID)) > 0 || framework.GroupClaimOwner(snap, pod, podClaim) != nil
		}
	}
	return refs, nil
}

// keyOf returns the class key of a pod, whether its class is memoizable
// (with what the profile adds to it), and the device count it asks for
// through claims. The key need not hold the profile's additions: they
// are alike for pods alike in the spec the key holds.
func keyOf(pod *v1.Pod, refs []claimRef, profile *framework.ProfileArgs, inert bool) (key string, memoizable bool, devices int64, err error) {
	s := shape{
		Namespace:        pod.Namespace,
		Overhead:         pod.Spec.Overhead,
		Resources:        pod.Spec.Resources,
		NodeSelector:     pod.Spec.NodeSelector,
		Affinity:         pod.Spec.Affinity,
		Tolerations:      pod.Spec.Tolerations,
		Spread:           pod.Spec.TopologySpreadConstraints,
		NodeName:         pod.Spec.NodeName,
		Volumes:          pod.Spec.Volumes,
		HostNetwork:      pod.Spec.HostNetwork,
		Priority:         pod.Spec.Priority,
		PreemptionPolicy: pod.Spec.PreemptionPolicy,
		SchedulingGroup:  pod.Spec.SchedulingGroup,
		OS:               pod.Spec.OS,
	}
	if inert {
		// Members of any inert group are alike to the filters: the key
		// says "some group" (no name), apart from pods of none.
		s.SchedulingGroup = &v1.PodSchedulingGroup{}
	}
	if owner := metav1.GetControllerOfNoCopy(pod); owner != nil {
		s.Owner = owner.UID
	}
	s.Labels = podLabels(pod.Labels)
	s.Containers = make([]containerShape, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		s.Containers = append(s.Containers, shapeOf(&pod.Spec.Containers[i]))
	}
	if len(pod.Spec.InitContainers) > 0 {
		s.InitContainers = make([]containerShape, 0, len(pod.Spec.InitContainers))
	}
	for i := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, shapeOf(&pod.Spec.InitContainers[i]))
	}
	memoizable = (pod.Spec.SchedulingGroup == nil || inert) && len(spreadOf(pod, profile)) == 0 &&
		(pod.Spec.Affinity == nil || (pod.Spec.Affinity.PodAffinity == nil && pod.Spec.Affinity.PodAntiAffinity == nil))
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil {
			memoizable = false
		}
	}
	s.Claims = make([]claimShape, 0, len(refs))
	for i, ref := range refs {
		cs := claimShape{Name: pod.Spec.ResourceClaims[i].Name, None: ref.none, Missing: ref.missing}
		switch {
		case ref.claim != nil:
			cs.Spec, cs.Allocation = &ref.claim.Spec, ref.claim.Status.Allocation
			devices += deviceCount(&ref.claim.Spec)
			if ref.shared {
				cs.Shared = ref.claim.Name
			}
		case ref.tmpl != nil:
			cs.Template = &ref.tmpl.Spec.Spec
			devices += deviceCount(&ref.tmpl.Spec.Spec)
		}
		memoizable = memoizable && !ref.shared
		s.Claims = append(s.Claims, cs)
	}
	key, err = s.digest()
	if err != nil {
		return "", false, 0, fmt.Errorf("class key of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return key, memoizable, devices, nil
}

// digest hashes the shape as protobuf: its pod fields as a pod, then each
// claim's parts, every part tagged and preceded by its length. The
// encoding is deterministic (map keys sorted) and several times cheaper
// than JSON, which was a tenth of fit-existing at 10,000 pending pods.
func (s *shape) digest() (string, error) {
	d := digesters.Get().(*digester)
	defer d.release()
	d.pod.Namespace, d.pod.Labels = s.Namespace, s.Labels
	d.pod.Spec = v1.PodSpec{Overhead: s.Overhead, Resources: s.Resources, NodeSelector: s.NodeSelector, Affinity: s.Affinity,
		Tolerations: s.Tolerations, TopologySpreadConstraints: s.Spread, NodeName: s.NodeName, Volumes: s.Volumes,
		HostNetwork: s.HostNetwork, Priority: s.Priority, PreemptionPolicy: s.PreemptionPolicy,
		SchedulingGroup: s.SchedulingGroup, OS: s.OS}
	if s.Owner != "" {
		d.owner[0] = metav1.OwnerReference{UID: s.Owner}
		d.pod.OwnerReferences = d.owner[:]
	}
	for _, c := range s.Containers {
		d.containers = append(d.containers, c.container())
	}
	for _, c := range s.InitContainers {
		d.inits = append(d.inits, c.container())
	}
	d.pod.Spec.Containers, d.pod.Spec.InitContainers = d.containers, d.inits
	if err := d.marshal('p', &d.pod); err != nil {
		return "", err
	}
	for _, c := range s.Claims {
		d.part('n', c.Name)
		if c.None {
			d.part('0', "")
		}
		d.part('s', c.Shared)
		d.part('m', c.Missing)
		if c.Template != nil {
			if err := d.marshal('t', c.Template); err != nil {
				return "", err
			}
		}
		if c.Spec != nil {
			if err := d.marshal('c', c.Spec); err != nil {
				return "", err
			}
		}
		if c.Allocation != nil {
			if err := d.marshal('a', c.Allocation); err != nil {
				return "", err
			}
		}
	}
	binary.BigEndian.PutUint64(d.sum[:8], d.h[0].Sum64())
	binary.BigEndian.PutUint64(d.sum[8:], d.h[1].Sum64())
	return hex.EncodeToString(d.sum[:]), nil
}

// digester is digest's scratch: keys are made for every pod the planner
// and scale-down look at, side by side, and the pod digest encodes and the
// buffer it encodes into were most of what a key allocated.
type digester struct {
	pod               v1.Pod
	owner             [1]metav1.OwnerReference
	containers, inits []v1.Container
	buf               []byte
	head              [1 + binary.MaxVarintLen64]byte
	sum               [16]byte
	// h are two hashes of the parts, 128 bits together, seeded per
	// process: keys are compared within the process only, and seeded
	// hashing costs a fraction of FNV's, which was a quarter of a key.
	h [2]maphash.Hash
}

// keySeeds seed the digesters' hashes.
var keySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

var digesters = sync.Pool{New: func() any {
	d := &digester{}
	d.h[0].SetSeed(keySeeds[0])
	d.h[1].SetSeed(keySeeds[1])
	return d
}}

// protoMessage is what digest encodes: a generated API type.
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// marshal hashes m's protobuf encoding as a part tagged tag.
func (d *digester) marshal(tag byte, m protoMessage) error {
	n := m.Size()
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	w, err := m.MarshalToSizedBuffer(b)
	if err != nil {
		return err
	}
	d.write(tag, b[n-w:])
	return nil
}

// part hashes a string part tagged tag.
func (d *digester) part(tag byte, v string) {
	d.head[0] = tag
	head := binary.AppendUvarint(d.head[:1], uint64(len(v)))
	for i := range d.h {
		_, _ = d.h[i].Write(head)
		_, _ = d.h[i].WriteString(v)
	}
}

// write hashes b as a part tagged tag, preceded by its length.
func (d *digester) write(tag byte, b []byte) {
	d.head[0] = tag
	head := binary.AppendUvarint(d.head[:1], uint64(len(b)))
	for i := range d.h {
		_, _ = d.h[i].Write(head)
		_, _ = d.h[i].Write(b)
	}
}

// release drops what the digest referred to and returns d to the pool.
func (d *digester) release() {
	d.pod = v1.Pod{}
	clear(d.containers)
	clear(d.inits)
	d.containers, d.inits = d.containers[:0], d.inits[:0]
	d.owner[0] = metav1.OwnerReference{}
	d.h[0].Reset()
	d.h[1].Reset()
	digesters.Put(d)
}

// podLabels are labels without the perPodLabels: labels itself when it
// has none of them (the key only reads it).
func podLabels(labels map[string]string) map[string]string {
	n := 0
	for k := range perPodLabels {
		if _, ok := labels[k]; ok {
			n++
		}
	}
	if n == 0 {
		return labels
	}
	out := make(map[string]string, len(labels)-n)
	for k, v := range labels {
		if !perPodLabels[k] {
			out[k] = v
		}
	}
	return out
}

func (c containerShape) container() v1.Container {
	return v1.Container{Resources: c.Resources, Ports: c.Ports, RestartPolicy: c.RestartPolicy}
}

func shapeOf(c *v1.Container) containerShape {
	cs := containerShape{Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			cs.Ports = append(cs.Ports, p)
		}
	}
	return cs
}

// deviceCount is the number of devices a claim asks for, the accelerator
// demand first-fit decreasing sorts on. "All" requests and prioritized
// lists count what their first choice asks for (at least one).
func deviceCount(spec *resourceapi.ResourceClaimSpec) int64 {
	var n int64
	for _, r := range spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			n += max(r.Exactly.Count, 1)
		case len(r.FirstAvailable) > 0:
			n += max(r.FirstAvailable[0].Count, 1)
		}
	}
	return n
}

// demand fills the sort keys of a class from one of its pods: devices via
// claims plus extended resources, then CPU (millicores) and memory.
func (c *class) demand(pod *v1.Pod, claimDevices int64) {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	c.accel = claimDevices
	for name, q := range reqs {
		if v1helper.IsExtendedResourceName(name) {
			c.accel += q.Value()
		}
	}
	c.cpu = reqs.Cpu().MilliValue()
	c.mem = reqs.Memory().Value()
}

// usesRequiredAntiAffinity reports pods whose placement can reject other
// pods elsewhere.
func usesRequiredAntiAffinity(pod *v1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// inertGroup reports a gang member whose group no Filter reads: the
// scheduler's per-pod cycle (v1.37.2) reads a pod's PodGroup only in the
// DRA plugin, for the claims the group owns (spec.resourceClaims); the
// gang's all-or-nothing is the pod group cycle's (PlacementFeasible,
// Permit), which estimates do not run. Such a member's verdict on a node
// is that of a pod of its spec outside any group, the same for every
// gang: it may share classes, memo and alike groups. A member whose
// PodGroup is not in the snapshot is not inert (the DRA plugin fails it).
func inertGroup(snap *snapshot.Snapshot, pod *v1.Pod) bool {
	sg := pod.Spec.SchedulingGroup
	if sg == nil || sg.PodGroupName == nil {
		return false
	}
	pg, err := snap.PodGroups().Get(pod.Namespace, *sg.PodGroupName)
	return err == nil && pg != nil && len(pg.Spec.ResourceClaims) == 0
}
