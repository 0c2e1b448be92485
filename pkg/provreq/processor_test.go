package provreq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	provlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const ns = "team"

// request is a ProvisioningRequest as Kueue makes it: named after the
// workload and the check, one podSet per PodTemplate "ppt-...".
func request(name, class string, created time.Time, podSets ...v1.PodSet) *v1.ProvisioningRequest {
	return &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: class, PodSets: podSets},
	}
}

func podSet(template string, count int32) v1.PodSet {
	return v1.PodSet{PodTemplateRef: v1.Reference{Name: template}, Count: count}
}

// podTemplate asks cpu CPUs per pod.
func podTemplate(name, cpu string) *corev1.PodTemplate {
	pod := builder.Pod(ns, "x").CPU(cpu).Memory("1Gi").Obj()
	return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: pod.Spec}}
}

func provisionedSince(pr *v1.ProvisioningRequest, at time.Time) *v1.ProvisioningRequest {
	pr.Status.Conditions = []metav1.Condition{{Type: v1.Provisioned, Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsProvisioned,
		LastTransitionTime: metav1.NewTime(at)}}
	return pr
}

// statusStore is the API, as far as the processor writes it.
type statusStore struct {
	reqs map[string]*v1.ProvisioningRequest
}

func (s *statusStore) UpdateStatus(_ context.Context, pr *v1.ProvisioningRequest) error {
	s.reqs[pr.Name] = pr.DeepCopy()
	return nil
}

// env is a processor over a real scheduler framework, planner and
// actuator, a fake API and fake node groups.
type env struct {
	ctx      context.Context
	runner   *framework.Runner
	client   *statusStore
	proc     *provreq.Processor
	recorder *record.FakeRecorder
	groups   []*nodegroups.Info
	nodes    []string
}

func newEnv(t testing.TB, groups []*nodegroups.Info, reqs []*v1.ProvisioningRequest, templates []*corev1.PodTemplate, objs ...any) *env {
	return newEnvWith(t, provreq.Options{BookingDuration: 10 * time.Minute}, groups, reqs, templates, objs...)
}

// newEnvWith is newEnv with the processor's options.
func newEnvWith(t testing.TB, opts provreq.Options, groups []*nodegroups.Info, reqs []*v1.ProvisioningRequest, templates []*corev1.PodTemplate, objs ...any) *env {
	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, runner.Snapshot(), objs...)
	e := &env{ctx: ctx, runner: runner, recorder: record.NewFakeRecorder(100), groups: groups}
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			e.nodes = append(e.nodes, n.Name)
		}
	}
	reqIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	tmplIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	e.client = &statusStore{reqs: map[string]*v1.ProvisioningRequest{}}
	for _, pr := range reqs {
		_ = reqIndex.Add(pr)
		e.client.reqs[pr.Name] = pr.DeepCopy()
	}
	for _, tmpl := range templates {
		_ = tmplIndex.Add(tmpl)
	}
	b := backoff.New(5*time.Minute, 30*time.Minute, 3*time.Hour)
	planner := plan.New(plan.Options{MaxNodesPerScaleUp: 1000, ScaleUpFromZero: true}, estimator.New(runner, estimator.Options{}),
		expander.Chain{leastwaste.New()}, limits.New(config.Default(), nil), b, nil)
	e.proc = provreq.NewProcessor(opts,
		provlisters.NewProvisioningRequestLister(reqIndex), corelisters.NewPodTemplateLister(tmplIndex),
		e.client, planner, act.New(track.New(15*time.Minute, b), b), e.recorder)
	return e
}

func (e *env) run(pods ...*corev1.Pod) []act.LaunchResult {
	usage := limits.Usage{}
	results, _ := e.proc.Run(e.ctx, provreq.ProcessInput{Runner: e.runner, Candidates: e.nodes, Groups: e.groups, Usage: usage, Pods: pods, Now: now})
	return results
}

// conditions renders a stored request's conditions as "Type=Status/Reason".
func (e *env) conditions(t testing.TB, name string) []string {
	t.Helper()
	pr := e.client.reqs[name]
	var out []string
	for _, c := range pr.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return out
}

func (e *env) message(t *testing.T, name, typ string) string {
	t.Helper()
	pr := e.client.reqs[name]
	if c := apimeta.FindStatusCondition(pr.Status.Conditions, typ); c != nil {
		return c.Message
	}
	return ""
}

func cpuNode(name, cpu string) *corev1.Node { return builder.Node(name).CPU(cpu).Memory("64Gi").Obj() }

