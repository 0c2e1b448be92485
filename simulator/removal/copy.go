package removal

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Copies let a pass copy placements between destinations that look alike
// to the filters (the removalCopy shortcut): a GPU cluster's nodes come in
// a few kinds, and the pods moved off a node of one kind fill the next
// node of that kind as they filled the last. The first pod of a class to
// meet a destination in a state is placed by the framework; a later pod
// of the class meeting a destination in a state of the same key, first in
// its order, is placed by a copy of that placement. Verify mode (the
// memo's) places every pod through the framework and compares the copy it
// would have made.
type Copies struct {
	Keys   DestinationKeys
	Copier PlacementCopier
	// Found is told of a copy the framework would not make; Checked of
	// every copy compared (verify mode). Either may be nil.
	Found   func(pod, node, got, want string)
	Checked func()
}

// DestinationKeys tells nodes apart by what the filters read of them
// (estimator.NodeKeys).
type DestinationKeys interface {
	// Keyable reports whether pod's verdict on a node is all in its key.
	Keyable(pod *corev1.Pod) bool
	// Of returns node's key in its present state, "" for a node like no
	// other.
	Of(node string) string
	// Known records node's key in its present state, which a copy made
	// as the state a node of another key was left in after the copied
	// placement: that node's key then.
	Known(node, key string)
}

// PlacementCopier copies placements between nodes with equal keys (the
// estimator).
type PlacementCopier interface {
	CapturePlacement(placed *corev1.Pod, node string) (*estimator.NodePlacement, bool)
	CopyPlacement(pod *corev1.Pod, info fwk.PodInfo, p *estimator.NodePlacement, node string) (bool, error)
}

type keyClass struct{ key, class string }

// keptFit is a placement the framework made for a class on a node of a
// key, at the snapshot's shared generation then, and the node's key
// after it ("" if it had none).
type keptFit struct {
	p      *estimator.NodePlacement
	shared uint64
	after  string
}

// UseCopies lets the pass copy placements between destinations of one
// key (see Copies), with the memo: its classes are the ones copied, and
// its rejections are kept by key too, so a destination in a state known
// to turn a class down is passed like the one that did. Without a memo
// it does nothing.
func (p *Session) UseCopies(c *Copies) {
	if p.memo == nil || c == nil || c.Keys == nil || c.Copier == nil {
		return
	}
	p.copies = c
	p.fits = map[keyClass]keptFit{}
	p.keyable = map[string]bool{}
	p.memo.Rejected = p.rejections()
}

// rejections is an empty memo of rejections, kept by key too with
// copies.
func (p *Session) rejections() *framework.Rejections {
	if p.copies != nil {
		return framework.NewKeyedRejections(p.copies.Keys.Of)
	}
	return framework.NewRejections()
}

// anew forgets every verdict the memo and the copies hold.
func (p *Session) anew() {
	if p.memo != nil {
		p.memo.Rejected = p.rejections()
	}
	clear(p.passed)
	clear(p.fits)
}

// copyTarget is where a pod of a class would go by a copy: node, the
// first destination its class's count leaves, of key and class kc; kept
// is the placement to copy there, nil when none is known.
type copyTarget struct {
	node   string
	kc     keyClass
	shared uint64
	kept   *keptFit
}

// copyAt is the copy target for pod, of class, the destinations before
// start passed; none (node "") without copies or for a pod or node
// without a key.
func (p *Session) copyAt(pod *corev1.Pod, class string, start int) copyTarget {
	if p.copies == nil || start >= len(p.order.nodes) {
		return copyTarget{}
	}
	keyable, ok := p.keyable[class]
	if !ok {
		keyable = p.copies.Keys.Keyable(pod)
		p.keyable[class] = keyable
	}
	if !keyable {
		return copyTarget{}
	}
	node := p.order.nodes[start] // advance stops at a live one
	key := p.copies.Keys.Of(node)
	if key == "" {
		return copyTarget{}
	}
	c := copyTarget{node: node, kc: keyClass{key: key, class: class}, shared: p.runner.Snapshot().NodeGen(node).Shared}
	if v, ok := p.fits[c.kc]; ok && v.shared == c.shared {
		c.kept = &v
	}
	return c
}

// compare is verify mode's look at a copy: the framework, asked, placed
// the pod (pl) where the copy would have, with the same devices.
func (p *Session) compare(pod *corev1.Pod, c copyTarget, pl *framework.ScheduleResult) {
	if p.copies.Checked != nil {
		p.copies.Checked()
	}
	got := "a copy on " + c.node
	want := "placed on " + pl.Node
	if pl.Node == "" {
		want = "fits no destination"
	}
	if pl.Node == c.node {
		np, ok := p.copies.Copier.CapturePlacement(pl.Pod, pl.Node)
		switch {
		case !ok || !np.Same(c.kept.p):
			want += " with other devices"
		case p.copies.Keys.Of(pl.Node) != c.kept.after:
			// The key a copy would have recorded (Known).
			want += ", leaving it of another key"
		default:
			return
		}
	}
	if p.copies.Found != nil {
		p.copies.Found(pod.Namespace+"/"+pod.Name, c.node, got, want)
	}
}

// podInfos are the PodInfos of the pods on cs's nodes, by UID.
func (p *Session) podInfos(cs []Candidate) map[types.UID]fwk.PodInfo {
	if p.copies == nil {
		return nil
	}
	out := map[types.UID]fwk.PodInfo{}
	for _, c := range cs {
		ni, err := p.runner.Snapshot().NodeInfos().Get(c.Node)
		if err != nil {
			continue
		}
		for _, pi := range ni.GetPods() {
			out[pi.GetPod().UID] = pi
		}
	}
	return out
}
