package snapshot

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Gen identifies the state of one node as the scheduler's filters read
// it: equal Gens of a node mean nothing a Filter plugin reads about that
// node changed in between, so a verdict or a measurement made at one Gen
// still holds at the other. Node changes with the node's NodeInfo (its
// object and pods) and with allocations of devices on its own slices;
// Shared changes with whatever may matter to every node (slices not bound
// to a node, allocations of their devices, device classes, taint rules).
//
// Values come from one counter that neither Revert nor Reset rewinds:
// after a revert a node gets back the Gen it had, and a later change gets
// a Gen never seen before, so a Gen never names two states for the life
// of the Snapshot. Reset gives the shared part a new value, so no Gen
// read after a Reset equals one read before it, even of a node that
// nothing touched: a cache kept across passes may key by Gen alone.
type Gen struct{ Node, Shared uint64 }

// NodeGen returns node's Gen. What other nodes hold (inter-pod affinity,
// topology spread, shared claims) is not in it: callers memoising
// verdicts must keep to pods whose verdict only depends on their node.
func (s *Snapshot) NodeGen(node string) Gen {
	return Gen{Node: s.gens[node], Shared: s.gens[""] | s.reads.dropped<<readsShift}
}

// Epoch counts the Resets. What was read of the snapshot at one epoch
// says nothing about another: a cache kept across passes and keyed by
// anything but Gen (node names, pod objects) drops what an earlier epoch
// left in it.
func (s *Snapshot) Epoch() uint64 { return s.epoch }

// touch gives node ("" for the shared part) a new generation.
func (s *Snapshot) touch(node string) {
	s.genSeq++
	put(&s.j, s.gens, node, s.genSeq)
	if s.genLog != nil {
		s.genLog.nodes = append(s.genLog.nodes, node)
	}
}

// allocationNode is the node an allocation is bound to (PinnedNode of its
// selector), "" for anything else.
func allocationNode(alloc *resourceapi.AllocationResult) string {
	return PinnedNode(alloc.NodeSelector)
}

// PinnedNode is the node a selector pins by name: the allocator sets a
// selector on metadata.name alone when every device of an allocation is
// local to one node. "" for any other selector.
func PinnedNode(sel *v1.NodeSelector) string {
	if sel == nil || len(sel.NodeSelectorTerms) != 1 {
		return ""
	}
	t := sel.NodeSelectorTerms[0]
	if len(t.MatchExpressions) != 0 || len(t.MatchFields) != 1 {
		return ""
	}
	f := t.MatchFields[0]
	if f.Key != "metadata.name" || f.Operator != v1.NodeSelectorOpIn || len(f.Values) != 1 {
		return ""
	}
	return f.Values[0]
}

// applyAllocation moves the allocated-device state, the generation of the
// allocation's node and its print (DeviceState).
func (s *Snapshot) applyAllocation(alloc *resourceapi.AllocationResult, sign int) {
	if alloc == nil {
		return
	}
	held := s.alloc.apply(&s.j, alloc, sign, s.gates.consumableCapacity)
	node := allocationNode(alloc)
	s.touch(node)
	put(&s.j, s.prints, node, s.prints[node].apply(held, sign))
}

// GenLog lists the nodes given a new generation while the snapshot logs
// into it ("" for the shared part), for a caller that keeps what it
// learnt of nodes by their order rather than by Gen and must know which
// to forget. A revert, which gives nodes back generations they had, is
// not listed.
type GenLog struct{ nodes []string }

// Take returns the nodes listed since the last Take.
func (l *GenLog) Take() []string {
	out := l.nodes
	l.nodes = nil
	return out
}

// LogGens starts logging into l; nil stops. Reset stops too.
func (s *Snapshot) LogGens(l *GenLog) { s.genLog = l }
