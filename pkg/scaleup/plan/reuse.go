package plan

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
)

// Re-estimating only what a chosen group changed (issue 16).
//
// Each round of Plan estimates every group not used yet over the pods
// left; a round changes the next one's input only by the pods it took and
// the nodes it kept. A group's estimate is carried into the next round,
// instead of run again, when all of these hold:
//   - every pod left is Estimator.Independent (no inter-pod rules, gangs,
//     shared claims or volumes, its own or the scheduler profile's): then
//     the kept nodes can reach its verdicts only through what the next
//     rule checks;
//   - the keep was estimator.KeptLocal: it changed nothing shared (no
//     device of a slice not bound to a node, snapshot.Gen's shared part)
//     and kept no pod with required anti-affinity or a named claim;
//   - the group is a candidate in both rounds, its pods now are a subset of
//     its pods then, and estimator.Carry accepts the pods dropped (all left
//     unplaced before) and the cap now (the same answers up to the
//     estimate's node count; the room may shrink through limits, usage or
//     reservations, and a cap that binds differently is re-estimated);
//   - the estimate was not cut by --max-binpacking-time (Carry again).
//
// Everything else a round derives from an estimate is made from the
// round's own state, as without carrying: the candidate (gate, reserve)
// and so the reasons' room and limit, the option's price and reservation
// share (describe), balancing partners (spread, from this round's
// options). So the options, the expander's choice and the reasons are the
// ones full re-estimation gives; TestCarryIsExact plans with and without.
type carry struct {
	off bool
	// prev holds the estimates of the last round, by group.
	prev map[string]carried
	// last is the last round's pods; removed, those gone since, and
	// gone their set, made when first asked for.
	last, removed []*corev1.Pod
	gone          *estimator.Dropped
	// dependent counts the pods left that are not Independent; while
	// any is left, nothing is carried.
	dependent map[types.UID]bool
	// estimated and carried count estimates run and carried, keepCalls
	// the framework calls the keeps made, for tests.
	estimated, carried, keepCalls int
}

type carried struct {
	res *estimator.Estimate
	// pods is the estimate's input when it was not the round's pods
	// (reservations restrict the group to some).
	pods []*corev1.Pod
}

func newCarry(off bool, pods []*corev1.Pod, independent func(*corev1.Pod) bool) *carry {
	c := &carry{off: off, dependent: map[types.UID]bool{}}
	for _, p := range pods {
		if !independent(p) {
			c.dependent[p.UID] = true
		}
	}
	return c
}

// get returns the carried estimate for group g's candidate, whose pods
// this round are pods (the round's) or own (a subset, nil when all).
func (c *carry) get(est *estimator.Estimator, g estimator.TemplateGroup, pods, own []*corev1.Pod) *estimator.Estimate {
	if c == nil || c.off || len(c.dependent) > 0 {
		return nil
	}
	prev, ok := c.prev[g.Name]
	if !ok {
		return nil
	}
	var dropped *estimator.Dropped
	if prev.pods == nil && own == nil {
		if c.gone == nil {
			c.gone = estimator.DroppedOf(c.removed)
		}
		dropped = c.gone
	} else {
		before := prev.pods
		if before == nil {
			before = c.last
		}
		now := own
		if now == nil {
			now = pods
		}
		less, subset := minus(before, now)
		if !subset {
			return nil
		}
		dropped = estimator.DroppedOf(less)
	}
	res, ok := est.Carry(prev.res, g, dropped)
	if !ok {
		return nil
	}
	c.carried++
	return res
}

// put records this round's estimates (carried or not) for the next; a
// group without one this round has nothing to carry.
func (c *carry) put(pods []*corev1.Pod, cands []candidate, results []*estimator.Estimate) {
	if c == nil {
		return
	}
	c.prev = make(map[string]carried, len(cands))
	for i, cand := range cands {
		c.prev[cand.info.Id] = carried{res: results[i], pods: cand.pods}
	}
	c.last, c.removed, c.gone = pods, nil, nil
}

// estimateOf is the round's estimate of group, carried or made, nil when
// the round did not estimate it.
func (c *carry) estimateOf(group string) *estimator.Estimate {
	if c == nil {
		return nil
	}
	return c.prev[group].res
}

// kept records the round's choice: the pods it took and whether the keep
// left the others' estimates standing.
func (c *carry) kept(took []*corev1.Pod, local bool) {
	if c == nil {
		return
	}
	if !local {
		c.prev = nil
	}
	c.removed, c.gone = append(c.removed, took...), nil
	for _, p := range took {
		delete(c.dependent, p.UID)
	}
}

// count adds n estimates run.
func (c *carry) count(n int) {
	if c != nil {
		c.estimated += n
	}
}

// minus returns the pods of before not in now, and whether now is a
// subset of before.
func minus(before, now []*corev1.Pod) ([]*corev1.Pod, bool) {
	in := make(map[types.UID]bool, len(now))
	for _, p := range now {
		in[p.UID] = true
	}
	var out []*corev1.Pod
	for _, p := range before {
		if in[p.UID] {
			delete(in, p.UID)
		} else {
			out = append(out, p)
		}
	}
	return out, len(in) == 0
}
