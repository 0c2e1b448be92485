package snapshot

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// AddNode adds a node without pods.
func (s *Snapshot) AddNode(node *v1.Node) error {
	if node == nil {
		return fmt.Errorf("add node: nil node")
	}
	if err := validName("node", node.Name); err != nil {
		return fmt.Errorf("add node: %w", err)
	}
	if _, ok := s.nodes[node.Name]; ok {
		return fmt.Errorf("add node %s: already in the snapshot", node.Name)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	s.touch(node.Name)
	put(&s.j, s.nodes, node.Name, ni)
	s.all.add(&s.j, node.Name, ni)
	s.j.own(node.Name)
	return nil
}

// HasNode reports whether a node is in the snapshot.
func (s *Snapshot) HasNode(name string) bool {
	_, ok := s.nodes[name]
	return ok
}

// RemoveNode removes a node, its pods and its node-local ResourceSlices.
func (s *Snapshot) RemoveNode(name string) error {
	ni, ok := s.nodes[name]
	if !ok {
		return fmt.Errorf("remove node %s: not in the snapshot", name)
	}
	for _, pi := range ni.Pods {
		s.unindexPlacedPod(pi.GetPod())
	}
	for sliceName := range s.slicesOfNode[name] {
		if err := s.RemoveResourceSlice(sliceName); err != nil {
			return fmt.Errorf("remove node %s: %w", name, err)
		}
	}
	s.touch(name)
	del(&s.j, s.nodes, name)
	s.all.remove(&s.j, name)
	s.affinity.remove(&s.j, name)
	s.antiAffinity.remove(&s.j, name)
	s.nonHostAnti.remove(&s.j, name)
	return nil
}

// AddPod places pod on the node named nodeName.
func (s *Snapshot) AddPod(pod *v1.Pod, nodeName string) error {
	return s.addPod(pod, nodeName, nil)
}

// AddPodCopy places pod, a copy of src's pod, on the node named nodeName.
func (s *Snapshot) AddPodCopy(pod *v1.Pod, nodeName string, src fwk.PodInfo) error {
	if src == nil || pod == nil || src.GetPod() == nil || src.GetPod().UID != pod.UID {
		return fmt.Errorf("add pod copy: not a copy of the pod info's pod")
	}
	return s.addPod(pod, nodeName, src)
}

// podCopyInfo is the PodInfo of a stored pod that AddPodCopy made from
// src's pod. What NodeInfo and the plugins read from a PodInfo besides the
// pod (affinity terms, resources) depends only on fields the two pods
// share, so src answers for it: computing the resources costs about 10 KB
// of allocations per pod, and an estimate places thousands.
type podCopyInfo struct {
	fwk.PodInfo
	pod *v1.Pod
}

func (p *podCopyInfo) GetPod() *v1.Pod { return p.pod }

func (s *Snapshot) addPod(pod *v1.Pod, nodeName string, src fwk.PodInfo) error {
	if err := checkPod(pod); err != nil {
		return fmt.Errorf("add pod: %w", err)
	}
	key := nsKey(pod.Namespace, pod.Name)
	if p, ok := s.placed[key]; ok {
		return fmt.Errorf("add pod %s: already on node %s", key, p.node)
	}
	ni, err := s.writableNode(nodeName)
	if err != nil {
		return fmt.Errorf("add pod %s: %w", key, err)
	}
	stored := pod
	if pod.Spec.NodeName != nodeName {
		// A shallow copy is enough: only spec.nodeName differs and stored
		// objects are never modified.
		cp := *pod
		cp.Spec.NodeName = nodeName
		stored = &cp
	}
	switch {
	case src == nil:
		ni.AddPod(stored)
	case src.GetPod() == stored:
		ni.AddPodInfo(src)
	default:
		ni.AddPodInfo(&podCopyInfo{PodInfo: src, pod: stored})
	}
	s.syncAffinityLists(nodeName, ni)
	put(&s.j, s.placed, key, placedPod{node: nodeName, pod: stored})
	for pvc := range framework.PodPVCKeys(stored) {
		put(&s.j, s.pvcUsers, pvc, s.pvcUsers[pvc]+1)
	}
	del(&s.j, s.pending, key)
	state := memberAssigned
	if pod.Spec.NodeName == "" {
		state = memberAssumed
	}
	s.setMember(stored, state)
	return nil
}

// RemovePod removes a placed pod from its node.
func (s *Snapshot) RemovePod(namespace, name string) error {
	key := nsKey(namespace, name)
	p, ok := s.placed[key]
	if !ok {
		return fmt.Errorf("remove pod %s: not placed in the snapshot", key)
	}
	ni, err := s.writableNode(p.node)
	if err != nil {
		return fmt.Errorf("remove pod %s: %w", key, err)
	}
	if err := ni.RemovePod(s.logger, p.pod); err != nil {
		return fmt.Errorf("remove pod %s from node %s: %w", key, p.node, err)
	}
	s.syncAffinityLists(p.node, ni)
	s.unindexPlacedPod(p.pod)
	return nil
}

// PlacedPod returns a placed pod as stored.
func (s *Snapshot) PlacedPod(namespace, name string) (*v1.Pod, bool) {
	p, ok := byName(s.placed, namespace, name)
	return p.pod, ok
}

// unindexPlacedPod drops the snapshot-wide indexes of a placed pod; the
// caller takes care of its NodeInfo.
func (s *Snapshot) unindexPlacedPod(pod *v1.Pod) {
	del(&s.j, s.placed, nsKey(pod.Namespace, pod.Name))
	for pvc := range framework.PodPVCKeys(pod) {
		if n := s.pvcUsers[pvc]; n > 1 {
			put(&s.j, s.pvcUsers, pvc, n-1)
		} else {
			del(&s.j, s.pvcUsers, pvc)
		}
	}
	s.removeMember(pod)
}

// AddPendingPod registers an unplaced pod.
func (s *Snapshot) AddPendingPod(pod *v1.Pod) error {
	if err := checkPod(pod); err != nil {
		return fmt.Errorf("add pending pod: %w", err)
	}
	key := nsKey(pod.Namespace, pod.Name)
	if p, ok := s.placed[key]; ok {
		return fmt.Errorf("add pending pod %s: already on node %s", key, p.node)
	}
	put(&s.j, s.pending, key, pod)
	s.setMember(pod, memberUnscheduled)
	return nil
}

// RemovePendingPod forgets a pending pod.
func (s *Snapshot) RemovePendingPod(namespace, name string) error {
	key := nsKey(namespace, name)
	pod, ok := s.pending[key]
	if !ok {
		return fmt.Errorf("remove pending pod %s: not pending in the snapshot", key)
	}
	del(&s.j, s.pending, key)
	s.removeMember(pod)
	return nil
}

// PendingPod returns a registered pending pod.
func (s *Snapshot) PendingPod(namespace, name string) (*v1.Pod, bool) {
	return byName(s.pending, namespace, name)
}

func checkPod(pod *v1.Pod) error {
	switch {
	case pod == nil:
		return fmt.Errorf("nil pod")
	case pod.Name == "":
		return fmt.Errorf("pod without a name")
	case pod.UID == "":
		// The scheduler keys pods in a NodeInfo by UID.
		return fmt.Errorf("pod %s/%s without a UID", pod.Namespace, pod.Name)
	}
	return nil
}

// writableNode returns the NodeInfo of name, cloned first when the current
// fork level did not create it (copy on write, see journal.level.owned).
func (s *Snapshot) writableNode(name string) (*framework.NodeInfo, error) {
	ni, ok := s.nodes[name]
	if !ok {
		return nil, fmt.Errorf("node %s not in the snapshot", name)
	}
	// The caller is about to change it.
	s.touch(name)
	if s.j.mayMutateInPlace(name) {
		return ni, nil
	}
	clone := ni.SnapshotConcrete()
	put(&s.j, s.nodes, name, clone)
	s.all.replace(&s.j, name, clone)
	s.j.own(name)
	return clone, nil
}

// syncAffinityLists keeps the "nodes with affinity pods" lists in step
// with the node's pods.
func (s *Snapshot) syncAffinityLists(name string, ni *framework.NodeInfo) {
	s.affinity.sync(&s.j, name, ni, len(ni.PodsWithAffinity) > 0)
	s.antiAffinity.sync(&s.j, name, ni, len(ni.PodsWithRequiredAntiAffinity) > 0)
	s.nonHostAnti.sync(&s.j, name, ni, len(ni.PodsWithRequiredNonHostScopedAntiAffinity) > 0)
}

// NodeInfos returns the NodeInfoLister (the snapshot itself).
func (s *Snapshot) NodeInfos() fwk.NodeInfoLister { return s }

// StorageInfos returns the StorageInfoLister (the snapshot itself).
func (s *Snapshot) StorageInfos() fwk.StorageInfoLister { return s }

// List returns every NodeInfo in insertion order. The slice is shared.
func (s *Snapshot) List() ([]fwk.NodeInfo, error) { return s.all.items, nil }

// HavePodsWithAffinityList returns the nodes with pods having inter-pod
// (anti-)affinity.
func (s *Snapshot) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return s.affinity.items, nil
}

// HavePodsWithRequiredAntiAffinityList returns the nodes with pods having
// required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.antiAffinity.items, nil
}

// HavePodsWithRequiredNonHostScopedAntiAffinityList returns the nodes with
// pods having required anti-affinity over a topology wider than a host.
func (s *Snapshot) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return s.nonHostAnti.items, nil
}

// Get returns the NodeInfo of a node.
func (s *Snapshot) Get(nodeName string) (fwk.NodeInfo, error) {
	if ni, ok := s.nodes[nodeName]; ok {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", nodeName)
}

// IsPVCUsedByPods reports whether a placed pod uses the PVC "ns/name".
func (s *Snapshot) IsPVCUsedByPods(key string) bool {
	return s.pvcUsers[key] > 0
}
