package provreq_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	provlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func templateLister(templates ...*corev1.PodTemplate) corelisters.PodTemplateLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, t := range templates {
		_ = idx.Add(t)
	}
	return corelisters.NewPodTemplateLister(idx)
}

// podSets is n podSets of count pods each, all of template ppt.
func podSets(n int, count int32) []v1.PodSet {
	out := make([]v1.PodSet, n)
	for i := range out {
		out[i] = podSet("ppt", count)
	}
	return out
}

// The cap is checked on the request's total, before any template is read
// or pod built: the CRD's worst case (32 podSets of 2^31-1) is refused
// with a handful of allocations, whatever the templates say.
func TestPodsForCap(t *testing.T) {
	tests := []struct {
		name     string
		podSets  []v1.PodSet
		max      int
		wantPods int
		wantErr  int64 // the request's pods named by the error; 0: no error
	}{
		{"at the cap", podSets(3, 2), 6, 6, 0},
		{"one above the cap", podSets(3, 2), 5, 0, 6},
		{"one podSet of 2^31-1", podSets(1, math.MaxInt32), 5000, 0, math.MaxInt32},
		{"32 podSets of 2^31-1", podSets(32, math.MaxInt32), 5000, 0, 32 * math.MaxInt32},
		{"32 podSets of 2^31-1, the largest cap", podSets(32, math.MaxInt32), math.MaxInt32, 0, 32 * math.MaxInt32},
		{"a negative count counts as none", []v1.PodSet{podSet("ppt", -5), podSet("ppt", 1)}, 1, 1, 0},
		{"a missing template after the cap", []v1.PodSet{podSet("gone", 10)}, 5, 0, 10},
	}
	templates := templateLister(podTemplate("ppt", "1"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := request("big", v1.ProvisioningClassCheckCapacity, now, tc.podSets...)
			pods, err := provreq.PodsFor(pr, templates, tc.max)
			var tooMany *provreq.TooManyPodsError
			switch {
			case tc.wantErr == 0 && err != nil:
				t.Fatalf("error %v, want %d pods", err, tc.wantPods)
			case tc.wantErr == 0:
				if len(pods) != tc.wantPods {
					t.Fatalf("%d pods, want %d", len(pods), tc.wantPods)
				}
				return
			case !errors.As(err, &tooMany):
				t.Fatalf("error %v, want a TooManyPodsError", err)
			}
			if tooMany.Pods != tc.wantErr || tooMany.Max != int64(tc.max) || pods != nil {
				t.Errorf("error for %d of max %d with %d pods, want %d of max %d and none", tooMany.Pods, tooMany.Max, len(pods), tc.wantErr, tc.max)
			}
			if !strings.Contains(err.Error(), "--max-pods-per-provisioning-request") {
				t.Errorf("error %q does not name the flag", err)
			}
			allocs := testing.AllocsPerRun(10, func() { _, _ = provreq.PodsFor(pr, templates, tc.max) })
			if allocs > 4 {
				t.Errorf("refusing the request allocated %v times; nothing but the error should be", allocs)
			}
		})
	}
}

