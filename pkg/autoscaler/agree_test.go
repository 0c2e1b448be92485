package autoscaler_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
)

// explain and the loop run one pass: on one cluster, the group explain
// says each pod scales up is the group the loop scales up for it.
func TestExplainDecidesAsTheLoop(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	small, big := cpuGroup("small", "4"), cpuGroup("big", "16")
	pods := []*corev1.Pod{unschedulablePod("a", "2"), unschedulablePod("b", "8"), unschedulablePod("c", "12"), unschedulablePod("huge", "64")}
	objs := make([]runtime.Object, len(pods))
	for i, p := range pods {
		objs[i] = p
	}
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(small, big), objs...)

	explained := map[string]string{}
	for _, p := range pods {
		r, err := l.Explain(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		if err != nil {
			t.Fatal(err)
		}
		explained[p.Name] = scaledGroups(r)
	}
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	decided := map[string]string{}
	for _, p := range pods {
		decided[p.Name] = ""
	}
	for _, r := range pass.Get(st, act.Results) {
		for _, p := range r.Pods {
			decided[p.Name] = r.Group.Id
		}
	}
	if decided["b"] == "" || decided["huge"] != "" {
		t.Fatalf("the loop decided %v: want b scaled for and huge not, or this test checks nothing", decided)
	}
	if diff := cmp.Diff(decided, explained); diff != "" {
		t.Errorf("explain (+) and the loop (-) decided differently:\n%s", diff)
	}
}

// scaledGroups are the groups a report says scale up, comma-separated.
func scaledGroups(r *explain.Report) string {
	var out []string
	for _, g := range r.NodeGroups {
		if g.Verdict == explain.VerdictScaleUp {
			out = append(out, g.NodeGroup)
		}
	}
	sort.Strings(out)
	return fmt.Sprint(out)[1 : len(fmt.Sprint(out))-1]
}
