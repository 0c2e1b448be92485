// Package safety is the one gate every destructive action of the
// autoscaler passes before it acts: removing a node for scale-down,
// giving up a node of a failed scale-up, undoing a gang's scale-up, and
// cordoning and evicting the nodes of an ending capacity block. Each
// caller asks the gate about one node at a time; the gate answers from
// facts that survive a restart (the cluster's health as observed in this
// pass, the group's size, the node's own annotations) and from a budget
// per pass, books what it allows, and counts and tells what it refuses.
// docs/design/safety.md explains the rules.
package safety

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// Action is a destructive action a caller asks the gate about.
type Action string

const (
	// ActionScaleDown removes an unneeded node (empty, or drained first).
	ActionScaleDown Action = "scaleDown"
	// ActionGiveUp removes a node or instance of a scale-up that failed.
	ActionGiveUp Action = "giveUp"
	// ActionGangUndo removes a node of a gang scale-up given up as a whole.
	ActionGangUndo Action = "gangUndo"
	// ActionBlockDrain cordons a node of an ending capacity block and
	// evicts its pods.
	ActionBlockDrain Action = "blockDrain"
)

// Rule is why the gate refused.
type Rule string

const (
	// RuleUnhealthy: too many nodes are unready (--max-total-unready-
	// percentage, --ok-total-unready-count); what the autoscaler sees
	// may be an outage, not idleness.
	RuleUnhealthy Rule = "clusterUnhealthy"
	// RuleMinSize: the removal would take the group below its min size.
	RuleMinSize Rule = "minSize"
	// RuleBudget: the pass's removal budget is spent
	// (--max-scale-down-parallelism, --max-empty-bulk-delete).
	RuleBudget Rule = "removalBudget"
	// RuleOnceUsable: the node was usable once (UsableAnnotation); a node
	// that turns unusable later is no failed scale-up, and only
	// scale-down's unready rules may remove it.
	RuleOnceUsable Rule = "onceUsable"
	// RuleNotLeader: this process no longer holds the leader lease (or
	// cannot tell that it does: its last renewal is older than the renew
	// deadline); another replica may be acting.
	RuleNotLeader Rule = "notLeader"
)

// Actions and Rules are every action and rule, for the metric's initial
// series.
var (
	Actions = []Action{ActionScaleDown, ActionGiveUp, ActionGangUndo, ActionBlockDrain}
	Rules   = []Rule{RuleUnhealthy, RuleMinSize, RuleBudget, RuleOnceUsable, RuleNotLeader}
)

// EventRefused is the reason of the event that tells a refusal.
const EventRefused = "DestructiveActionRefused"

// Target is what an action would destroy: a registered node, or an
// instance that never registered (Node nil, Instance its provider id).
type Target struct {
	Group    string
	Node     *corev1.Node
	Instance string
	// Empty: the node holds nothing to move (--max-empty-bulk-delete).
	Empty bool
}

func (t Target) name() string {
	if t.Node != nil {
		return t.Node.Name
	}
	return t.Instance
}

// Refusal is one "no" of the gate.
type Refusal struct {
	Action Action
	Rule   Rule
	Group  string
	// Node names the node (or the instance) the action was refused for.
	Node   string
	Detail string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s of %s refused (%s): %s", r.Action, r.Node, r.Rule, r.Detail)
}

// Options are the per-pass budget; zero means unbounded.
type Options struct {
	// MaxParallel bounds the registered nodes being removed at once,
	// those removed earlier and still under way included
	// (--max-scale-down-parallelism).
	MaxParallel int
	// MaxEmptyBulk bounds the empty nodes removed in one pass
	// (--max-empty-bulk-delete).
	MaxEmptyBulk int
	// Leading tells whether this process still holds the leader lease;
	// nil: no election, it always does.
	Leading func() bool
}

// RefusalCounter counts refusals by action and rule (a Prometheus CounterVec
// fits).
type RefusalCounter interface {
	Inc(action, rule string)
}

// Gate lives for the whole process; Open starts each pass. Safe for
// concurrent use: the scale-down actuator and the loop ask it.
type Gate struct {
	opts     Options
	counter  RefusalCounter
	recorder record.EventRecorder

	mu   sync.Mutex
	pass *ledger
	// told are the refusals already told in an event, by node, action
	// and rule, for as long as the node belongs to a group.
	told map[toldKey]bool
}

type toldKey struct {
	node   string
	action Action
	rule   Rule
}

// New returns a gate. counter and recorder may be nil (no metric, no
// event: explain, unit tests).
func New(opts Options, counter RefusalCounter, recorder record.EventRecorder) *Gate {
	return &Gate{opts: opts, counter: counter, recorder: recorder, told: map[toldKey]bool{}}
}

// OpenInput is what a pass knows when it opens the gate.
type OpenInput struct {
	// Unsafe says why the cluster is too unhealthy to act on ("" if it
	// is healthy).
	Unsafe string
	Groups []*nodegroups.Info
	// InFlight is how many node removals started in earlier passes are
	// still under way.
	InFlight int
	Now      time.Time
}

// ledger is one pass's bookings.
type ledger struct {
	in OpenInput
	// size is each group's size less the removals allowed in this pass;
	// min its min size.
	size, min map[string]int
	removing  int
	empty     int
	refused   []Refusal
}

