package autoscaler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// TestRunOnceServesTheProfile: with a --scheduler-config-file whose one
// profile adds node affinity to every pod, the loop helps that profile's
// pods (and not the default scheduler's) and grows the group the profile
// admits, not its twin without the label (estimated first: a shared
// estimate would give both its "fits nowhere").
func TestRunOnceServesTheProfile(t *testing.T) {
	const pool = "example.com/pool"
	_, ctx := ktesting.NewTestContext(t)
	cfg, err := builder.SchedulerConfigYAML(builder.SchedulerProfile("accel-scheduler").RequireNodeLabel(pool, "accel"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	group := func(id string, labels map[string]string) *fakeprovider.FakeNodeGroup {
		return fakeprovider.NewGroup(id, 0, 5).WithTemplate(&cloudprovider.NodeTemplate{
			Node: builder.Node(template.PlaceholderNodeName).CPU("8").Memory("32Gi").Labels(labels).Obj(),
		}, nil)
	}
	plain, accel := group("a-plain", nil), group("b-accel", map[string]string{pool: "accel"})
	pending := func(name, scheduler string) *corev1.Pod {
		p := builder.Pod("ns", name).CPU("2").SchedulerName(scheduler).OwnedBy("apps/v1", "ReplicaSet", name).Obj()
		p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		return p
	}
	l := newLoopWith(t, ctx, func(o *config.Options, _ *autoscaler.Env) { o.SchedulerConfigFile = path },
		testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(plain, accel),
		pending("ours", "accel-scheduler"), pending("theirs", corev1.DefaultSchedulerName))
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := pass.Get(st, act.Results)
	var got []string
	for _, r := range res {
		for _, p := range r.Pods {
			got = append(got, fmt.Sprintf("%s+%d:%s", r.Group.Id, r.Added, p.Name))
		}
	}
	if want := []string{"b-accel+1:ours"}; !slices.Equal(got, want) {
		t.Fatalf("scale-ups %q, want %q: b-accel grown for the profile's pod alone", got, want)
	}
	if calls := plain.Calls(); len(calls) != 0 {
		t.Errorf("a-plain calls: %+v", calls)
	}
}
