package buffers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

func TestWanted(t *testing.T) {
	perPod := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	limits := func(kv ...string) *v1beta1.ResourceList {
		l := v1beta1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1beta1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return &l
	}
	wl := &Workload{Replicas: 7}
	for _, tc := range []struct {
		name    string
		spec    v1beta1.CapacityBufferSpec
		wl      *Workload
		want    int32
		wantErr string
	}{
		{"replicas", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](3)}, nil, 3, ""},
		{"percentage rounds up", v1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](50)}, wl, 4, ""},
		{"percentage of none", v1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](50)}, &Workload{}, 0, ""},
		{"the larger of replicas and percentage", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](5), Percentage: ptr.To[int32](10)}, wl, 5, ""},
		{"percentage larger", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](1), Percentage: ptr.To[int32](100)}, wl, 7, ""},
		{"limits cap replicas", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](10), Limits: limits("cpu", "2")}, nil, 4, ""},
		{"tightest limit", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](10), Limits: limits("cpu", "4", "memory", "3Gi")}, nil, 3, ""},
		{"limits alone", v1beta1.CapacityBufferSpec{Limits: limits("cpu", "3")}, nil, 6, ""},
		{"limit on what the pods do not request", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](2), Limits: limits("nvidia.com/gpu", "1")}, nil, 2, ""},
		{"only a limit the pods do not touch", v1beta1.CapacityBufferSpec{Limits: limits("nvidia.com/gpu", "1")}, nil, 0, "nothing bounds"},
		{"percentage without a workload", v1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](50)}, nil, 0, "scalableRef only"},
		{"too many", v1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](MaxReplicas + 1)}, nil, 0, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wanted(tc.spec, tc.wl, perPod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("wanted = %d, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("wanted = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestQuotas(t *testing.T) {
	quota := func(name string, hard, used corev1.ResourceList, scoped bool) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
		q.Name = name
		if scoped {
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
		}
		return q
	}
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	const gpus = "gpu.example.com" + deviceQuotaSuffix
	usage := map[corev1.ResourceName]resource.Quantity{
		"pods": resource.MustParse("1"), "requests.cpu": resource.MustParse("1"), "cpu": resource.MustParse("1"), gpus: resource.MustParse("2"),
	}
	for _, tc := range []struct {
		name    string
		quotas  []*corev1.ResourceQuota
		wants   []int32 // buffers served in turn
		got     []int32
		limited []string // part of the reason, "" for none
	}{
		{"no quota", nil, []int32{5}, []int32{5}, []string{""}},
		{"pods left", []*corev1.ResourceQuota{quota("q", rl("pods", "10"), rl("pods", "7"), false)}, []int32{5}, []int32{3}, []string{"q: pods has room for 3"}},
		{"requests.cpu", []*corev1.ResourceQuota{quota("q", rl("requests.cpu", "4"), nil, false)}, []int32{5}, []int32{4}, []string{"requests.cpu"}},
		{"device class", []*corev1.ResourceQuota{quota("q", rl(gpus, "4"), rl(gpus, "1"), false)}, []int32{2}, []int32{1}, []string{gpus + " has room for 1"}},
		{"overused", []*corev1.ResourceQuota{quota("q", rl("pods", "2"), rl("pods", "3"), false)}, []int32{1}, []int32{0}, []string{"room for 0"}},
		{"scoped ignored", []*corev1.ResourceQuota{quota("q", rl("pods", "1"), nil, true)}, []int32{5}, []int32{5}, []string{""}},
		{"second buffer gets the rest", []*corev1.ResourceQuota{quota("q", rl("cpu", "6"), nil, false)}, []int32{4, 4}, []int32{4, 2}, []string{"", "room for 2"}},
		{"keys the pod does not use", []*corev1.ResourceQuota{quota("q", rl("services", "0", "limits.memory", "0"), nil, false)}, []int32{3}, []int32{3}, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQuotas(tc.quotas)
			for i, w := range tc.wants {
				n, why := q.take(w, usage)
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

func TestQuotaUsage(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("two-gpus")}, {Name: "shared", ResourceClaimName: ptr.To("c")}},
	}}
	ct := claimTemplate("two-gpus", "gpu.example.com", 2)
	u := quotaUsage(tmpl, func(name string) *resourceClaimTemplate {
		if name == "two-gpus" {
			return ct
		}
		return nil
	})
	for key, want := range map[corev1.ResourceName]string{
		"pods": "1", "count/pods": "1", "cpu": "2", "requests.cpu": "2", "limits.memory": "1Gi",
		"gpu.example.com" + deviceQuotaSuffix: "2",
	} {
		if got := u[key]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("usage[%s] = %s, want %s", key, got.String(), want)
		}
	}
}
