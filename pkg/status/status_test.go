package status

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestBuildAndWrite(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	n := template.PlaceholderNodeName
	gpu := &nodegroups.Info{Id: "gpu", Min: 0, Max: 4, Target: 2, TemplateSource: "provider", OptionsFrom: nodegroups.OptionsFromProvider,
		Options: cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownUnneededTime: time.Hour, MaxNodeProvisionTime: 30 * time.Minute},
		Ready:   []*corev1.Node{builder.Node("gpu-1").Obj()},
		Template: &cloudprovider.NodeTemplate{Node: builder.Node(n).Obj(), ResourceSlices: []*resourceapi.ResourceSlice{
			builder.ResourceSlice("a", n, "gpu.example.com", n).Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).
				SharedCounters(builder.CounterSet("gpu-0-mem").Counter("memory", "80Gi")).Obj(),
		}}}
	broken := &nodegroups.Info{Id: "broken", Max: 3, TemplateErr: errTest("no template")}
	b := backoff.New(5*time.Minute, time.Hour, time.Hour)
	b.Fail("broken", "cloudProviderError", t0)
	in := BuildInput{Now: t0, Healthy: true, Nodes: []*corev1.Node{builder.Node("gpu-1").Obj(), builder.Node("other").NotReady().Obj()},
		Groups: []*nodegroups.Info{gpu, broken}, Backoff: b.Get,
		ScaleDown:     ScaleDownInput{Candidates: 1, PerGroup: map[string]int{"gpu": 1}},
		Reservations:  ReservationsFrom([]cloudprovider.ReservedCapacity{{ID: "r1", Kind: cloudprovider.ReservationOpen, Count: 4, InUse: 1}}, "cloudprovider"),
		Disagreements: []DisagreementStatus{{Namespace: "ns", Name: "p", Node: "gpu-1", SchedulerMessage: "untolerated taint"}},
	}
	for i := range 60 {
		in.NotHelped = append(in.NotHelped, PodNotHelped{Namespace: "ns", Name: "pod-" + string(rune('a'+i%26))})
	}
	var bld Builder
	s := bld.Build(in)
	if s.ClusterWide.Health.Status != HealthHealthy || s.ClusterWide.ScaleUp.Status != ScaleUpInProgress ||
		s.ClusterWide.ScaleDown.Status != ScaleDownCandidatesPresent {
		t.Errorf("cluster-wide %+v", s.ClusterWide)
	}
	if c := s.ClusterWide.Health.NodeCounts; c.Registered.Total != 2 || c.Registered.Ready != 1 || c.Registered.Unready != 1 || c.Unregistered != 1 {
		t.Errorf("node counts %+v", c)
	}
	if len(s.NodeGroups) != 2 || s.NodeGroups[0].Name != "broken" || s.NodeGroups[0].ScaleUp.Status != ScaleUpBackoff ||
		s.NodeGroups[0].ScaleUp.BackoffInfo.ErrorCode != "cloudProviderError" || s.NodeGroups[0].Health.Status != HealthUnhealthy {
		t.Errorf("groups %+v", s.NodeGroups)
	}
	if o := s.NodeGroups[1].Options; o == nil || o.From != "provider" || o.ScaleDownUnneededTime.Duration != time.Hour || o.MaxNodeProvisionTime.Duration != 30*time.Minute {
		t.Errorf("options %+v, want the provider's", o)
	}
	if o := s.NodeGroups[0].Options; o != nil {
		t.Errorf("options %+v of a group whose options were never resolved", o)
	}
	pools := s.NodeGroups[1].DRAPools
	if len(pools) != 1 || pools[0].Devices != 2 || pools[0].Counters["gpu-0-mem/memory"] != "80Gi" {
		t.Errorf("pools %+v", pools)
	}
	if len(s.PodsNotHelped) != MaxPodsNotHelped || s.PodsNotHelpedTotal != 60 {
		t.Errorf("%d pods not helped listed, total %d", len(s.PodsNotHelped), s.PodsNotHelpedTotal)
	}
	// A later loop with the same statuses keeps the transition times.
	in.Now = t0.Add(time.Minute)
	s2 := bld.Build(in)
	if !s2.ClusterWide.Health.LastTransitionTime.Equal(&s.ClusterWide.Health.LastTransitionTime) || s2.ClusterWide.Health.LastProbeTime.Equal(&s.ClusterWide.Health.LastProbeTime) {
		t.Errorf("transition %v probe %v", s2.ClusterWide.Health.LastTransitionTime, s2.ClusterWide.Health.LastProbeTime)
	}

	client := fake.NewClientset()
	w := NewWriter(client, "kube-system", "cluster-autoscaler-status")
	ctx := context.Background()
	for _, st := range []*AutoscalerStatus{s, s2} { // create, then update
		if err := w.Write(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	back, err := Read(ctx, client, "kube-system", "cluster-autoscaler-status")
	if err != nil {
		t.Fatal(err)
	}
	if !back.Time.Equal(&s2.Time) || len(back.Reservations) != 1 || back.SchedulerDisagreements[0].Node != "gpu-1" {
		t.Errorf("read back %+v", back)
	}
	cm, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	for _, want := range []string{"autoscalerStatus: Running", "clusterWide:", "nodeGroups:", "cloudProviderTarget: 2", "backoffInfo:", "draPools:", "scaleDownUnneededTime: 1h0m0s"} {
		if !strings.Contains(cm.Data[Key], want) {
			t.Errorf("status YAML lacks %q:\n%s", want, cm.Data[Key])
		}
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// An insecure provider connection is said in every status written, and
// only then; upstream's fields are as they were.
func TestCloudProviderInsecure(t *testing.T) {
	for _, reason := range []string{"", "externalgrpc h:1: plaintext connection (insecure: true)"} {
		client := fake.NewClientset()
		w := NewWriter(client, "kube-system", "status")
		w.SetCloudProviderInsecure(reason)
		var b Builder
		s := b.Build(BuildInput{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Healthy: true})
		ctx := context.Background()
		if err := w.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
		if s.CloudProviderInsecure != "" {
			t.Error("Write changed the caller's status")
		}
		back, err := Read(ctx, client, "kube-system", "status")
		if err != nil {
			t.Fatal(err)
		}
		if back.CloudProviderInsecure != reason || back.AutoscalerStatus != "Running" || back.ClusterWide.Health.Status != HealthHealthy {
			t.Errorf("reason %q: read back %+v", reason, back)
		}
		cm, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "status", metav1.GetOptions{})
		if has := strings.Contains(cm.Data[Key], "cloudProviderInsecure:"); has != (reason != "") {
			t.Errorf("reason %q: cloudProviderInsecure in the YAML %v:\n%s", reason, has, cm.Data[Key])
		}
	}
}
