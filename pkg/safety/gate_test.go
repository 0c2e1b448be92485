package safety_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

type counts map[string]int

func (c counts) Inc(action, rule string) { c[action+"/"+rule]++ }

// group is a group of size nodes n0..n(size-1) with min size min.
func group(id string, min, size int) *nodegroups.Info {
	g := &nodegroups.Info{Id: id, Min: min, Target: size}
	for i := range size {
		g.Ready = append(g.Ready, builder.Node(fmt.Sprintf("%s-n%d", id, i)).Obj())
	}
	return g
}

func node(name string) *corev1.Node { return builder.Node(name).Obj() }

// ask is one question to the gate and the rule it must answer with
// ("" allowed).
type ask struct {
	action safety.Action
	target safety.Target
	want   safety.Rule
}

func TestGateRules(t *testing.T) {
	usable := builder.Node("gpu-n1").Annotation(safety.UsableAnnotation, "2026-12-01T00:00:00Z").Obj()
	badTime := builder.Node("gpu-n2").Annotation(safety.UsableAnnotation, "yesterday").Obj()
	cases := []struct {
		name string
		opts safety.Options
		in   safety.OpenInput
		asks []ask
	}{{
		name: "unhealthy: nothing registered goes, instances that never registered do",
		in:   safety.OpenInput{Unsafe: "6 of 8 nodes unready", Groups: []*nodegroups.Info{group("gpu", 0, 4)}},
		asks: []ask{
			{safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("gpu-n0"), Empty: true}, safety.RuleUnhealthy},
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Node: node("gpu-n0")}, safety.RuleUnhealthy},
			{safety.ActionGangUndo, safety.Target{Group: "gpu", Node: node("gpu-n0")}, safety.RuleUnhealthy},
			{safety.ActionBlockDrain, safety.Target{Group: "gpu", Node: node("gpu-n0")}, safety.RuleUnhealthy},
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Instance: "fake://gpu/i9"}, ""},
		},
	}, {
		name: "min size: removals are booked, the one that would go below min is refused",
		in:   safety.OpenInput{Groups: []*nodegroups.Info{group("gpu", 2, 4)}},
		asks: []ask{
			{safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("gpu-n0")}, ""},
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Node: node("gpu-n1")}, ""},
			{safety.ActionGangUndo, safety.Target{Group: "gpu", Node: node("gpu-n2")}, safety.RuleMinSize},
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Instance: "fake://gpu/never"}, ""},
			{safety.ActionScaleDown, safety.Target{Group: "other", Node: node("x")}, safety.RuleMinSize},
		},
	}, {
		name: "budget: in-flight removals count, empty nodes have a bulk bound of their own",
		opts: safety.Options{MaxParallel: 3, MaxEmptyBulk: 1},
		in:   safety.OpenInput{Groups: []*nodegroups.Info{group("gpu", 0, 10)}, InFlight: 1},
		asks: []ask{
			{safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("gpu-n0"), Empty: true}, ""},
			{safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("gpu-n1"), Empty: true}, safety.RuleBudget},
			{safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("gpu-n2")}, ""},
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Node: node("gpu-n3")}, safety.RuleBudget},
		},
	}, {
		name: "once usable: no give-up, but scale-down and a gang's own undo may remove it",
		in:   safety.OpenInput{Groups: []*nodegroups.Info{group("gpu", 0, 4)}},
		asks: []ask{
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Node: usable}, safety.RuleOnceUsable},
			{safety.ActionGiveUp, safety.Target{Group: "gpu", Node: badTime}, safety.RuleOnceUsable},
			{safety.ActionGangUndo, safety.Target{Group: "gpu", Node: usable}, ""},
			{safety.ActionScaleDown, safety.Target{Group: "gpu", Node: badTime}, ""},
		},
	}, {
		name: "a block drain is held back by health only",
		opts: safety.Options{MaxParallel: 1},
		in:   safety.OpenInput{Groups: []*nodegroups.Info{group("gpu", 4, 4)}, InFlight: 5},
		asks: []ask{
			{safety.ActionBlockDrain, safety.Target{Group: "gpu", Node: node("gpu-n0")}, ""},
			{safety.ActionBlockDrain, safety.Target{Group: "gpu", Node: node("gpu-n1")}, ""},
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := safety.New(c.opts, nil, nil)
			c.in.Now = t0
			g.Open(c.in)
			for i, a := range c.asks {
				var got safety.Rule
				if r := g.Allow(a.action, a.target); r != nil {
					got = r.Rule
				}
				if got != a.want {
					t.Errorf("ask %d (%s of %s %s): rule %q, want %q", i, a.action, a.target.Group, nameOf(a.target), got, a.want)
				}
			}
		})
	}
}

func nameOf(t safety.Target) string {
	if t.Node != nil {
		return t.Node.Name
	}
	return t.Instance
}

