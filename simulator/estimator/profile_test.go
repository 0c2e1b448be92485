package estimator

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework/frameworktest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// poolLabel is qualified: unqualified keys are read whatever the profile.
const poolLabel = "example.com/pool"

// Scheduler profiles whose arguments the shortcuts must see.
var (
	poolProfile  = builder.SchedulerProfile("accel").RequireNodeLabel(poolLabel, "accel")
	namesProfile = builder.SchedulerProfile("accel").AddedAffinity(&v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpNotIn, Values: []string{"plain-template-0"}}}}}}})
	hostnameProfile = builder.SchedulerProfile("accel").AddedAffinity(&v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpNotIn, Values: []string{"plain-template-0"}}}}}}})
	zoneSpreadProfile = builder.SchedulerProfile("accel").HardDefaultSpread(v1.LabelTopologyZone, 1)
)

// profileRunner is a runner of profile whose plugins see cluster (the
// Services that select pods for the default spread).
func profileRunner(t *testing.T, profile *builder.SchedulerProfileBuilder, cluster ...runtime.Object) (*framework.Runner, context.Context) {
	t.Helper()
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))))
	cfg := ""
	if profile != nil {
		var err error
		if cfg, err = builder.SchedulerConfigYAML(profile); err != nil {
			t.Fatal(err)
		}
	}
	return frameworktest.Runner(t, ctx, cfg, cluster...), ctx
}

// webPods are n pods of 1 CPU labelled app=web, which webService selects.
func webPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = builder.Pod(ns, fmt.Sprintf("web-%d", i)).CPU("1").Label("app", "web").OwnedBy("apps/v1", "ReplicaSet", "web").Obj()
	}
	return pods
}

func webService() *v1.Service { return builder.Service(ns, "web", map[string]string{"app": "web"}) }

// Two groups alike but for what the profile's addedAffinity reads (a
// label; a node's name, by field or by the hostname label): each is
// estimated as it would be alone. The plain group comes first, so a
// shared estimate would hand the accel group its "fits nowhere".
func TestProfileAffinityStopsGroupSharing(t *testing.T) {
	tests := []struct {
		name    string
		profile *builder.SchedulerProfileBuilder
		accel   map[string]string // the accel group's extra labels
	}{
		{"a label addedAffinity requires", poolProfile, map[string]string{poolLabel: "accel"}},
		{"a node name addedAffinity excludes by field", namesProfile, nil},
		{"a node name addedAffinity excludes by the hostname label", hostnameProfile, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := profileRunner(t, tc.profile)
			groups := []TemplateGroup{
				{Name: "plain", Template: gpuTemplate(8, map[string]string{"example.com/group": "plain"})},
				{Name: "accel", Template: gpuTemplate(8, withLabel(tc.accel, "example.com/group", "accel"))},
			}
			pods := webPods(4)
			alone, err := New(r, Options{DisableSharing: true}).EstimateGroups(ctx, pods, groups)
			if err != nil {
				t.Fatal(err)
			}
			if len(alone[0].Placements) != 0 || len(alone[1].Placements) != len(pods) {
				t.Fatalf("alone: plain placed %d, accel %d; want 0 and %d (the profile decides)", len(alone[0].Placements), len(alone[1].Placements), len(pods))
			}
			got, err := New(r, Options{}).EstimateGroups(ctx, pods, groups)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range groups {
				if !reflect.DeepEqual(outcomeOf(got[i]), outcomeOf(alone[i])) {
					t.Errorf("group %s: %+v, alone %+v", g.Name, outcomeOf(got[i]), outcomeOf(alone[i]))
				}
			}
		})
	}
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for lk, lv := range labels {
		out[lk] = lv
	}
	return out
}

