package vet

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const driver = "gpu.example.com"

func TestPools(t *testing.T) {
	counters := builder.ResourceSlice("counters", "n1", driver, "p").Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0").Counter("memory", "40Gi"))
	tests := []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		want   []string // one substring per finding, in order
	}{
		{"complete pool", []*resourceapi.ResourceSlice{
			builder.ResourceSlice("a", "n1", driver, "p").Devices(builder.Device("gpu-0")).Obj()}, nil},
		{"fewer slices than resourceSliceCount", []*resourceapi.ResourceSlice{
			builder.ResourceSlice("a", "n1", driver, "p").Pool(1, 2).Devices(builder.Device("gpu-0")).Obj()},
			[]string{`pool "p" of driver gpu.example.com (generation 1): 1 slice(s) published (a), resourceSliceCount says 2`}},
		{"an older generation is not counted", []*resourceapi.ResourceSlice{
			builder.ResourceSlice("old", "n1", driver, "p").Pool(1, 1).Devices(builder.Device("gpu-0")).Obj(),
			builder.ResourceSlice("new", "n1", driver, "p").Pool(2, 1).Devices(builder.Device("gpu-0")).Obj()}, nil},
		{"one device name in two slices", []*resourceapi.ResourceSlice{
			builder.ResourceSlice("a", "n1", driver, "p").Pool(1, 2).Devices(builder.Device("gpu-0")).Obj(),
			builder.ResourceSlice("b", "n1", driver, "p").Pool(1, 2).Devices(builder.Device("gpu-0")).Obj()},
			[]string{`device "gpu-0" is published in slices a and b`}},
		{"counters in their own slice", []*resourceapi.ResourceSlice{counters.Obj(),
			builder.ResourceSlice("devices", "n1", driver, "p").Pool(1, 2).
				Devices(builder.Device("half").ConsumesCounters("gpu-0", map[string]string{"memory": "20Gi"})).Obj()}, nil},
		{"over-consumed counter", []*resourceapi.ResourceSlice{counters.Obj(),
			builder.ResourceSlice("devices", "n1", driver, "p").Pool(1, 2).
				Devices(builder.Device("big").ConsumesCounters("gpu-0", map[string]string{"memory": "80Gi"})).Obj()},
			[]string{`device "big" consumes 80Gi of counter "memory", but counter set "gpu-0" holds 40Gi`}},
		{"missing counter", []*resourceapi.ResourceSlice{counters.Obj(),
			builder.ResourceSlice("devices", "n1", driver, "p").Pool(1, 2).
				Devices(builder.Device("d").ConsumesCounters("gpu-0", map[string]string{"cores": "1"})).Obj()},
			[]string{`device "d" consumes counter "cores", which counter set "gpu-0" does not have`}},
		{"missing counter set", []*resourceapi.ResourceSlice{
			builder.ResourceSlice("a", "n1", driver, "p").Devices(builder.Device("d").ConsumesCounters("nowhere", map[string]string{"memory": "1Gi"})).Obj()},
			[]string{`device "d" consumes counter set "nowhere", which no slice of the pool has`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Pools(tc.slices)
			if len(got) != len(tc.want) {
				t.Fatalf("findings %v, want %d", messages(got), len(tc.want))
			}
			for i, f := range got {
				if !strings.Contains(f.Message, tc.want[i]) || f.Reason != ReasonInvalidResourceSlice {
					t.Errorf("finding %d = %s %q, want %q", i, f.Reason, f.Message, tc.want[i])
				}
			}
		})
	}
}

func TestRunTellsOnceAfterGrace(t *testing.T) {
	var sent []Finding
	v := New(10*time.Second, time.Hour, func(f Finding) { sent = append(sent, f) })
	short := builder.ResourceSlice("short", "n1", driver, "p").Pool(1, 2).Devices(builder.Device("gpu-0")).Obj()
	ghost := builder.ResourceSlice("ghost", "gone", driver, "q").Devices(builder.Device("gpu-0")).Obj()
	pod := builder.Pod("ns", "p").Obj()
	pod.Annotations = map[string]string{reservations.AnnotationExpectedRuntime: "soon"}
	nodes := []*corev1.Node{builder.Node("n1").Obj()}
	slices := []*resourceapi.ResourceSlice{short, ghost}
	t0 := time.Unix(1000, 0)
	state := func(pods []*corev1.Pod, slices []*resourceapi.ResourceSlice) *observe.ClusterState {
		return &observe.ClusterState{Pods: pods, Nodes: nodes, ResourceSlices: slices}
	}

	v.Run(state([]*corev1.Pod{pod}, slices), t0)
	if len(sent) != 1 || sent[0].Reason != ReasonInvalidAnnotation || !strings.Contains(sent[0].Message, `"soon"`) {
		t.Fatalf("first pass sent %v, want only the pod's annotation (slices wait for the grace)", messages(sent))
	}
	v.Run(state([]*corev1.Pod{pod}, slices), t0.Add(5*time.Second))
	if len(sent) != 1 {
		t.Fatalf("within the grace sent %v", messages(sent[1:]))
	}
	v.Run(state([]*corev1.Pod{pod}, slices), t0.Add(11*time.Second))
	if len(sent) != 3 || !strings.Contains(sent[1].Message+sent[2].Message, `node "gone", which does not exist`) {
		t.Fatalf("after the grace sent %v, want the short pool and the ghost slice", messages(sent[1:]))
	}
	v.Run(state([]*corev1.Pod{pod}, slices), t0.Add(20*time.Second))
	if len(sent) != 3 {
		t.Fatalf("told again: %v", messages(sent[3:]))
	}
	// Fixed, then broken again: news again, after a new grace.
	v.Run(state(nil, nil), t0.Add(30*time.Second))
	v.Run(state([]*corev1.Pod{pod}, slices), t0.Add(31*time.Second))
	if len(sent) != 4 || sent[3].Reason != ReasonInvalidAnnotation {
		t.Fatalf("after a fix and a relapse sent %v", messages(sent[3:]))
	}
}