// Before a pass has opened the gate nothing is known about health or
// sizes: only instances that never registered may go.
func TestGateClosedUntilOpened(t *testing.T) {
	g := safety.New(safety.Options{}, nil, nil)
	if r := g.Allow(safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("n")}); r == nil || r.Rule != safety.RuleUnhealthy {
		t.Errorf("registered node before Open: %v, want a refusal", r)
	}
	if r := g.Allow(safety.ActionGiveUp, safety.Target{Group: "gpu", Instance: "fake://i"}); r != nil {
		t.Errorf("unregistered instance before Open: %v, want allowed", r)
	}
}

// A process that no longer holds the leader lease destroys nothing, not
// even instances that never registered: another replica may be acting.
func TestGateRefusesWithoutTheLease(t *testing.T) {
	leading := true
	g := safety.New(safety.Options{Leading: func() bool { return leading }}, nil, nil)
	g.Open(safety.OpenInput{Groups: []*nodegroups.Info{group("gpu", 0, 3)}, Now: t0})
	if r := g.Allow(safety.ActionScaleDown, safety.Target{Group: "gpu", Node: node("gpu-n0")}); r != nil || !g.Leads() {
		t.Fatalf("while leading: %v, leads %v", r, g.Leads())
	}
	leading = false
	for _, target := range []safety.Target{{Group: "gpu", Node: node("gpu-n1")}, {Group: "gpu", Instance: "fake://i"}} {
		if r := g.Allow(safety.ActionGiveUp, target); r == nil || r.Rule != safety.RuleNotLeader {
			t.Errorf("%s after the lease was lost: %v, want notLeader", nameOf(target), r)
		}
	}
	if g.Leads() {
		t.Error("Leads() true after the lease was lost")
	}
}

// Unbook gives a removal that did not happen back to the group and the
// budget.
func TestGateUnbook(t *testing.T) {
	g := safety.New(safety.Options{MaxParallel: 1}, nil, nil)
	g.Open(safety.OpenInput{Groups: []*nodegroups.Info{group("gpu", 1, 2)}, Now: t0})
	first := safety.Target{Group: "gpu", Node: node("gpu-n0")}
	if r := g.Allow(safety.ActionGiveUp, first); r != nil {
		t.Fatal(r)
	}
	second := safety.Target{Group: "gpu", Node: node("gpu-n1")}
	if r := g.Allow(safety.ActionGiveUp, second); r == nil {
		t.Fatal("second removal allowed over min size and budget")
	}
	g.Unbook(first)
	if r := g.Allow(safety.ActionGiveUp, second); r != nil {
		t.Fatalf("after Unbook: %v", r)
	}
}

// Every refusal is counted; each (node, action, rule) is told in one
// event for as long as the node is in a group, and told again once it
// left and came back.
func TestGateCountsAndTellsOnce(t *testing.T) {
	c := counts{}
	rec := record.NewFakeRecorder(10)
	g := safety.New(safety.Options{}, c, rec)
	unsafe := safety.OpenInput{Unsafe: "too many unready", Groups: []*nodegroups.Info{group("gpu", 0, 2)}, Now: t0}
	target := safety.Target{Group: "gpu", Node: node("gpu-n0")}
	for range 3 {
		g.Open(unsafe)
		g.Allow(safety.ActionGiveUp, target)
		g.Allow(safety.ActionBlockDrain, target)
	}
	g.Hold(safety.ActionScaleDown, safety.RuleUnhealthy, "too many unready")
	want := counts{"giveUp/clusterUnhealthy": 3, "blockDrain/clusterUnhealthy": 3, "scaleDown/clusterUnhealthy": 1}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got := drain(rec); len(got) != 2 || !strings.Contains(got[0], "giveUp of node gpu-n0 refused (clusterUnhealthy): too many unready") {
		t.Errorf("events %q, want one per action", got)
	}
	// The node leaves every group, then comes back: told again.
	g.Open(safety.OpenInput{Unsafe: "too many unready", Now: t0})
	g.Open(unsafe)
	g.Allow(safety.ActionGiveUp, target)
	if got := drain(rec); len(got) != 1 {
		t.Errorf("events after the node came back: %q, want one", got)
	}
	if got := g.Refused(); len(got) != 1 || got[0].Node != "gpu-n0" || got[0].Rule != safety.RuleUnhealthy {
		t.Errorf("Refused() = %+v", got)
	}
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The metric starts with a series for every action and rule, so alerts on
// its rate work before the first refusal.
func TestMetricSeries(t *testing.T) {
	m := metrics.New()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "cluster_autoscaler_destructive_actions_refused_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["action"]+"/"+l["rule"]] = true
		}
	}
	want := map[string]bool{}
	for _, a := range safety.Actions {
		for _, r := range safety.Rules {
			want[string(a)+"/"+string(r)] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
}