// Node keys hold the label keys the profile's addedAffinity reads, and
// there are none when it reads node names; a pod the profile spreads is
// not keyable.
func TestProfileNodeKeys(t *testing.T) {
	required := func(reqs ...v1.NodeSelectorRequirement) *v1.NodeAffinity {
		return &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: reqs}}}}
	}
	pool := &framework.ProfileArgs{AddedAffinity: required(v1.NodeSelectorRequirement{Key: poolLabel, Operator: v1.NodeSelectorOpIn, Values: []string{"accel"}})}
	hostname := &framework.ProfileArgs{AddedAffinity: required(v1.NodeSelectorRequirement{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpNotIn, Values: []string{"b"}})}
	fields := &framework.ProfileArgs{AddedAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
		Weight: 1, Preference: v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
	spread := &framework.ProfileArgs{HardDefaultSpread: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule}}}
	plainPod := builder.Pod("ns", "p").CPU("1").Label("app", "web").Obj()
	tests := []struct {
		name    string
		profile *framework.ProfileArgs
		same    bool // a and b (b labelled pool=accel) have one key
		none    bool // no node keys at all
		keyable bool // plainPod
	}{
		{"no profile arguments", nil, true, false, true},
		{"addedAffinity requires the label", pool, false, false, true},
		{"addedAffinity reads the hostname label", hostname, false, true, false},
		{"addedAffinity prefers a node by name", fields, false, true, false},
		{"hard default spread", spread, true, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			snap := snapshot.New(logger)
			a, b := newKeyNode("a"), newKeyNode("b")
			b.node.Labels[poolLabel] = "accel"
			snapshottest.Load(t, snap, append(a.objs(), b.objs()...)...)
			keys, err := NewNodeKeys(snap, tc.profile, []*v1.Pod{plainPod})
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if keys != nil {
					t.Fatalf("node keys %v, want none: the profile reads node names", keys)
				}
				return
			}
			if keys == nil {
				t.Fatal("no node keys")
			}
			if ka, kb := keys.Of("a"), keys.Of("b"); ka == "" || kb == "" || (ka == kb) != tc.same {
				t.Errorf("keys equal: %v, want %v", ka == kb, tc.same)
			}
			if got := keys.Keyable(plainPod); got != tc.keyable {
				t.Errorf("Keyable = %v, want %v", got, tc.keyable)
			}
		})
	}
}

// A profile's hard default spread makes the pods it may apply to as
// non-memoizable as their own spread would: the memoized estimate is the
// one without the memo, and ClassKey keeps them out of class closing.
// Zone a holds a web pod already, so the group's zone b takes only two
// before the skew says no: a memo that copied the first pods' fits onto
// a second node would place all four.
func TestProfileSpreadIsNotMemoized(t *testing.T) {
	for _, profile := range []*builder.SchedulerProfileBuilder{nil, zoneSpreadProfile} {
		t.Run(fmt.Sprintf("hard default spread %v", profile != nil), func(t *testing.T) {
			r, ctx := profileRunner(t, profile, webService())
			snapshottest.Load(t, r.Snapshot(),
				builder.Node("a-0").CPU("1").Label(v1.LabelTopologyZone, "a").Obj(),
				builder.Pod(ns, "web-running").CPU("1").Label("app", "web").Node("a-0").Obj())
			tmpl := gpuTemplate(8, map[string]string{v1.LabelTopologyZone: "b"})
			pods := webPods(4)
			var got [2]outcome
			for i, off := range []bool{false, true} {
				res, err := New(r, Options{DisableMemo: off}).Estimate(ctx, pods, tmpl, "b")
				if err != nil {
					t.Fatal(err)
				}
				got[i] = outcomeOf(res)
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Fatalf("memo on %+v\nmemo off %+v", got[0], got[1])
			}
			want := len(pods)
			if profile != nil {
				want = 2
			}
			if len(got[1].Placed) != want {
				t.Fatalf("placed %d, want %d: the scenario tests nothing", len(got[1].Placed), want)
			}
			e := New(r, Options{})
			if key := e.ClassKey(pods[0]); (key == "") != (profile != nil) || e.Memoizable(pods[0]) == (profile != nil) {
				t.Errorf("ClassKey %q, Memoizable %v: want a class (memoizable) exactly without the profile's spread", key, e.Memoizable(pods[0]))
			}
		})
	}
}

