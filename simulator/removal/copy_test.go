package removal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// gpuNodes is a small D1: nodes named node-0… each with one slice of
// devices GPUs and pods pods, each holding a claim made from the
// "one-gpu" template and allocated on the node's GPU of its index. The
// candidates are returned in order, each with its pods.
func gpuNodes(nodes, devices, pods int) ([]any, []Candidate) {
	objs := []any{builder.DeviceClass("gpu").Driver(gpu).Obj(),
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj()}
	var cands []Candidate
	for i := range nodes {
		node := fmt.Sprintf("node-%d", i)
		slice := builder.ResourceSlice(node, node, gpu, node).Pool(1, 1)
		for d := range devices {
			slice.Devices(builder.Device(fmt.Sprintf("gpu-%d", d)))
		}
		objs = append(objs, builder.Node(node).CPU("64").Obj(), slice.Obj())
		c := Candidate{Node: node}
		for k := range pods {
			name := fmt.Sprintf("%s-pod-%d", node, k)
			pod := builder.Pod(ns, name).CPU("1").ClaimFromTemplate("gpu", "one-gpu").ClaimStatus("gpu", name+"-gpu").Node(node).Obj()
			claim := builder.Claim(ns, name+"-gpu").Request(builder.Request("gpu", "gpu")).OwnedByPod(pod, "gpu").
				Allocated(node, builder.AllocatedDevice("gpu", gpu, node, fmt.Sprintf("gpu-%d", k))).ReservedFor(pod).Obj()
			objs = append(objs, pod, claim)
			c.Pods = append(c.Pods, pod)
		}
		cands = append(cands, c)
	}
	return objs, cands
}

// countingCopier counts the copies made.
type countingCopier struct {
	PlacementCopier
	copies int
}

func (c *countingCopier) CopyPlacement(pod *corev1.Pod, info fwk.PodInfo, p *estimator.NodePlacement, node string) (bool, error) {
	ok, err := c.PlacementCopier.CopyPlacement(pod, info, p, node)
	if ok {
		c.copies++
	}
	return ok, err
}

// constKeys says every node is like every other: a deliberately wrong
// key, for verify mode to catch.
type constKeys struct{ DestinationKeys }

func (constKeys) Of(string) string { return "k" }

// estimatorClass is the class scale-down's memo uses: the estimator's,
// for memoizable pods.
func estimatorClass(e *estimator.Estimator) func(*corev1.Pod) string {
	return func(pod *corev1.Pod) string {
		if !e.Memoizable(pod) {
			return ""
		}
		return e.ClassKey(pod)
	}
}

