package buffers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func rq(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
	q.Name = name
	return q
}

func scoped(q *corev1.ResourceQuota, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
	q.Spec.Scopes = scopes
	return q
}

func priorityScoped(q *corev1.ResourceQuota, op corev1.ScopeSelectorOperator, classes ...string) *corev1.ResourceQuota {
	q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: classes}}}
	return q
}

// podSpec is one container requesting cpu (and as much memory as limit:
// Guaranteed unless cpu is "", BestEffort then), with a claim from the
// template "gpus" when gpus.
func podSpec(cpu string, gpus bool) corev1.PodSpec {
	c := corev1.Container{Name: "c"}
	if cpu != "" {
		c.Resources.Requests = rl("cpu", cpu, "memory", "1Gi")
		c.Resources.Limits = rl("cpu", cpu, "memory", "1Gi")
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{c}}
	if gpus {
		spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpus")}}
	}
	return spec
}

// deviceQuotaSuffix ends the ResourceQuota key that counts the devices
// claims in a namespace take from a DeviceClass.
const deviceQuotaSuffix = ".deviceclass.resource.k8s.io/devices"

const gpuKey = "gpu.example.com" + deviceQuotaSuffix

// Quotas cut the buffers of a namespace in turn, each quota charged as
// the API server's quota admission would charge a real pod: scoped quotas
// when the pod matches every scope, device quotas for the claims of the
// pod's claim templates, and those only by quotas without scopes (claims
// match no scope).
func TestQuotas(t *testing.T) {
	high := func(s corev1.PodSpec) corev1.PodSpec { s.PriorityClassName = "high"; return s }
	terminating := func(s corev1.PodSpec) corev1.PodSpec { s.ActiveDeadlineSeconds = ptr.To[int64](60); return s }
	crossNS := func(s corev1.PodSpec) corev1.PodSpec {
		s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "zone", Namespaces: []string{"other"}, LabelSelector: &metav1.LabelSelector{}}}}}
		return s
	}
	for _, tc := range []struct {
		name    string
		spec    corev1.PodSpec
		quotas  []*corev1.ResourceQuota
		wants   []int32 // buffers served in turn
		got     []int32
		limited []string // part of the reason, "" for none
	}{
		{"no quota", podSpec("1", true), nil, []int32{5}, []int32{5}, []string{""}},
		{"pods left", podSpec("1", true), []*corev1.ResourceQuota{rq("q", rl("pods", "10"), rl("pods", "7"))}, []int32{5}, []int32{3}, []string{"q: pods has room for 3"}},
		{"requests.cpu", podSpec("1", true), []*corev1.ResourceQuota{rq("q", rl("requests.cpu", "4"), nil)}, []int32{5}, []int32{4}, []string{"requests.cpu"}},
		{"device class", podSpec("1", true), []*corev1.ResourceQuota{rq("q", rl(gpuKey, "4"), rl(gpuKey, "1"))}, []int32{2}, []int32{1}, []string{gpuKey + " has room for 1"}},
		{"overused", podSpec("1", true), []*corev1.ResourceQuota{rq("q", rl("pods", "2"), rl("pods", "3"))}, []int32{1}, []int32{0}, []string{"room for 0"}},
		{"second buffer gets the rest", podSpec("1", true), []*corev1.ResourceQuota{rq("q", rl("cpu", "6"), nil)}, []int32{4, 4}, []int32{4, 2}, []string{"", "room for 2"}},
		{"keys the pod does not use", podSpec("1", true), []*corev1.ResourceQuota{rq("q", rl("services", "0", "limits.nvidia.com/gpu", "0"), nil)}, []int32{3}, []int32{3}, []string{""}},
		{"not counted yet: the spec is the room", podSpec("1", true), []*corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "2")}}},
			[]int32{3}, []int32{2}, []string{"new: pods has room for 2"}},

		{"BestEffort scope, a Guaranteed pod", podSpec("1", false), []*corev1.ResourceQuota{scoped(rq("q", rl("pods", "1"), nil), corev1.ResourceQuotaScopeBestEffort)}, []int32{5}, []int32{5}, []string{""}},
		{"BestEffort scope, a BestEffort pod", podSpec("", false), []*corev1.ResourceQuota{scoped(rq("q", rl("pods", "1"), nil), corev1.ResourceQuotaScopeBestEffort)}, []int32{5}, []int32{1}, []string{"q: pods"}},
		{"NotBestEffort scope", podSpec("1", false), []*corev1.ResourceQuota{scoped(rq("q", rl("pods", "2"), nil), corev1.ResourceQuotaScopeNotBestEffort)}, []int32{5}, []int32{2}, []string{"q: pods"}},
		{"Terminating scope, no deadline", podSpec("1", false), []*corev1.ResourceQuota{scoped(rq("q", rl("pods", "0"), nil), corev1.ResourceQuotaScopeTerminating)}, []int32{5}, []int32{5}, []string{""}},
		{"Terminating scope, a deadline", terminating(podSpec("1", false)), []*corev1.ResourceQuota{scoped(rq("q", rl("pods", "0"), nil), corev1.ResourceQuotaScopeTerminating)}, []int32{5}, []int32{0}, []string{"q: pods"}},
		{"NotTerminating scope", podSpec("1", false), []*corev1.ResourceQuota{scoped(rq("q", rl("cpu", "3"), nil), corev1.ResourceQuotaScopeNotTerminating)}, []int32{5}, []int32{3}, []string{"q: cpu"}},
		{"every scope must match", podSpec("1", false), []*corev1.ResourceQuota{scoped(rq("q", rl("pods", "0"), nil), corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeTerminating)},
			[]int32{5}, []int32{5}, []string{""}},
		{"priority class In, matching", high(podSpec("1", false)), []*corev1.ResourceQuota{priorityScoped(rq("hi", rl("requests.cpu", "2"), nil), corev1.ScopeSelectorOpIn, "high")}, []int32{5}, []int32{2}, []string{"hi: requests.cpu"}},
		{"priority class In, another class", podSpec("1", false), []*corev1.ResourceQuota{priorityScoped(rq("hi", rl("requests.cpu", "2"), nil), corev1.ScopeSelectorOpIn, "high")}, []int32{5}, []int32{5}, []string{""}},
		{"priority class NotIn", podSpec("1", false), []*corev1.ResourceQuota{priorityScoped(rq("lo", rl("pods", "1"), nil), corev1.ScopeSelectorOpNotIn, "high")}, []int32{5}, []int32{1}, []string{"lo: pods"}},
		{"priority class Exists", high(podSpec("1", false)), []*corev1.ResourceQuota{priorityScoped(rq("any", rl("pods", "1"), nil), corev1.ScopeSelectorOpExists)}, []int32{5}, []int32{1}, []string{"any: pods"}},
		{"cross-namespace affinity scope", crossNS(podSpec("1", false)), []*corev1.ResourceQuota{scoped(rq("x", rl("pods", "0"), nil), corev1.ResourceQuotaScopeCrossNamespacePodAffinity)}, []int32{5}, []int32{0}, []string{"x: pods"}},
		{"a scoped quota charges no devices", high(podSpec("1", true)), []*corev1.ResourceQuota{priorityScoped(rq("hi", rl(gpuKey, "0"), nil), corev1.ScopeSelectorOpIn, "high")}, []int32{5}, []int32{5}, []string{""}},
		{"scoped and unscoped, the tighter wins", high(podSpec("1", true)), []*corev1.ResourceQuota{
			priorityScoped(rq("hi", rl("pods", "3"), nil), corev1.ScopeSelectorOpIn, "high"), rq("all", rl("pods", "10", gpuKey, "4"), nil)},
			[]int32{5, 5}, []int32{2, 0}, []string{"all: " + gpuKey + " has room for 2", "room for 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvaluators(nil)
			c, err := ev.charge(&corev1.PodTemplateSpec{Spec: tc.spec}, "ns", func(string) *resourceapi.ResourceClaimTemplate { return claimTemplate("gpus", "gpu.example.com", 2) })
			if err != nil {
				t.Fatal(err)
			}
			q := newQuotas(tc.quotas, ev)
			for i, w := range tc.wants {
				n, why := q.take(w, c)
				if n != tc.got[i] {
					t.Errorf("buffer %d: %d pods, want %d (%s)", i, n, tc.got[i], why)
				}
				if (tc.limited[i] == "") != (why == "") || !strings.Contains(why, tc.limited[i]) {
					t.Errorf("buffer %d: reason %q, want one with %q", i, why, tc.limited[i])
				}
			}
		})
	}
}

