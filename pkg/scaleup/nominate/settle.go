package nominate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// settle looks at each nomination's pod and node: it counts and forgets
// those that ended, clears ours that timed out, and sets those the pod
// does not carry (the scheduler clears a nomination whenever a try of the
// pod fails, which happens while a planned node boots: it is set again
// each pass, so that it stands when the node becomes usable). Writes stop
// at MaxWrites: clears first, then nominations for added nodes, then the
// rest; what is left waits, unchanged, for the next pass.
func (n *Nominator) settle(ctx context.Context, v *view, now time.Time) {
	n.writes = -1
	if n.opts.MaxWrites > 0 {
		n.writes = n.opts.MaxWrites
	}
	n.now = now
	n.clearOrphans(ctx, v)
	uids := make([]types.UID, 0, len(n.noms))
	for uid := range n.noms {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return key(n.noms[uids[i]].pod) < key(n.noms[uids[j]].pod) })
	var unset []*nomination
	for _, uid := range uids {
		nom := n.noms[uid]
		outcome, why, set := n.next(ctx, nom, v, now)
		if outcome != "" {
			n.end(ctx, nom, outcome, why)
		}
		if set {
			unset = append(unset, nom)
		}
	}
	// Stable: pod order within each kind.
	sort.SliceStable(unset, func(i, j int) bool { return unset[i].added && !unset[j].added })
	for i, nom := range unset {
		if n.writes == 0 {
			logger(ctx).V(1).Info("Nominations left for later passes: the pass's writes are spent", "left", len(unset)-i, "maxWrites", n.opts.MaxWrites)
			break
		}
		n.set(ctx, v.pods[nom.pod.uid], nom)
	}
	for uid, node := range n.declined {
		if pod := v.pods[uid]; pod == nil || pod.Spec.NodeName != "" || v.nodes[node] == nil {
			delete(n.declined, uid)
		}
	}
}

// next moves one nomination on: it returns the outcome when it ended, and
// set when the pod should carry it and does not.
func (n *Nominator) next(ctx context.Context, nom *nomination, v *view, now time.Time) (outcome, why string, set bool) {
	pod := v.pods[nom.pod.uid]
	switch {
	case pod == nil || pod.DeletionTimestamp != nil:
		return Dropped, "the pod is gone", false
	case pod.Spec.NodeName == nom.node:
		return Followed, "bound there", false
	case pod.Spec.NodeName != "":
		return Ignored, "bound to " + pod.Spec.NodeName, false
	case v.nodes[nom.node] == nil:
		// A node that is gone names nothing; ours is cleared all the same.
		if !n.clear(ctx, pod, nom) {
			return "", "", false
		}
		return Dropped, "the node is gone", false
	case pod.Status.NominatedNodeName != "" && pod.Status.NominatedNodeName != nom.node:
		// Not ours (the scheduler's preemption, another component):
		// never touched.
		return Dropped, "nominated for " + pod.Status.NominatedNodeName + " by another component", false
	}
	if v.usable[nom.node] && nom.usable.IsZero() {
		nom.usable = now
	}
	switch {
	case !nom.usable.IsZero() && now.Sub(nom.usable) >= n.opts.Timeout:
		if !n.clear(ctx, pod, nom) {
			return "", "", false
		}
		n.declined[nom.pod.uid] = nom.node
		return Ignored, fmt.Sprintf("not bound within %s of the node being usable", n.opts.Timeout), false
	case nom.usable.IsZero() && (v.stale[nom.node] || now.Sub(nom.since) >= n.opts.MaxWait):
		// A node that will not come holds no pod: the pass plans it
		// again elsewhere.
		if !n.clear(ctx, pod, nom) {
			return "", "", false
		}
		return Dropped, fmt.Sprintf("the node did not become usable within %s", n.opts.MaxWait), false
	case pod.Status.NominatedNodeName == nom.node:
		nom.set = true
		return "", "", false
	}
	return "", "", true
}

// set writes the nomination on the pod.
func (n *Nominator) set(ctx context.Context, pod *corev1.Pod, nom *nomination) {
	if err := n.patch(ctx, pod, nom.node); err != nil {
		// Conflicts included: next pass looks again.
		logger(ctx).V(2).Info("Could not nominate the pod; trying again next pass", "pod", klog.KObj(pod), "node", nom.node, "err", err)
		return
	}
	if !nom.set {
		logger(ctx).Info("Nominated the pod for the node the plan placed it on", "pod", klog.KObj(pod), "node", nom.node)
	}
	nom.set = true
}