// A pass that copies placements between destinations of one key removes
// the nodes, moves the pods and allocates the devices the framework does
// when asked about every pod, with only the first pod of each class and
// state placed by the framework; verify mode compares every copy it
// would make, and catches a wrong key.
func TestCopiesAreTheFrameworks(t *testing.T) {
	type outcome struct {
		verdicts []string
		claims   string
		pods     string
	}
	run := func(t *testing.T, memo, copies, verify, faulty bool) (outcome, *countingCopier, []string) {
		objs, cands := gpuNodes(8, 6, 2)
		r, ctx := newRunner(t, objs...)
		var maybe []string
		for i := len(cands) - 1; i >= 0; i-- {
			maybe = append(maybe, cands[i].Node)
		}
		pass := Begin(r, nil, maybe)
		defer func() { _ = pass.End() }()
		e := estimator.New(r, estimator.Options{})
		var found []string
		counting := &countingCopier{PlacementCopier: e}
		if memo {
			pass.UseMemo(&framework.Alike{Class: estimatorClass(e), Rejected: framework.NewRejections(), Verify: verify,
				Found: func(pod, node, got, want string) {
					found = append(found, fmt.Sprintf("memo: %s on %s: %s, %s", pod, node, got, want))
				}})
		}
		if copies {
			var pods []*corev1.Pod
			for _, c := range cands {
				pods = append(pods, c.Pods...)
			}
			nk, err := estimator.NewNodeKeys(r.Snapshot(), r.Profile(), pods)
			if err != nil || nk == nil {
				t.Fatalf("no node keys: %v", err)
			}
			var keys DestinationKeys = nk
			if faulty {
				keys = constKeys{nk}
			}
			pass.UseCopies(&Copies{Keys: keys, Copier: counting,
				Found: func(pod, node, got, want string) {
					found = append(found, fmt.Sprintf("copy: %s on %s: %s, %s", pod, node, got, want))
				}})
		}
		var out outcome
		for _, c := range cands {
			res, err := pass.Try(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			moves := make([]string, 0, len(res.Moves))
			for p, n := range res.Moves {
				moves = append(moves, p+"→"+n)
			}
			slices.Sort(moves)
			out.verdicts = append(out.verdicts, fmt.Sprintf("%s removable=%v %v %s", c.Node, res.Removable, moves, res.Reason))
		}
		out.claims = claimsOf(t, r)
		out.pods = podsOf(t, r, &pass.view)
		return out, counting, found
	}
	plain, _, _ := run(t, false, false, false, false)
	if !strings.Contains(strings.Join(plain.verdicts, "\n"), "removable=true") {
		t.Fatalf("no node could go: the case checks nothing\n%s", strings.Join(plain.verdicts, "\n"))
	}
	for _, tc := range []struct {
		name                 string
		memo, copies, verify bool
	}{
		{name: "memo", memo: true},
		{name: "memo and copies", memo: true, copies: true},
		{name: "memo and copies, verify", memo: true, copies: true, verify: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, counting, found := run(t, tc.memo, tc.copies, tc.verify, false)
			if diff := strings.Join(got.verdicts, "\n"); diff != strings.Join(plain.verdicts, "\n") {
				t.Errorf("verdicts differ from the plain framework's:\n%s\nwant\n%s", diff, strings.Join(plain.verdicts, "\n"))
			}
			if got.claims != plain.claims {
				t.Errorf("claims differ from the plain framework's:\n%s\nwant\n%s", got.claims, plain.claims)
			}
			if got.pods != plain.pods {
				t.Errorf("pods differ from the plain framework's:\n%s\nwant\n%s", got.pods, plain.pods)
			}
			if len(found) > 0 {
				t.Errorf("verify mode found differences: %v", found)
			}
			// node-0 to node-4 go, their 10 pods to node-7, node-6 and
			// node-5 in turn (2 of 6 GPUs used, so 4 pods each). node-7
			// meets the class in four states, each new: the framework
			// places its 4 pods. node-6's first pod is the framework's
			// too (node-7, first in order, turned it down); its other 3
			// and node-5's 2 find a state placed before: 5 copies.
			if tc.copies && !tc.verify {
				if counting.copies != 5 {
					t.Errorf("%d copies, want 5", counting.copies)
				}
			} else if counting.copies != 0 {
				t.Errorf("%d copies, want none", counting.copies)
			}
		})
	}
	t.Run("a wrong key, verify", func(t *testing.T) {
		_, _, found := run(t, true, true, true, true)
		// node-7 meets pods in four states under one key: the copy would
		// take the first pod's GPU again.
		if !slices.ContainsFunc(found, func(f string) bool { return strings.HasSuffix(f, "placed on node-7 with other devices") }) {
			t.Errorf("verify mode found no copy with the wrong devices (found %q)", found)
		}
	})
}

// claimsOf prints every claim's allocation and reservations.
func claimsOf(t *testing.T, r *framework.Runner) string {
	t.Helper()
	claims, err := r.Snapshot().ResourceClaims().List()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range claims {
		fmt.Fprintf(&b, "%s:", c.Name)
		if a := c.Status.Allocation; a != nil {
			for _, res := range a.Devices.Results {
				fmt.Fprintf(&b, " %s/%s/%s", res.Driver, res.Pool, res.Device)
			}
			fmt.Fprintf(&b, " on %s", a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values)
		}
		for _, ref := range c.Status.ReservedFor {
			fmt.Fprintf(&b, " for %s", ref.Name)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// podsOf lists the snapshot's pods by node. A pod the snapshot holds
// must be its own: never view, the session's scratch copy of the pod
// being placed, which the next pod overwrites.
func podsOf(t *testing.T, r *framework.Runner, view *corev1.Pod) string {
	t.Helper()
	nodes, err := r.Snapshot().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if pod == view {
				t.Errorf("node %s holds the session's scratch copy of a pod", ni.Node().Name)
			}
			lines = append(lines, fmt.Sprintf("%s on %s (spec %q)", pod.Name, ni.Node().Name, pod.Spec.NodeName))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

var _ context.Context // newRunner's
