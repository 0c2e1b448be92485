package nominate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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
// each pass, so that it stands when the node becomes usable).
func (n *Nominator) settle(ctx context.Context, v *view, now time.Time) {
	uids := make([]types.UID, 0, len(n.noms))
	for uid := range n.noms {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return key(n.noms[uids[i]].pod) < key(n.noms[uids[j]].pod) })
	for _, uid := range uids {
		nom := n.noms[uid]
		if outcome, why := n.next(ctx, nom, v, now); outcome != "" {
			n.end(ctx, nom, outcome, why)
		}
	}
	for uid, node := range n.declined {
		if pod := v.pods[uid]; pod == nil || pod.Spec.NodeName != "" || v.nodes[node] == nil {
			delete(n.declined, uid)
		}
	}
}

// next moves one nomination on; it returns the outcome when it ended.
func (n *Nominator) next(ctx context.Context, nom *nomination, v *view, now time.Time) (outcome, why string) {
	pod := v.pods[nom.pod.uid]
	switch {
	case pod == nil || pod.DeletionTimestamp != nil:
		return Dropped, "the pod is gone"
	case pod.Spec.NodeName == nom.node:
		return Followed, "bound there"
	case pod.Spec.NodeName != "":
		return Ignored, "bound to " + pod.Spec.NodeName
	case v.nodes[nom.node] == nil:
		// A node that is gone names nothing; ours is cleared all the same.
		n.clear(ctx, pod, nom)
		return Dropped, "the node is gone"
	case pod.Status.NominatedNodeName != "" && pod.Status.NominatedNodeName != nom.node:
		// Not ours (the scheduler's preemption, another component):
		// never touched.
		return Dropped, "nominated for " + pod.Status.NominatedNodeName + " by another component"
	}
	if v.usable[nom.node] && nom.usable.IsZero() {
		nom.usable = now
	}
	switch {
	case !nom.usable.IsZero() && now.Sub(nom.usable) >= n.opts.Timeout:
		n.clear(ctx, pod, nom)
		n.declined[nom.pod.uid] = nom.node
		return Ignored, fmt.Sprintf("not bound within %s of the node being usable", n.opts.Timeout)
	case nom.usable.IsZero() && (v.stale[nom.node] || now.Sub(nom.since) >= n.opts.MaxWait):
		// A node that will not come holds no pod: the pass plans it
		// again elsewhere.
		n.clear(ctx, pod, nom)
		return Dropped, fmt.Sprintf("the node did not become usable within %s", n.opts.MaxWait)
	case pod.Status.NominatedNodeName == nom.node:
		nom.set = true
	default:
		if err := n.patch(ctx, pod, nom.node); err != nil {
			// Conflicts included: next pass looks again.
			logger(ctx).V(2).Info("Could not nominate the pod; trying again next pass", "pod", klog.KObj(pod), "node", nom.node, "err", err)
			return "", ""
		}
		if !nom.set {
			logger(ctx).Info("Nominated the pod for the node the plan placed it on", "pod", klog.KObj(pod), "node", nom.node)
		}
		nom.set = true
	}
	return "", ""
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

// clear removes the pod's nomination if it is still ours.
func (n *Nominator) clear(ctx context.Context, pod *corev1.Pod, nom *nomination) {
	if pod.Status.NominatedNodeName != nom.node {
		return
	}
	if err := n.patch(ctx, pod, ""); err != nil {
		// The scheduler clears it at the pod's next failed try anyway.
		logger(ctx).V(2).Info("Could not clear the pod's nomination", "pod", klog.KObj(pod), "node", nom.node, "err", err)
	}
}

// patch sets (or, with "", clears) the pod's nominated node, on the
// condition that the pod is as this pass saw it: a pod the scheduler or
// anyone else changed since is left for the next pass to look at.
func (n *Nominator) patch(ctx context.Context, pod *corev1.Pod, node string) error {
	var value any
	if node != "" {
		value = node
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"nominatedNodeName": value},
	})
	if err != nil {
		return err
	}
	_, err = n.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}
