package snapshot

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// MutableLister adapts the snapshot to fwk.MutableSnapshotSharedLister, the
// interface preemption uses to try "what if these pods were gone". A
// mutation session is a Fork; ending it is a Revert.
func (s *Snapshot) MutableLister() fwk.MutableSnapshotSharedLister {
	return &mutableLister{Snapshot: s}
}

type mutableLister struct {
	*Snapshot
	// depth is the fork depth of the open session, 0 when none is open.
	depth int
}

// StartMutations opens a session; only one may be open at a time.
func (m *mutableLister) StartMutations() error {
	if m.depth != 0 {
		return errors.New("start mutations: a mutation session is already open")
	}
	m.Fork()
	m.depth = m.Depth()
	return nil
}

// EndMutations drops every change made in the session.
func (m *mutableLister) EndMutations() error {
	if m.depth == 0 {
		return errors.New("end mutations: no mutation session open")
	}
	if m.Depth() != m.depth {
		return fmt.Errorf("end mutations: fork depth is %d, the session opened %d", m.Depth(), m.depth)
	}
	m.depth = 0
	return m.Revert()
}

// AddPod places a pod inside the session.
func (m *mutableLister) AddPod(podInfo fwk.PodInfo, nodeName string) error {
	if m.depth == 0 {
		return errors.New("add pod: no mutation session open")
	}
	if podInfo == nil {
		return errors.New("add pod: nil pod info")
	}
	return m.Snapshot.AddPod(podInfo.GetPod(), nodeName)
}

// RemovePod removes a pod inside the session.
func (m *mutableLister) RemovePod(_ klog.Logger, pod *v1.Pod, nodeName string) error {
	if m.depth == 0 {
		return errors.New("remove pod: no mutation session open")
	}
	if pod == nil {
		return errors.New("remove pod: nil pod")
	}
	if p, ok := byName(m.placed, pod.Namespace, pod.Name); ok && p.node != nodeName {
		return fmt.Errorf("remove pod %s/%s: on node %s, not %s", pod.Namespace, pod.Name, p.node, nodeName)
	}
	return m.Snapshot.RemovePod(pod.Namespace, pod.Name)
}
