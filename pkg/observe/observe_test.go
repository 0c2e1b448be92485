package observe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func withCondition(p *corev1.Pod, status corev1.ConditionStatus, reason string) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason})
	return p
}

func TestIsUnschedulable(t *testing.T) {
	deleted := withCondition(builder.Pod("ns", "p").Obj(), corev1.ConditionFalse, corev1.PodReasonUnschedulable)
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	readyFirst := builder.Pod("ns", "p").Obj()
	readyFirst.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	withCondition(readyFirst, corev1.ConditionFalse, corev1.PodReasonUnschedulable)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"tried and unschedulable", withCondition(builder.Pod("ns", "p").Obj(), corev1.ConditionFalse, corev1.PodReasonUnschedulable), true},
		{"PodScheduled after other conditions", readyFirst, true},
		{"not tried yet", builder.Pod("ns", "p").Obj(), false},
		{"scheduler error (gang cycles report some rejections so)", withCondition(builder.Pod("ns", "p").Obj(), corev1.ConditionFalse, corev1.PodReasonSchedulerError), true},
		{"scheduling gated", withCondition(builder.Pod("ns", "p").Obj(), corev1.ConditionFalse, corev1.PodReasonSchedulingGated), false},
		{"scheduled", withCondition(builder.Pod("ns", "p").Obj(), corev1.ConditionTrue, ""), false},
		{"bound, stale condition", withCondition(builder.Pod("ns", "p").Node("n1").Obj(), corev1.ConditionFalse, corev1.PodReasonUnschedulable), false},
		{"being deleted", deleted, false},
	}
	for _, tc := range tests {
		if got := observe.IsUnschedulable(tc.pod); got != tc.want {
			t.Errorf("%s: IsUnschedulable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDiscover(t *testing.T) {
	resourceV1 := func(names ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1"}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
		}
		return l
	}
	schedulingV1beta1 := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "workloads"}, {Name: "podgroups"}}}
	tests := []struct {
		name      string
		resources []*metav1.APIResourceList
		fail      error
		want      observe.Served
		wantErr   bool
	}{
		{"nothing optional", []*metav1.APIResourceList{resourceV1("resourceslices", "resourceclaims")}, nil, observe.Served{}, false},
		{"device taint rules", []*metav1.APIResourceList{resourceV1("resourceslices", "devicetaintrules")}, nil, observe.Served{DeviceTaintRules: true}, false},
		{"workloads", []*metav1.APIResourceList{resourceV1("resourceslices"), schedulingV1beta1}, nil, observe.Served{Workloads: true}, false},
		{"both", []*metav1.APIResourceList{resourceV1("devicetaintrules"), schedulingV1beta1}, nil, observe.Served{DeviceTaintRules: true, Workloads: true}, false},
		{"composite pod groups", []*metav1.APIResourceList{resourceV1("resourceslices"), schedulingV1beta1,
			{GroupVersion: "scheduling.k8s.io/v1alpha3", APIResources: []metav1.APIResource{{Name: "compositepodgroups"}}}}, nil,
			observe.Served{Workloads: true, Composites: true}, false},
		{"discovery failing is an error, not 'not served'", nil, errors.New("connection refused"), observe.Served{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.Discovery().(*fakediscovery.FakeDiscovery).Resources = tc.resources
			if tc.fail != nil {
				client.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.fail
				})
			}
			got, err := observe.Discover(client)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Discover error = %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Discover = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	unschedulable := withCondition(builder.Pod("ns", "pending").Obj(), corev1.ConditionFalse, corev1.PodReasonUnschedulable)
	applied := builder.Node("n2").Obj()
	applied.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationApply}}
	unschedulable.ManagedFields = applied.ManagedFields
	objects := []runtime.Object{
		builder.Node("n1").Obj(), applied,
		builder.Pod("ns", "running").Node("n1").Obj(), unschedulable,
		builder.ResourceSlice("n1-gpus", "n1", "gpu.example.com", "n1").Devices(builder.Device("gpu-0")).Obj(),
		builder.DeviceClass("gpu").Driver("gpu.example.com").Obj(),
		builder.Claim("ns", "c").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.ClaimTemplate("ns", "t").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.DeviceTaintRule("broken", "broken", "true", resourceapi.DeviceTaintEffectNoSchedule).Obj(),
		builder.PodGroup("ns", "pg").MinCount(2).Obj(),
		builder.CompositePodGroup("ns", "job").DisruptAll().Obj(),
		builder.Workload("ns", "w").GangTemplate("workers", 2).Obj(),
		builder.DaemonSet("kube-system", "dcgm").Obj(),
	}
	type counts struct {
		Nodes, Pods, Slices, Claims, Templates, Classes, TaintRules, PodGroups, Workloads, DaemonSets, Composites int
	}
	tests := []struct {
		name   string
		served observe.Served
		want   counts
	}{
		{"required APIs only", observe.Served{}, counts{2, 2, 1, 1, 1, 1, 0, 0, 0, 1, 0}},
		{"optional APIs served", observe.Served{DeviceTaintRules: true, Workloads: true, Composites: true}, counts{2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			o := observe.New(fake.NewClientset(objects...), tc.served)
			// Shutdown waits for the informers, which stop with ctx.
			defer o.Shutdown()
			defer cancel()
			if err := o.Start(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			s, err := o.Observe()
			if err != nil {
				t.Fatal(err)
			}
			got := counts{len(s.Nodes), len(s.Pods), len(s.ResourceSlices), len(s.ResourceClaims), len(s.ResourceClaimTemplates),
				len(s.DeviceClasses), len(s.DeviceTaintRules), len(s.PodGroups), len(s.Workloads), len(s.DaemonSets), len(s.CompositePodGroups)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
			// Nothing reads server-side apply's field ownership: the
			// caches do not keep it.
			for _, n := range s.Nodes {
				if n.ManagedFields != nil {
					t.Errorf("node %s kept managedFields", n.Name)
				}
			}
			for _, p := range s.Pods {
				if p.ManagedFields != nil {
					t.Errorf("pod %s kept managedFields", p.Name)
				}
			}
			// The unschedulable pod signals the loop to run early.
			select {
			case <-o.Triggered():
			case <-time.After(time.Minute):
				t.Error("no trigger for an unschedulable pod")
			}
		})
	}
}

// OnPods' handler has seen every pod of the first list when Start
// returns, the very objects Observe lists, and then hears of updates.
func TestOnPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(builder.Pod("ns", "a").Node("n").Obj(), builder.Pod("ns", "b").Obj())
	o := observe.New(client, observe.Served{})
	defer o.Shutdown()
	defer cancel()
	var mu sync.Mutex
	seen := map[*corev1.Pod]bool{}
	if err := o.OnPods(func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		seen[p] = true
	}); err != nil {
		t.Fatal(err)
	}
	s := startAndObserve(ctx, t, o)
	mu.Lock()
	for _, p := range s.Pods {
		if !seen[p] {
			t.Errorf("pod %s listed but not handed to the handler before Start returned", p.Name)
		}
	}
	mu.Unlock()
	updated := builder.Pod("ns", "b").Node("n").Obj()
	if _, err := client.CoreV1().Pods("ns").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for p := range seen {
			if p.Name == "b" && p.Spec.NodeName == "n" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("the update was not handed to the handler: %v", err)
	}
}

