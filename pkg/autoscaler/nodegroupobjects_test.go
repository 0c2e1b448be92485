package autoscaler_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
)

// The NodeGroup objects of a pass count its own scale-ups: the group the
// pass grew shows its new target and the room left after it; explain
// writes none.
func TestRunOnceWritesNodeGroupObjects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	provider := fakeprovider.New(cpuGroup("small", "4"))
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.NodeGroupResource: "NodeGroupList"})
	l := newLoopWith(t, ctx, func(o *config.Options, env *autoscaler.Env) { o.WriteNodeGroupObjects, env.Dynamic = true, dyn },
		testclock.NewFakeClock(t0), record.NewFakeRecorder(10), provider, unschedulablePod("a", "2"))
	stages := l.Loop.Stages()
	if last := stages[len(stages)-1]; last.Name() != objects.StageName || !last.Acts() {
		t.Errorf("last stage %s (acts %v), want %s acting", last.Name(), last.Acts(), objects.StageName)
	}
	if _, err := l.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(v1alpha1.NodeGroupResource).Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ng v1alpha1.NodeGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ng); err != nil {
		t.Fatal(err)
	}
	st := ng.Status
	if st.TargetSize != 1 || st.UpcomingNodes != 1 || st.Provisionable.Nodes != 4 || st.Provisionable.LimitedBy != limits.ReasonGroupMax {
		t.Errorf("after scaling up by one: %+v", st)
	}
	dyn.ClearActions()
	if _, err := l.Explain(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if n := len(dyn.Actions()); n != 0 {
		t.Errorf("explain made %d NodeGroup calls", n)
	}
}
