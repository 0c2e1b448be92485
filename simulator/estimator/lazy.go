package estimator

// Virtual nodes.
//
// Most nodes of a large estimate are copies: their content is a memoized
// state, reached by copied placements. Writing each copy into the
// snapshot costs the same as the scheduler's own bookkeeping for a bound
// pod (NodeInfo, claims, allocated devices), and nothing reads it: the
// memo answers every question about such a node. So in a lazy run (every
// Estimate; EstimateAndKeep writes everything, as the snapshot is its
// product) nodes opened by a copied placement stay virtual: a name, a
// state and the list of placements to write. A virtual node is
// materialised, written with all its pending placements in order, when
// the framework must look at it:
//   - as a candidate of a framework call (one node per unknown state);
//   - before any framework call for a pod the memo does not cover: such
//     a pod's verdict may depend on other nodes' pods (inter-pod
//     affinity, topology spread) or on shared state, so it must see the
//     whole estimate.
//
// Virtual content cannot change other verdicts in between: memoized
// classes have no inter-pod rules, and their claims are their own,
// allocated from the virtual node's own pools (captureSlot), which no
// other node's allocation can use.

// materialize writes a virtual node and its pending placements into the
// snapshot.
func (r *run) materialize(n *hnode) error {
	if !n.virtual {
		return nil
	}
	if err := r.addToSnapshot(n); err != nil {
		return err
	}
	n.virtual = false
	for _, c := range n.pending {
		if err := r.writeCopy(c.pi, c.slot, n); err != nil {
			return err
		}
	}
	n.pending = nil
	return nil
}

// materializeAll materialises every virtual node, in opening order.
func (r *run) materializeAll() error {
	for _, n := range r.nodes {
		if err := r.materialize(n); err != nil {
			return err
		}
	}
	return nil
}