func cpuGroup(id, cpu string, max int) (*nodegroups.Info, *fakeprovider.FakeNodeGroup) {
	g := fakeprovider.NewGroup(id, 0, max)
	return &nodegroups.Info{Group: g, Id: id, Max: max, TemplateSource: "provider",
		Template: &cloudprovider.NodeTemplate{Node: builder.Node(template.PlaceholderNodeName).CPU(cpu).Memory("64Gi").Label("group", id).Obj()}}, g
}

// check-capacity is answered from what exists: the first request fits
// and books its capacity, so the next one, asking for more than is left,
// does not; nothing is ever scaled up.
func TestCheckCapacity(t *testing.T) {
	g, fake := cpuGroup("cpu", "4", 10)
	first := request("wl-a-check-1", v1.ProvisioningClassCheckCapacity, now.Add(-time.Minute), podSet("ppt-a", 2))
	second := request("wl-b-check-1", v1.ProvisioningClassCheckCapacity, now, podSet("ppt-b", 3))
	e := newEnv(t, []*nodegroups.Info{g}, []*v1.ProvisioningRequest{second, first},
		[]*corev1.PodTemplate{podTemplate("ppt-a", "1"), podTemplate("ppt-b", "1")}, cpuNode("n1", "4"))
	if res := e.run(); len(res) != 0 {
		t.Errorf("check-capacity scaled up: %v", res)
	}
	want := map[string][]string{
		first.Name:  {"Accepted=True/Accepted", "Provisioned=True/CapacityIsFound"},
		second.Name: {"Accepted=True/Accepted", "Provisioned=False/CapacityIsNotFound"},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, e.conditions(t, name)); diff != "" {
			t.Errorf("%s conditions (-want +got):\n%s", name, diff)
		}
	}
	if msg := e.message(t, second.Name, v1.Provisioned); !strings.Contains(msg, "2 of 3 pod(s) fit") {
		t.Errorf("second's message %q does not say how far it got", msg)
	}
	if calls := fake.Calls(); len(calls) != 0 {
		t.Errorf("provider calls %v, want none", calls)
	}
}

// best-effort-atomic: 8 one-CPU pods on 2-CPU nodes are one atomic +4; a
// request that needs more than the group may grow gets nothing at all.
func TestBestEffortAtomic(t *testing.T) {
	tests := []struct {
		name      string
		count     int32
		wantCalls []fakeprovider.Call
		wantConds []string
		wantMsg   string
	}{
		{"fits the group", 8, []fakeprovider.Call{{Method: "AtomicIncreaseSize", Delta: 4}},
			[]string{"Accepted=True/Accepted", "Provisioned=True/CapacityIsProvisioned"}, "cpu +4"},
		{"needs 5 nodes of max 4", 10, nil,
			[]string{"Accepted=True/Accepted", "Provisioned=False/CapacityIsNotFound"}, "minCount 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, fake := cpuGroup("cpu", "2", 4)
			pr := request("train-prov-1", v1.ProvisioningClassBestEffortAtomicScaleUp, now, podSet("ppt-train", tc.count))
			e := newEnv(t, []*nodegroups.Info{g}, []*v1.ProvisioningRequest{pr}, []*corev1.PodTemplate{podTemplate("ppt-train", "1")})
			e.run()
			if diff := cmp.Diff(tc.wantCalls, fake.Calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantConds, e.conditions(t, pr.Name)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if msg := e.message(t, pr.Name, v1.Provisioned); !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("message %q lacks %q", msg, tc.wantMsg)
			}
		})
	}
}

// A request naming a missing PodTemplate waits out the grace, then
// fails with the template's name; the other request is served all along.
func TestMissingPodTemplate(t *testing.T) {
	tests := []struct {
		name    string
		created time.Time
		want    []string
	}{
		{"within the grace", now.Add(-time.Second), []string{"Accepted=True/Accepted"}},
		{"after the grace", now.Add(-time.Minute), []string{"Accepted=True/Accepted", "Failed=True/FailedToCreatePods"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			broken := request("broken-check-1", v1.ProvisioningClassCheckCapacity, tc.created, podSet("ppt-gone", 1))
			good := request("good-check-1", v1.ProvisioningClassCheckCapacity, now, podSet("ppt-good", 1))
			e := newEnv(t, nil, []*v1.ProvisioningRequest{broken, good}, []*corev1.PodTemplate{podTemplate("ppt-good", "1")}, cpuNode("n1", "4"))
			e.run()
			if diff := cmp.Diff(tc.want, e.conditions(t, broken.Name)); diff != "" {
				t.Errorf("broken (-want +got):\n%s", diff)
			}
			if len(tc.want) == 2 && !strings.Contains(e.message(t, broken.Name, v1.Failed), "PodTemplate team/ppt-gone not found") {
				t.Errorf("Failed message %q does not name the template", e.message(t, broken.Name, v1.Failed))
			}
			if diff := cmp.Diff([]string{"Accepted=True/Accepted", "Provisioned=True/CapacityIsFound"}, e.conditions(t, good.Name)); diff != "" {
				t.Errorf("good (-want +got):\n%s", diff)
			}
		})
	}
}