func messages(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Reason + ": " + f.Message
	}
	return out
}

func TestMissing(t *testing.T) {
	claim := builder.Claim("ns", "c").Obj()
	tmpl := builder.ClaimTemplate("ns", "t").Obj()
	group := builder.PodGroup("ns", "g").MinCount(1).Obj()
	tests := []struct {
		name  string
		pod   *corev1.Pod
		extra *observe.ClusterState
		want  string
	}{
		{"claim exists", builder.Pod("ns", "p").Claim("gpu", "c").Obj(), nil, ""},
		{"claim missing", builder.Pod("ns", "p").Claim("gpu", "nope").Obj(), nil, `pod claim "gpu" names ResourceClaim "nope", which does not exist`},
		{"claim of another namespace", builder.Pod("other", "p").Claim("gpu", "c").Obj(), nil, `ResourceClaim "c"`},
		{"template exists", builder.Pod("ns", "p").ClaimFromTemplate("gpu", "t").Obj(), nil, ""},
		{"template missing", builder.Pod("ns", "p").ClaimFromTemplate("gpu", "nope").Obj(), nil, `ResourceClaimTemplate "nope"`},
		{"template gone after its claim was made", builder.Pod("ns", "p").ClaimFromTemplate("gpu", "nope").ClaimStatus("gpu", "p-gpu").Obj(), nil, ""},
		{"bound pods are the kubelet's", builder.Pod("ns", "p").Claim("gpu", "nope").Node("n1").Obj(), nil, ""},
		{"PodGroup exists", builder.Pod("ns", "p").PodGroup("g").Obj(), nil, ""},
		{"PodGroup missing", builder.Pod("ns", "p").PodGroup("nope").Obj(), nil, `PodGroup "nope" does not exist`},
		{"PodGroups not served", builder.Pod("ns", "p").PodGroup("nope").Obj(), &observe.ClusterState{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := &observe.ClusterState{GangsServed: true, ResourceClaims: []*resourceapi.ResourceClaim{claim},
				ResourceClaimTemplates: []*resourceapi.ResourceClaimTemplate{tmpl}, PodGroups: []*schedulingv1beta1.PodGroup{group}}
			if tc.extra != nil {
				state = tc.extra
			}
			state.Pods = []*corev1.Pod{tc.pod}
			got := messages(missing(state))
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("findings %v, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("findings %v, want one with %q", got, tc.want)
			}
		})
	}
	orphan := builder.PodGroup("ns", "orphan").MinCount(1).Workload("nope", "t").Obj()
	got := messages(missing(&observe.ClusterState{GangsServed: true, PodGroups: []*schedulingv1beta1.PodGroup{orphan}}))
	if len(got) != 1 || !strings.Contains(got[0], `names Workload "nope", which does not exist`) {
		t.Errorf("PodGroup of a missing Workload: %v", got)
	}
}

// The vetter keeps a pool's findings while its slices are the same
// objects, and checks it again once any is replaced.
func TestCheckPoolsFollowsChanges(t *testing.T) {
	v := New(0, time.Hour, func(Finding) {})
	slice := func(name, pool string, count int64) *resourceapi.ResourceSlice {
		return builder.ResourceSlice(name, "n1", driver, pool).Pool(1, count).Devices(builder.Device(name)).Obj()
	}
	broken, fixed, other := slice("a", "p", 2), slice("a", "p", 1), slice("b", "q", 1)
	steps := []struct {
		slices []*resourceapi.ResourceSlice
		want   int
		reused bool // the last pass's findings of pool p are returned
	}{
		{[]*resourceapi.ResourceSlice{broken}, 1, false},
		{[]*resourceapi.ResourceSlice{broken}, 1, true},
		{[]*resourceapi.ResourceSlice{other, broken}, 1, true},
		{[]*resourceapi.ResourceSlice{fixed, other}, 0, false},
		{[]*resourceapi.ResourceSlice{broken}, 1, false},
		{[]*resourceapi.ResourceSlice{broken, slice("c", "p", 2)}, 0, false},
	}
	var last []Finding
	for i, s := range steps {
		got := v.checkPools(s.slices)
		if want := Pools(s.slices); strings.Join(messages(got), "\n") != strings.Join(messages(want), "\n") || len(got) != s.want {
			t.Fatalf("step %d: findings %v, want %v (%d)", i, messages(got), messages(want), s.want)
		}
		c := v.pools[poolID{driver, "p"}]
		if reused := len(last) > 0 && len(c.findings) > 0 && &c.findings[0] == &last[0]; reused != s.reused {
			t.Errorf("step %d: pool p's findings reused %v, want %v", i, reused, s.reused)
		}
		last = c.findings
	}
}