// Every device request is charged as the claim evaluator charges a real
// claim: exact counts, the most of each class over a prioritized list's
// alternatives, All as the most a claim can be allocated; a shared claim
// exists already and is not charged again.
func TestCharge(t *testing.T) {
	exact := func(class string, n int64) *resourceapi.ExactDeviceRequest {
		return &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n}
	}
	sub := func(name, class string, n int64) resourceapi.DeviceSubRequest {
		return resourceapi.DeviceSubRequest{Name: name, DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n}
	}
	ct := func(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaimTemplate {
		return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}}
	}
	templates := map[string]*resourceapi.ResourceClaimTemplate{
		"two-gpus": ct("two-gpus", resourceapi.DeviceRequest{Name: "r", Exactly: exact("gpu", 2)}),
		"prioritized": ct("prioritized", resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
			sub("big", "gpu", 1), sub("small", "mig", 4), sub("two", "mig", 2)}}),
		"all": ct("all", resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic", AllocationMode: resourceapi.DeviceAllocationModeAll}}),
	}
	spec := podSpec("2", false)
	spec.ResourceClaims = []corev1.PodResourceClaim{
		{Name: "a", ResourceClaimTemplateName: ptr.To("two-gpus")},
		{Name: "b", ResourceClaimTemplateName: ptr.To("prioritized")},
		{Name: "c", ResourceClaimTemplateName: ptr.To("all")},
		{Name: "shared", ResourceClaimName: ptr.To("existing")},
		{Name: "gone", ResourceClaimTemplateName: ptr.To("missing")},
	}
	ev := newEvaluators(nil)
	c, err := ev.charge(&corev1.PodTemplateSpec{Spec: spec}, "ns", func(name string) *resourceapi.ResourceClaimTemplate { return templates[name] })
	if err != nil {
		t.Fatal(err)
	}
	all := ev.against(c, rq("all", nil, nil), []corev1.ResourceName{"pods", "count/pods", "cpu", "requests.cpu", "limits.memory", "count/resourceclaims.resource.k8s.io",
		"gpu" + deviceQuotaSuffix, "mig" + deviceQuotaSuffix, "nic" + deviceQuotaSuffix})
	for key, want := range map[corev1.ResourceName]string{
		"pods": "1", "count/pods": "1", "cpu": "2", "requests.cpu": "2", "limits.memory": "1Gi",
		"count/resourceclaims.resource.k8s.io": "3",
		"gpu" + deviceQuotaSuffix:              "3",  // 2 + the prioritized list's 1
		"mig" + deviceQuotaSuffix:              "4",  // the most of its alternatives
		"nic" + deviceQuotaSuffix:              "32", // All: resource.k8s.io's AllocationResultsMaxSize
	} {
		if got := all[key]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("usage[%s] = %s, want %s", key, got.String(), want)
		}
	}
	if len(all) != 9 {
		t.Errorf("charged %v, want exactly the 9 keys", all)
	}
}