// Open starts a pass: the refusals and bookings of the last pass are
// dropped, and events already told for nodes that left every group are
// forgotten.
func (g *Gate) Open(in OpenInput) {
	if g == nil {
		return
	}
	l := &ledger{in: in, size: map[string]int{}, min: map[string]int{}, removing: in.InFlight}
	alive := map[string]bool{}
	for _, gr := range in.Groups {
		l.size[gr.Id], l.min[gr.Id] = gr.Size(), gr.Min
		for _, n := range gr.Ready {
			alive[n.Name] = true
		}
		for _, n := range gr.Booting {
			alive[n.Name] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pass = l
	for k := range g.told {
		if !alive[k.node] {
			delete(g.told, k)
		}
	}
}

// Allow asks whether action may destroy t. It returns nil when allowed,
// and books it (the group is one node smaller, the budget one removal
// less); otherwise the refusal, counted and told. Nothing is allowed to a
// process that no longer holds the leader lease. Instances that never
// registered may otherwise always be removed: nothing runs there, and a
// group cannot recover from a stuck launch otherwise. Before the first Open
// only the facts of the node itself are known: the group's size and the
// cluster's health are not, so nothing registered is allowed.
func (g *Gate) Allow(action Action, t Target) *Refusal {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	r := g.judge(action, t)
	if r != nil && g.pass != nil {
		g.pass.refused = append(g.pass.refused, *r)
	}
	tell := r != nil && t.Node != nil && !g.told[toldKey{t.Node.Name, action, r.Rule}]
	if tell {
		g.told[toldKey{t.Node.Name, action, r.Rule}] = true
	}
	g.mu.Unlock()
	if r == nil {
		return nil
	}
	if g.counter != nil {
		g.counter.Inc(string(action), string(r.Rule))
	}
	if tell && g.recorder != nil {
		g.recorder.Event(t.Node, corev1.EventTypeWarning, EventRefused, fmt.Sprintf("%s of node %s refused (%s): %s", action, t.Node.Name, r.Rule, r.Detail))
	}
	return r
}

// judge applies the rules in order, and books an allowed removal. g.mu
// is held.
func (g *Gate) judge(action Action, t Target) *Refusal {
	refuse := func(rule Rule, format string, args ...any) *Refusal {
		return &Refusal{Action: action, Rule: rule, Group: t.Group, Node: t.name(), Detail: fmt.Sprintf(format, args...)}
	}
	if !g.leads() {
		return refuse(RuleNotLeader, "this process no longer holds the leader lease")
	}
	if t.Node == nil {
		return nil
	}
	l := g.pass
	if l == nil {
		return refuse(RuleUnhealthy, "the cluster's health is not known yet")
	}
	if l.in.Unsafe != "" {
		return refuse(RuleUnhealthy, "%s", l.in.Unsafe)
	}
	if action == ActionBlockDrain {
		// The block's end takes the node whatever is done here: only
		// an outage that may explain what is seen holds the drain back.
		return nil
	}
	if action == ActionGiveUp {
		if since, ok := UsableSince(t.Node); ok {
			return refuse(RuleOnceUsable, "the node was usable at %s; only scale-down's unready rules remove it now", since.UTC().Format(time.RFC3339))
		}
	}
	size, known := l.size[t.Group]
	if !known {
		return refuse(RuleMinSize, "node group %s is not among this pass's groups", t.Group)
	}
	if size-1 < l.min[t.Group] {
		return refuse(RuleMinSize, "node group %s would go below its min size %d (size %d)", t.Group, l.min[t.Group], size)
	}
	if max := g.opts.MaxParallel; max > 0 && l.removing >= max {
		return refuse(RuleBudget, "%d node(s) already being removed, --max-scale-down-parallelism=%d", l.removing, max)
	}
	if max := g.opts.MaxEmptyBulk; max > 0 && t.Empty && l.empty >= max {
		return refuse(RuleBudget, "%d empty node(s) already removed in this pass, --max-empty-bulk-delete=%d", l.empty, max)
	}
	l.size[t.Group]--
	l.removing++
	if t.Empty {
		l.empty++
	}
	return nil
}

// Leads tells whether this process still holds the leader lease, for
// the writes that are not destructive but must not be made twice (a
// scale-up).
func (g *Gate) Leads() bool {
	return g == nil || g.leads()
}

func (g *Gate) leads() bool { return g.opts.Leading == nil || g.opts.Leading() }

// Unbook gives back what Allow booked for t, when the removal did not
// happen after all (the node held work, the provider failed).
func (g *Gate) Unbook(t Target) {
	if g == nil || t.Node == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.pass; l != nil {
		l.size[t.Group]++
		l.removing = max(l.removing-1, 0)
		if t.Empty {
			l.empty = max(l.empty-1, 0)
		}
	}
}

// Hold counts an action the pass did not even plan because of rule (the
// whole scale-down of an unhealthy pass): there is no node to tell.
func (g *Gate) Hold(action Action, rule Rule, detail string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.pass != nil {
		g.pass.refused = append(g.pass.refused, Refusal{Action: action, Rule: rule, Detail: detail})
	}
	g.mu.Unlock()
	if g.counter != nil {
		g.counter.Inc(string(action), string(rule))
	}
}

// Refused returns this pass's refusals so far, by node then action, for
// the status.
func (g *Gate) Refused() []Refusal {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pass == nil {
		return nil
	}
	out := append([]Refusal(nil), g.pass.refused...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Action < out[j].Action
	})
	return out
}
