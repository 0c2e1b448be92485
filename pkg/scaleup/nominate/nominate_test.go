package nominate_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/nominate"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const ns = "ns"

// counts is a OutcomeCounter for tests.
type counts map[string]int

func (c counts) Inc(outcome string) { c[outcome]++ }

// step is one pass: what changed in the cluster, what the pass planned,
// and the pods' nominations afterwards.
type step struct {
	at time.Duration
	// ready and booting are the group's registered nodes ("gpu"); other
	// are nodes of no group (Ready).
	ready, booting, other []string
	// stale: the booting nodes are past the provision time.
	stale bool
	// up is a scale-up the pass made: the planned nodes' pods, by name,
	// and the instances the provider named.
	up        [][]string
	instances []string
	added     int
	// placed are pods the pass placed on nodes that exist or are coming.
	placed map[string]string
	// do changes the cluster before the pass looks (binds, deletes, the
	// scheduler's own nominations).
	do func(t *testing.T, c *fake.Clientset)
	// want are the pods' nominated nodes after the pass ("" omitted).
	want map[string]string
}

func TestNominations(t *testing.T) {
	opts := nominate.Options{Timeout: time.Minute, MaxWait: 10 * time.Minute}
	tests := []struct {
		name  string
		pods  []string
		steps []step
		want  counts
		// maxWrites bounds a pass's writes (0: none).
		maxWrites int
	}{
		{
			name: "pods planned on a new node are nominated once it registers and counted as followed when bound there",
			pods: []string{"a", "b", "c"},
			steps: []step{
				{up: [][]string{{"a", "b"}, {"c"}}, instances: []string{"n1", "n2"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1", "b": "n1"}},
				{at: 20 * time.Second, ready: []string{"n1"}, booting: []string{"n2"}, want: map[string]string{"a": "n1", "b": "n1", "c": "n2"}},
				{at: 30 * time.Second, ready: []string{"n1", "n2"}, do: bind(map[string]string{"a": "n1", "b": "n1", "c": "n2"})},
			},
			want: counts{nominate.Followed: 3},
		},
		{
			name: "bound to another node: ignored",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, ready: []string{"n1", "old"}, want: map[string]string{"a": "n1"}},
				{at: 20 * time.Second, ready: []string{"n1", "old"}, do: bind(map[string]string{"a": "old"})},
			},
			want: counts{nominate.Ignored: 1},
		},
		{
			name: "not bound within the timeout of the node being usable: cleared, ignored, not nominated there again",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				// Booting time does not count.
				{at: 5 * time.Minute, ready: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 5*time.Minute + 59*time.Second, ready: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 6 * time.Minute, ready: []string{"n1"}},
				{at: 6*time.Minute + 10*time.Second, ready: []string{"n1"}, placed: map[string]string{"a": "n1"}},
			},
			want: counts{nominate.Ignored: 1},
		},
		{
			name: "the scheduler clearing it while the node boots: set again",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 20 * time.Second, booting: []string{"n1"}, do: nominated("a", ""), want: map[string]string{"a": "n1"}},
				{at: 30 * time.Second, ready: []string{"n1"}, do: bind(map[string]string{"a": "n1"})},
			},
			want: counts{nominate.Followed: 1},
		},
		{
			name: "another component's nomination is left alone",
			pods: []string{"a", "b"},
			steps: []step{
				{up: [][]string{{"a", "b"}}, instances: []string{"n1"}, do: nominated("b", "victim-node"), want: map[string]string{"b": "victim-node"}},
				{at: 10 * time.Second, booting: []string{"n1"}, other: []string{"victim-node"}, want: map[string]string{"a": "n1", "b": "victim-node"}},
				{at: 20 * time.Second, booting: []string{"n1"}, other: []string{"victim-node"}, do: nominated("a", "victim-node"),
					want: map[string]string{"a": "victim-node", "b": "victim-node"}},
				{at: 5 * time.Minute, ready: []string{"n1"}, other: []string{"victim-node"}, want: map[string]string{"a": "victim-node", "b": "victim-node"}},
			},
			// b's was never ours: not counted.
			want: counts{nominate.Dropped: 1},
		},
		{
			name: "pod deleted: dropped",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 20 * time.Second, ready: []string{"n1"}, do: remove("a")},
			},
			want: counts{nominate.Dropped: 1},
		},
		{
			name: "node removed before it was usable: dropped",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 20 * time.Second, do: deleteNode("n1")},
			},
			want: counts{nominate.Dropped: 1},
		},
		{
			name: "node never usable within the provision time: cleared, dropped",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 10*time.Minute + 10*time.Second, booting: []string{"n1"}},
			},
			want: counts{nominate.Dropped: 1},
		},
		{
			name: "node booting past the provision time (stale): cleared, dropped",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 20 * time.Second, booting: []string{"n1"}, stale: true},
			},
			want: counts{nominate.Dropped: 1},
		},
		{
			name: "a node that never comes: nothing nominated",
			pods: []string{"a"},
			steps: []step{
				{up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 11 * time.Minute},
				{at: 12 * time.Minute, booting: []string{"n1"}},
			},
			want: counts{},
		},
		{
			name: "nodes the group had before the scale-up, or the provider did not name, are not the planned ones",
			pods: []string{"a"},
			steps: []step{
				{ready: []string{"old"}, up: [][]string{{"a"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, ready: []string{"old"}, booting: []string{"stranger"}},
				{at: 20 * time.Second, ready: []string{"old"}, booting: []string{"stranger", "n1"}, want: map[string]string{"a": "n1"}},
			},
			want: counts{},
		},
		{
			name: "unnamed instances: the group's nodes new since the scale-up, each to one planned node",
			pods: []string{"a", "b", "c"},
			steps: []step{
				{ready: []string{"old"}, up: [][]string{{"a", "b"}}},
				{at: time.Second, ready: []string{"old"}, up: [][]string{{"c"}}},
				{at: 10 * time.Second, ready: []string{"old"}, booting: []string{"x", "y"}, want: map[string]string{"a": "x", "b": "x", "c": "y"}},
			},
			want: counts{},
		},
		{
			name: "planned nodes go to the instances in the order the provider created them",
			pods: []string{"a", "b"},
			steps: []step{
				{up: [][]string{{"a"}, {"b"}}, instances: []string{"zz", "aa"}},
				{at: 10 * time.Second, booting: []string{"aa", "zz"}, want: map[string]string{"a": "zz", "b": "aa"}},
			},
			want: counts{},
		},
		{
			name: "a partial scale-up: the nodes it got take the first planned",
			pods: []string{"a", "b"},
			steps: []step{
				{up: [][]string{{"a"}, {"b"}}, added: 1},
				{at: 10 * time.Second, booting: []string{"x"}, want: map[string]string{"a": "x"}},
			},
			want: counts{},
		},
		{
			name: "placed on a usable node of a group: nominated; on a booting or coming one, or a node of no group: not",
			pods: []string{"a", "b", "c", "d"},
			steps: []step{
				{ready: []string{"partly-used"}, booting: []string{"booting"}, other: []string{"static"},
					placed: map[string]string{"a": "partly-used", "b": "booting", "c": "gpu-upcoming-0", "d": "static"},
					want:   map[string]string{"a": "partly-used"}},
				{at: 10 * time.Second, ready: []string{"partly-used"}, booting: []string{"booting"}, do: bind(map[string]string{"a": "partly-used"})},
			},
			want: counts{nominate.Followed: 1},
		},
		{
			name:      "a pass writes at most maxWrites: nominations for added nodes first, the others in the next pass",
			pods:      []string{"a", "b", "c", "d"},
			maxWrites: 2,
			steps: []step{
				{ready: []string{"partly-used"}, up: [][]string{{"c", "d"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, ready: []string{"partly-used"}, booting: []string{"n1"}, placed: map[string]string{"a": "partly-used", "b": "partly-used"},
					want: map[string]string{"c": "n1", "d": "n1"}},
				{at: 20 * time.Second, ready: []string{"partly-used"}, booting: []string{"n1"}, placed: map[string]string{"a": "partly-used", "b": "partly-used"},
					want: map[string]string{"a": "partly-used", "b": "partly-used", "c": "n1", "d": "n1"}},
			},
			want: counts{},
		},
		{
			name:      "clears count as writes: those past maxWrites wait for the next pass",
			pods:      []string{"a", "b"},
			maxWrites: 1,
			steps: []step{
				{up: [][]string{{"a", "b"}}, instances: []string{"n1"}},
				{at: 10 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1"}},
				{at: 20 * time.Second, booting: []string{"n1"}, want: map[string]string{"a": "n1", "b": "n1"}},
				{at: 30 * time.Second, booting: []string{"n1"}, stale: true, want: map[string]string{"b": "n1"}},
				{at: 40 * time.Second, booting: []string{"n1"}, stale: true},
			},
			want: counts{nominate.Dropped: 2},
		},
		{
			name: "a restarted autoscaler knows nothing of the old one's nominations and touches none",
			pods: []string{"a"},
			steps: []step{
				{ready: []string{"n1"}, do: nominated("a", "n1"), want: map[string]string{"a": "n1"}},
				{at: time.Hour, ready: []string{"n1"}, want: map[string]string{"a": "n1"}},
			},
			want: counts{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := fake.NewClientset()
			for _, name := range tc.pods {
				create(t, c, builder.Pod(ns, name).CPU("1").Obj())
			}
			got := counts{}
			o := opts
			o.MaxWrites = tc.maxWrites
			n := nominate.New(c, o, got)
			for i, s := range tc.steps {
				if s.do != nil {
					s.do(t, c)
				}
				in := input(t, ctx, c, s)
				n.Step(ctx, in)
				if diff := cmp.Diff(s.want, nominations(t, ctx, c), cmpEmpty); diff != "" {
					t.Errorf("step %d: nominations (-want +got):\n%s", i, diff)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpEmpty); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmpty makes nil and empty maps equal.
var cmpEmpty = cmpopts.EquateEmpty()

// input builds the pass's input: the registered nodes are created in the
// client as the step lists them (and those it does not list deleted by
// do), the pods read back from it.
func input(t *testing.T, ctx context.Context, c *fake.Clientset, s step) nominate.StepInput {
	t.Helper()
	g := &nodegroups.Info{Id: "gpu"}
	ensure := func(name string, ready bool) *corev1.Node {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b := builder.Node(name).CPU("8")
			if !ready {
				b = b.NotReady()
			}
			node = b.Obj()
			node.Spec.ProviderID = name
			if node, err = c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return node
	}
	for _, name := range s.ready {
		g.Ready = append(g.Ready, ensure(name, true))
	}
	for _, name := range s.booting {
		g.Booting = append(g.Booting, ensure(name, false))
		if s.stale {
			if g.Stale == nil {
				g.Stale = map[string]bool{}
			}
			g.Stale[name] = true
		}
	}
	for _, name := range s.other {
		ensure(name, true)
	}
	in := nominate.StepInput{Groups: []*nodegroups.Info{g}, Now: t0.Add(s.at), Placed: map[*corev1.Pod]string{}}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	if s.up != nil {
		r := act.LaunchResult{ScaleUp: act.ScaleUp{Group: g, Delta: len(s.up)}, Added: len(s.up), Instances: s.instances}
		if s.added > 0 {
			r.Added = s.added
		}
		for _, names := range s.up {
			var node []*corev1.Pod
			for _, name := range names {
				node = append(node, byName[name])
			}
			r.Nodes = append(r.Nodes, node)
			r.Pods = append(r.Pods, node...)
		}
		in.Results = []act.LaunchResult{r}
	}
	for name, node := range s.placed {
		if p := byName[name]; p != nil {
			in.Placed[p] = node
		}
	}
	return in
}

func nominations(t *testing.T, ctx context.Context, c *fake.Clientset) map[string]string {
	t.Helper()
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.NominatedNodeName != "" {
			out[p.Name] = p.Status.NominatedNodeName
		}
	}
	return out
}

func create(t *testing.T, c *fake.Clientset, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// update changes a pod as the scheduler (or a user) would.
func update(t *testing.T, c *fake.Clientset, name string, change func(*corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(pod)
	if _, err := c.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func bind(nodes map[string]string) func(*testing.T, *fake.Clientset) {
	return func(t *testing.T, c *fake.Clientset) {
		for name, node := range nodes {
			update(t, c, name, func(p *corev1.Pod) { p.Spec.NodeName, p.Status.NominatedNodeName = node, "" })
		}
	}
}

func nominated(name, node string) func(*testing.T, *fake.Clientset) {
	return func(t *testing.T, c *fake.Clientset) {
		update(t, c, name, func(p *corev1.Pod) { p.Status.NominatedNodeName = node })
	}
}

func remove(name string) func(*testing.T, *fake.Clientset) {
	return func(t *testing.T, c *fake.Clientset) {
		if err := c.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func deleteNode(name string) func(*testing.T, *fake.Clientset) {
	return func(t *testing.T, c *fake.Clientset) {
		if err := c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// The metric starts every outcome the nominator counts at zero.
func TestMetricKnowsEveryOutcome(t *testing.T) {
	m := metrics.New()
	for _, o := range nominate.Outcomes {
		m.Nominations().Inc(o)
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range families {
			if f.GetName() != "cluster_autoscaler_nomination_outcomes_total" {
				continue
			}
			for _, metric := range f.Metric {
				if metric.GetLabel()[0].GetValue() == o && metric.GetCounter().GetValue() == 1 {
					found = true
				}
			}
			if len(f.Metric) != len(nominate.Outcomes) {
				t.Errorf("%d outcomes in the metric, want %d", len(f.Metric), len(nominate.Outcomes))
			}
		}
		if !found {
			t.Errorf("outcome %s not counted", o)
		}
	}
}

// Nominations carry a pod condition naming their node, so the process
// that comes next (a restart, the next leader) recognises those an earlier
// one left and clears them: their plan died with it. A nomination the
// scheduler made, or one it replaced ours with, is left alone.
func TestNextLeaderClearsOrphanedNominations(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := fake.NewClientset()
	for _, name := range []string{"ours", "schedulers", "replaced"} {
		create(t, c, builder.Pod(ns, name).CPU("1").Obj())
	}
	opts := nominate.Options{Timeout: time.Minute, MaxWait: 10 * time.Minute}
	first := nominate.New(c, opts, counts{})
	s := step{ready: []string{"n1", "n2"}, placed: map[string]string{"ours": "n1", "replaced": "n1"}}
	first.Step(ctx, input(t, ctx, c, s))
	if diff := cmp.Diff(map[string]string{"ours": "n1", "replaced": "n1"}, nominations(t, ctx, c)); diff != "" {
		t.Fatalf("first leader's nominations (-want +got):\n%s", diff)
	}
	nominated("schedulers", "n2")(t, c)
	nominated("replaced", "n2")(t, c) // the scheduler's preemption

	next := nominate.New(c, opts, counts{})
	next.Step(ctx, input(t, ctx, c, step{at: time.Second, ready: []string{"n1", "n2"}}))
	want := map[string]string{"schedulers": "n2", "replaced": "n2"}
	if diff := cmp.Diff(want, nominations(t, ctx, c)); diff != "" {
		t.Errorf("after the next leader's first pass (-want +got):\n%s", diff)
	}
	pod, err := c.CoreV1().Pods(ns).Get(ctx, "ours", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == nominate.NominatedCondition && cond.Status != corev1.ConditionFalse {
			t.Errorf("cleared nomination's condition %+v, want False", cond)
		}
	}
}