// OnSlices' warm has seen every slice of the first list when Start
// returns; an update hands over the new object and gives up the old one,
// a delete gives up the slice.
func TestOnSlices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(builder.ResourceSlice("a", "n1", "gpu.example.com", "n1").Obj(),
		builder.ResourceSlice("b", "n2", "gpu.example.com", "n2").Obj())
	o := observe.New(client, observe.Served{})
	defer o.Shutdown()
	defer cancel()
	var mu sync.Mutex
	// By name: a deleted slice comes back as another object.
	warm := map[string]*resourceapi.ResourceSlice{}
	if err := o.OnSlices(func(s *resourceapi.ResourceSlice) {
		mu.Lock()
		defer mu.Unlock()
		warm[s.Name] = s
	}, func(s *resourceapi.ResourceSlice) {
		mu.Lock()
		defer mu.Unlock()
		delete(warm, s.Name)
	}); err != nil {
		t.Fatal(err)
	}
	s := startAndObserve(ctx, t, o)
	mu.Lock()
	for _, sl := range s.ResourceSlices {
		if warm[sl.Name] != sl {
			t.Errorf("slice %s listed but not warmed before Start returned", sl.Name)
		}
	}
	mu.Unlock()
	updated := builder.ResourceSlice("a", "n1", "gpu.example.com", "n1").Devices(builder.Device("gpu-0")).Obj()
	if _, err := client.ResourceV1().ResourceSlices().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.ResourceV1().ResourceSlices().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, sl := range warm {
			out = append(out, fmt.Sprintf("%s/%d", sl.Name, len(sl.Spec.Devices)))
		}
		return out
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got := names()
		return len(got) == 1 && got[0] == "a/1", nil
	}); err != nil {
		t.Errorf("warm slices %v, want only the updated a/1: %v", names(), err)
	}
}

// startAndObserve starts o's informers and returns what they hold.
func startAndObserve(ctx context.Context, t *testing.T, o *observe.Observer) *observe.ClusterState {
	t.Helper()
	if err := o.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	s, err := o.Observe()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