// Carrying B's estimate past a keep in zone a is exact only when no pod
// left is spread across zones; the profile's spread counts. Whenever the
// carry rules (Independent, KeptLocal, Carry) accept, the carried
// estimate is the fresh one.
func TestProfileSpreadIsNotCarried(t *testing.T) {
	for _, profile := range []*builder.SchedulerProfileBuilder{nil, zoneSpreadProfile} {
		t.Run(fmt.Sprintf("hard default spread %v", profile != nil), func(t *testing.T) {
			r, ctx := profileRunner(t, profile, webService())
			// The estimates without shortcuts are the plain answers; e
			// judges and carries.
			plain, e := New(r, Options{DisableMemo: true, DisableSharing: true}), New(r, Options{})
			a := TemplateGroup{Name: "a", Template: gpuTemplate(8, map[string]string{v1.LabelTopologyZone: "a", "example.com/kind": "a"})}
			b := TemplateGroup{Name: "b", Template: gpuTemplate(8, map[string]string{v1.LabelTopologyZone: "b"})}
			only := builder.Pod(ns, "only-a").CPU("3").NodeSelector("example.com/kind", "a").Obj()
			web := webPods(3)
			prev, err := plain.EstimateGroups(ctx, append([]*v1.Pod{only}, web...), []TemplateGroup{b})
			if err != nil {
				t.Fatal(err)
			}
			m := e.Mark()
			kept, err := plain.EstimateAndKeep(ctx, []*v1.Pod{only}, a.Template, a.Name)
			if err != nil || len(kept.Placements) != 1 {
				t.Fatalf("keep: %+v, %v", kept, err)
			}
			fresh, err := plain.EstimateGroups(ctx, web, []TemplateGroup{b})
			if err != nil {
				t.Fatal(err)
			}
			if spread := profile != nil; spread == (len(fresh[0].Placements) == len(prev[0].Placements)) {
				t.Fatalf("B placed %d before the keep, %d after: the scenario tests nothing", len(prev[0].Placements), len(fresh[0].Placements))
			}
			allowed := e.KeptLocal(m, kept, a.Template)
			for _, p := range web {
				allowed = allowed && e.Independent(p)
			}
			if !allowed {
				if profile == nil {
					t.Fatal("nothing is carried without the profile's spread: the rules are too strict to check")
				}
				return
			}
			got, ok := e.Carry(prev[0], b, DroppedOf([]*v1.Pod{only}))
			if !ok {
				t.Fatal("Carry refused")
			}
			if !reflect.DeepEqual(outcomeOf(got), outcomeOf(fresh[0])) {
				t.Fatalf("carried %+v\nestimated again %+v", outcomeOf(got), outcomeOf(fresh[0]))
			}
		})
	}
}

// A pod that hard spread by hostname turns down on a node may fit there
// once the other nodes hold as many of its app: the estimate must not
// close the node to the pod's class (estimateClasses), for the pods' own
// constraints as for the profile's defaults. Two api pods of 6 CPUs take
// two nodes of 10; the four web pods of 1 CPU spread over both, two a
// node. With the first node closed to web once the skew turned web-1
// away from it, web-3 found no room and the estimate opened a third node
// (the differential test's seed 8040).
func TestHardSpreadReopensNodes(t *testing.T) {
	hostnameSpread := builder.SchedulerProfile("accel").HardDefaultSpread(v1.LabelHostname, 1)
	own := func(pods []*v1.Pod) []*v1.Pod {
		for _, p := range pods {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname,
				WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}
		}
		return pods
	}
	tests := []struct {
		name    string
		profile *builder.SchedulerProfileBuilder
		spread  func([]*v1.Pod) []*v1.Pod
	}{
		{"the profile's default spread", hostnameSpread, func(p []*v1.Pod) []*v1.Pod { return p }},
		{"the pods' own spread", nil, own},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := func(i int) *v1.Pod {
				return builder.Pod(ns, fmt.Sprintf("api-%d", i)).CPU("6").Label("app", "api").OwnedBy("apps/v1", "ReplicaSet", "api").Obj()
			}
			r, ctx := profileRunner(t, tc.profile, webService(), builder.Service(ns, "api", map[string]string{"app": "api"}))
			pods := tc.spread(append([]*v1.Pod{api(0), api(1)}, webPods(4)...))
			tmpl := &cloudprovider.NodeTemplate{Node: builder.Node(template.PlaceholderNodeName).CPU("10").Memory("64Gi").Obj()}
			var got [2]outcome
			for i, set := range []*shortcut.Set{nil, shortcut.Plain()} {
				res, err := New(r, Options{Shortcuts: set}).Estimate(ctx, pods, tmpl, "g")
				if err != nil {
					t.Fatal(err)
				}
				got[i] = outcomeOf(res)
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("shortcuts %+v\nplain     %+v", got[0], got[1])
			}
			if len(got[1].Nodes) != 2 || len(got[1].Placed) != 6 {
				t.Fatalf("plain: %+v; want the six pods on two nodes, or the scenario tests nothing", got[1])
			}
		})
	}
}