// end forgets a nomination and counts it if the pod ever carried it: one
// never set told the scheduler nothing.
func (n *Nominator) end(ctx context.Context, nom *nomination, outcome, why string) {
	delete(n.noms, nom.pod.uid)
	if !nom.set {
		return
	}
	n.outcomes.Inc(outcome)
	logger(ctx).V(2).Info("Nomination ended", "pod", klog.KRef(nom.pod.namespace, nom.pod.name), "node", nom.node, "outcome", outcome, "why", why)
}

// clear removes the pod's nomination if it is still ours. It is false
// when the pass's writes are spent: the nomination stays for the next
// pass to clear.
func (n *Nominator) clear(ctx context.Context, pod *corev1.Pod, nom *nomination) bool {
	if pod.Status.NominatedNodeName != nom.node {
		return true
	}
	if n.writes == 0 {
		return false
	}
	if err := n.patch(ctx, pod, ""); err != nil {
		// The scheduler clears it at the pod's next failed try anyway.
		logger(ctx).V(2).Info("Could not clear the pod's nomination", "pod", klog.KObj(pod), "node", nom.node, "err", err)
	}
	return true
}

// patch sets (or, with "", clears) the pod's nominated node, on the
// condition that the pod is as this pass saw it: a pod the scheduler or
// anyone else changed since is left for the next pass to look at. The
// same write sets the pod's NominatedCondition (True naming the node, or
// False), so that a later process knows which nominations were an
// autoscaler's.
func (n *Nominator) patch(ctx context.Context, pod *corev1.Pod, node string) error {
	if n.writes > 0 {
		n.writes--
	}
	var value any
	cond := map[string]any{"type": NominatedCondition, "status": corev1.ConditionFalse, "reason": "Cleared",
		"message": "the autoscaler cleared its nomination", "lastTransitionTime": metav1.NewTime(n.now)}
	if node != "" {
		value = node
		cond["status"], cond["reason"], cond["message"] = corev1.ConditionTrue, "PlannedNode", nominatedPrefix+node
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"nominatedNodeName": value, "conditions": []any{cond}},
	})
	if err != nil {
		return err
	}
	// Strategic: the conditions merge by type, the others stay.
	_, err = n.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// NominatedCondition is the pod condition an autoscaler's nomination
// carries: True with the message "planned on node <name>" while the
// nomination stands, False once the autoscaler cleared it.
const NominatedCondition = "autoscaling.dra-autoscaler.io/NominatedForPlannedNode"

const nominatedPrefix = "planned on node "

// ourNomination is the node an autoscaler's nomination names, if the pod
// still carries it ("" otherwise): the condition is True and names the
// node the pod is nominated for. A nomination the scheduler replaced
// names another node, and is not ours.
func ourNomination(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if string(c.Type) != NominatedCondition || c.Status != corev1.ConditionTrue {
			continue
		}
		if node, ok := strings.CutPrefix(c.Message, nominatedPrefix); ok && node != "" && node == pod.Status.NominatedNodeName {
			return node
		}
	}
	return ""
}

// clearOrphans clears the nominations an earlier process (the previous
// leader, or this one before a restart) left on pending pods: their plan
// died with that process, and a nomination nobody keeps in step would
// hold room on a node for as long as the scheduler keeps it. The pass
// plans those pods afresh.
func (n *Nominator) clearOrphans(ctx context.Context, v *view) {
	var orphans []*corev1.Pod
	for _, pod := range v.pods {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || n.noms[pod.UID] != nil {
			continue
		}
		if ourNomination(pod) != "" {
			orphans = append(orphans, pod)
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return key(ref(orphans[i])) < key(ref(orphans[j])) })
	for _, pod := range orphans {
		if n.writes == 0 {
			return
		}
		node := pod.Status.NominatedNodeName
		if err := n.patch(ctx, pod, ""); err != nil {
			logger(ctx).V(2).Info("Could not clear a nomination an earlier process left; trying again next pass", "pod", klog.KObj(pod), "node", node, "err", err)
			continue
		}
		logger(ctx).Info("Cleared a nomination an earlier process left: its plan is gone", "pod", klog.KObj(pod), "node", node)
	}
}