// The pods of a podSet share one spec, never the lister's template, and
// the simulation leaves it as it was: check-capacity places some on
// existing GPU nodes (simulated template claims, reservation, binding),
// a gang plan places the rest on new nodes of a GPU group. If anything in
// the simulation wrote a pod's spec, the others would see it.
func TestPodsShareTheirSpecUnchanged(t *testing.T) {
	const driver, class = "gpu.example.com", "gpu"
	slice := func(node string) *resourceapi.ResourceSlice {
		return builder.ResourceSlice(node+"-gpus", node, driver, node).Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	}
	pod := builder.Pod(ns, "x").CPU("1").ClaimFromTemplate("gpu", "one-gpu").Obj()
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	tmpl := &corev1.PodTemplate{Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
	tmpl.Namespace, tmpl.Name = ns, "ppt"
	pristine := tmpl.DeepCopy()

	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, runner.Snapshot(), builder.DeviceClass(class).Driver(driver).Obj(),
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", class)).Obj(),
		builder.Node("g1").CPU("16").Memory("64Gi").Obj(), slice("g1"))

	pr := request("train", v1.ProvisioningClassBestEffortAtomicScaleUp, now, podSet("ppt", 6))
	pods, err := provreq.PodsFor(pr, templateLister(tmpl), 100)
	if err != nil {
		t.Fatal(err)
	}
	if &pods[0].Spec.Containers[0] != &pods[5].Spec.Containers[0] || &pods[0].Spec.Containers[0] == &tmpl.Template.Spec.Containers[0] {
		t.Fatal("the pods do not share one copy of the template's spec")
	}
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name+"/"+string(p.UID)] = true
	}
	if len(names) != len(pods) {
		t.Fatalf("names and UIDs not distinct: %v", names)
	}
	for _, p := range pods[:2] {
		if pl, err := runner.SchedulePod(ctx, p, []string{"g1"}); err != nil || pl.Node != "g1" {
			t.Fatalf("pod %s: placed on %q (%v), want g1", p.Name, pl.Node, err)
		}
	}
	node := builder.Node(template.PlaceholderNodeName).CPU("16").Memory("64Gi").Obj()
	group := &nodegroups.Info{Group: fakeprovider.NewGroup("gpu", 0, 10), Id: "gpu", Max: 10, TemplateSource: "provider",
		Template: &cloudprovider.NodeTemplate{Node: node, ResourceSlices: []*resourceapi.ResourceSlice{slice(template.PlaceholderNodeName)}}}
	planner := plan.New(plan.Options{MaxNodesPerScaleUp: 1000, ScaleUpFromZero: true}, estimator.New(runner, estimator.Options{}),
		expander.Chain{leastwaste.New()}, limits.New(config.Default(), nil), backoff.New(5*time.Minute, 30*time.Minute, 3*time.Hour), nil)
	g := &gang.Gang{Namespace: ns, Name: "train", MinCount: 4, Pending: pods[2:]}
	outs, _, err := planner.PlanGangs(ctx, runner, []*gang.Gang{g}, []string{"g1"}, []*nodegroups.Info{group}, limits.Usage{}, now)
	if err != nil || len(outs) != 1 || len(outs[0].ScaleUps) != 1 || outs[0].ScaleUps[0].Delta != 2 {
		t.Fatalf("gang plan %+v (%v), want gpu +2", outs, err)
	}
	for _, p := range pods {
		if !equality.Semantic.DeepEqual(p.Spec, pristine.Template.Spec) {
			t.Fatalf("pod %s's spec changed in the simulation:\n%s", p.Name, cmp.Diff(pristine.Template.Spec, p.Spec))
		}
	}
	if diff := cmp.Diff(pristine, tmpl); diff != "" {
		t.Errorf("the lister's template changed (-before +after):\n%s", diff)
	}
}

// A request above --max-pods-per-provisioning-request is Failed with the
// cap in its condition and a Warning event, in the same pass as a
// normal request is served; the next pass leaves it alone.
func TestTooManyPodsFails(t *testing.T) {
	huge := request("huge-check-1", v1.ProvisioningClassCheckCapacity, now, podSets(32, math.MaxInt32)...)
	small := request("small-check-1", v1.ProvisioningClassCheckCapacity, now, podSet("ppt", 2))
	e := newEnvWith(t, provreq.Options{BookingDuration: 10 * time.Minute, MaxPods: 1000}, nil,
		[]*v1.ProvisioningRequest{huge, small}, []*corev1.PodTemplate{podTemplate("ppt", "1")}, cpuNode("n1", "4"))
	// A pass of its own: the next one starts from the same cluster.
	e.runner.Snapshot().Fork()
	e.run()
	if err := e.runner.Snapshot().Revert(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Accepted=True/Accepted", "Failed=True/TooManyPods"}, e.conditions(t, huge.Name)); diff != "" {
		t.Errorf("huge (-want +got):\n%s", diff)
	}
	want := fmt.Sprintf("asks for %d pods, more than the 1000", int64(32*math.MaxInt32))
	if msg := e.message(t, huge.Name, v1.Failed); !strings.Contains(msg, want) || !strings.Contains(msg, "--max-pods-per-provisioning-request") {
		t.Errorf("Failed message %q lacks %q and the flag", msg, want)
	}
	if diff := cmp.Diff([]string{"Accepted=True/Accepted", "Provisioned=True/CapacityIsFound"}, e.conditions(t, small.Name)); diff != "" {
		t.Errorf("small (-want +got):\n%s", diff)
	}
	var events []string
	for len(e.recorder.Events) > 0 {
		events = append(events, <-e.recorder.Events)
	}
	found := false
	for _, ev := range events {
		found = found || strings.HasPrefix(ev, "Warning TooManyPods ") && strings.Contains(ev, "1000")
	}
	if !found {
		t.Errorf("events %q: no Warning TooManyPods naming the cap", events)
	}
	// Failed is final: the next pass neither simulates nor tells again.
	e.proc = provreq.NewProcessor(provreq.Options{BookingDuration: 10 * time.Minute, MaxPods: 1000},
		listerOf(e.client.reqs), templateLister(podTemplate("ppt", "1")), e.client, nil, nil, e.recorder)
	e.run()
	if n := len(e.recorder.Events); n != 0 {
		t.Errorf("%d more event(s) for a Failed request", n)
	}
}

// listerOf lists the requests as the API holds them.
func listerOf(reqs map[string]*v1.ProvisioningRequest) provlisters.ProvisioningRequestLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pr := range reqs {
		_ = idx.Add(pr)
	}
	return provlisters.NewProvisioningRequestLister(idx)
}