// Booking: a Provisioned request holds its capacity within the window
// (a later request does not get it), not once its pods consumed it, and
// past the window it is BookingExpired.
func TestBooking(t *testing.T) {
	consumer := func(name string, bound bool) *corev1.Pod {
		b := builder.Pod(ns, name).CPU("1")
		if bound {
			b = b.Node("n1")
		}
		p := b.Obj()
		p.Annotations = map[string]string{v1.ProvisioningRequestPodAnnotationKey: "held-check-1"}
		return p
	}
	tests := []struct {
		name       string
		since      time.Time
		consumers  []*corev1.Pod
		wantHeld   []string
		wantLater  []string
		wantEvents int
	}{
		{"within the window", now.Add(-time.Minute), nil,
			[]string{"Provisioned=True/CapacityIsProvisioned", "Accepted=True/Accepted"},
			[]string{"Accepted=True/Accepted", "Provisioned=False/CapacityIsNotFound"}, 1},
		{"consumed", now.Add(-time.Minute), []*corev1.Pod{consumer("c0", true), consumer("c1", true), consumer("c2", true), consumer("c3", true)},
			[]string{"Provisioned=True/CapacityIsProvisioned", "Accepted=True/Accepted"},
			[]string{"Accepted=True/Accepted", "Provisioned=True/CapacityIsFound"}, 1},
		{"past the window", now.Add(-11 * time.Minute), nil,
			[]string{"Provisioned=True/CapacityIsProvisioned", "Accepted=True/Accepted", "BookingExpired=True/CapacityReservationTimeExpired"},
			[]string{"Accepted=True/Accepted", "Provisioned=True/CapacityIsFound"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			held := provisionedSince(request("held-check-1", v1.ProvisioningClassCheckCapacity, now.Add(-time.Hour), podSet("ppt-held", 4)), tc.since)
			later := request("later-check-1", v1.ProvisioningClassCheckCapacity, now, podSet("ppt-later", 4))
			// n1 has 8 CPUs: the consumers (on n1) plus either booking or
			// the later request, never all three.
			objs := []any{cpuNode("n1", "8")}
			for _, c := range tc.consumers {
				objs = append(objs, c)
			}
			e := newEnv(t, nil, []*v1.ProvisioningRequest{later, held},
				[]*corev1.PodTemplate{podTemplate("ppt-held", "1"), podTemplate("ppt-later", "1")}, objs...)
			if len(tc.consumers) == 0 {
				// Without consumers, only 4 CPUs are free for the two.
				snapshottest.Load(t, e.runner.Snapshot(), builder.Pod("other", "busy").CPU("4").Node("n1").Obj())
			}
			e.run(tc.consumers...)
			if diff := cmp.Diff(tc.wantLater, e.conditions(t, later.Name)); diff != "" {
				t.Errorf("later (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHeld, e.conditions(t, held.Name)); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			if n := len(e.recorder.Events); n != tc.wantEvents {
				t.Errorf("%d events, want %d", n, tc.wantEvents)
			}
		})
	}
}

// A request left unprovisioned for a week is Failed as expired.
func TestExpired(t *testing.T) {
	pr := request("old-check-1", v1.ProvisioningClassCheckCapacity, now.Add(-8*24*time.Hour), podSet("ppt-old", 1))
	e := newEnv(t, nil, []*v1.ProvisioningRequest{pr}, []*corev1.PodTemplate{podTemplate("ppt-old", "1")})
	e.run()
	if diff := cmp.Diff([]string{"Accepted=True/Accepted", "Failed=True/Expired"}, e.conditions(t, pr.Name)); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// Requests of other classes belong to another controller: no status.
func TestUnknownClassIgnored(t *testing.T) {
	pr := request("other-1", "queued-provisioning.gke.io", now, podSet("ppt-x", 1))
	e := newEnv(t, nil, []*v1.ProvisioningRequest{pr}, []*corev1.PodTemplate{podTemplate("ppt-x", "1")}, cpuNode("n1", "4"))
	e.run()
	if got := e.conditions(t, pr.Name); len(got) != 0 {
		t.Errorf("conditions %v on another controller's request", got)
	}
}

func TestWithoutConsumers(t *testing.T) {
	annotated := func(name, key string) *corev1.Pod {
		p := builder.Pod(ns, name).Obj()
		p.Annotations = map[string]string{key: "req"}
		return p
	}
	pods := []*corev1.Pod{builder.Pod(ns, "plain").Obj(), annotated("new", v1.ProvisioningRequestPodAnnotationKey),
		annotated("old", provreq.DeprecatedConsumeAnnotation), annotated("class-only", v1.ProvisioningClassPodAnnotationKey)}
	var got []string
	for _, p := range provreq.WithoutConsumers(pods) {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff([]string{"plain", "class-only"}, got); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}

// A failed atomic scale-up provisions nothing: Provisioned=False says so,
// and nothing of the plan stays in the snapshot for later stages.
func TestBestEffortAtomicFailure(t *testing.T) {
	g, fake := cpuGroup("cpu", "2", 4)
	fake.Fail("AtomicIncreaseSize", fmt.Errorf("quota exhausted"))
	pr := request("train-prov-1", v1.ProvisioningClassBestEffortAtomicScaleUp, now, podSet("ppt-train", 8))
	e := newEnv(t, []*nodegroups.Info{g}, []*v1.ProvisioningRequest{pr}, []*corev1.PodTemplate{podTemplate("ppt-train", "1")})
	res := e.run()
	if len(res) != 1 || res[0].Err == nil || res[0].Added != 0 || res[0].Pods != nil {
		t.Fatalf("results %+v, want one failed part with nothing added and no pods", res)
	}
	if diff := cmp.Diff([]string{"Accepted=True/Accepted", "Provisioned=False/CapacityIsNotFound"}, e.conditions(t, pr.Name)); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if msg := e.message(t, pr.Name, v1.Provisioned); !strings.Contains(msg, "quota exhausted") {
		t.Errorf("message %q does not carry the provider's error", msg)
	}
	if nodes, err := e.runner.Snapshot().NodeInfos().List(); err != nil || len(nodes) != 0 {
		t.Errorf("snapshot keeps %d planned node(s) of the failed scale-up (%v)", len(nodes), err)
	}
}

// Booked capacity that is gone (the node was removed) is revoked, on the
// second loop in a row that its pods do not fit.
func TestCapacityRevoked(t *testing.T) {
	held := provisionedSince(request("held-check-1", v1.ProvisioningClassCheckCapacity, now.Add(-time.Hour), podSet("ppt-held", 2)), now.Add(-time.Minute))
	e := newEnv(t, nil, []*v1.ProvisioningRequest{held}, []*corev1.PodTemplate{podTemplate("ppt-held", "1")})
	e.run()
	if got := e.conditions(t, held.Name); len(got) != 2 {
		t.Fatalf("after one miss: %v, want Provisioned and Accepted only", got)
	}
	e.run()
	want := []string{"Provisioned=True/CapacityIsProvisioned", "Accepted=True/Accepted", "CapacityRevoked=True/CapacityIsNotFound"}
	if diff := cmp.Diff(want, e.conditions(t, held.Name)); diff != "" {
		t.Errorf("after two misses (-want +got):\n%s", diff)
	}
}

// Booked capacity is not handed to other pods: after the processor ran,
// a pod that would fit the free node does not.
func TestBookedCapacityIsTaken(t *testing.T) {
	held := provisionedSince(request("held-check-1", v1.ProvisioningClassCheckCapacity, now.Add(-time.Hour), podSet("ppt-held", 4)), now.Add(-time.Minute))
	e := newEnv(t, nil, []*v1.ProvisioningRequest{held}, []*corev1.PodTemplate{podTemplate("ppt-held", "1")}, cpuNode("n1", "4"))
	other := builder.Pod(ns, "other").CPU("1").Obj()
	pl, err := e.runner.SchedulePod(e.ctx, other, e.nodes)
	if err != nil || pl.Node != "n1" {
		t.Fatalf("before booking the pod fits n1: %v, %v", pl, err)
	}
	if err := e.runner.Snapshot().RemovePod(ns, "other"); err != nil {
		t.Fatal(err)
	}
	e.run()
	pl, err = e.runner.SchedulePod(e.ctx, other, e.nodes)
	if err != nil || pl.Node != "" {
		t.Errorf("after booking the pod went to %q (%v), want nowhere", pl.Node, err)
	}
}
