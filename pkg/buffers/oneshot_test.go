package buffers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// oneShot is a one-shot buffer of replicas pods of template tmpl.
func oneShot(tmpl string, replicas int32, deadline *int32) v1beta1.CapacityBufferSpec {
	s := fromTemplate(tmpl, replicas)
	s.RefillStrategy, s.FillDeadlineSeconds = ptr.To(v1beta1.RefillNone), deadline
	return s
}

// withStatus gives a buffer a stored status (what an earlier pass, or
// an autoscaler before a restart, wrote).
func withStatus(u *unstructured.Unstructured, st v1beta1.CapacityBufferStatus) *unstructured.Unstructured {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		panic(err)
	}
	u.Object["status"] = obj
	return u
}

// readySince is a status saying the buffer became ReadyForProvisioning
// at t, having consumed consumed chunks.
func readySince(t time.Time, consumed int32, more ...metav1.Condition) v1beta1.CapacityBufferStatus {
	return v1beta1.CapacityBufferStatus{ConsumedReplicas: ptr.To(consumed), Conditions: append([]metav1.Condition{{
		Type: v1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionTrue, Reason: buffers.ReasonResolved, LastTransitionTime: metav1.NewTime(t)}}, more...)}
}

// labelled is a PodTemplate whose pods carry labels.
func labelled(name string, pod *corev1.Pod, labels map[string]string) *corev1.PodTemplate {
	pt := podTemplate(name, pod)
	pt.Template.Labels = labels
	return pt
}

// boundAt marks the pod scheduled at t (as the scheduler's binding does).
func boundAt(p *corev1.Pod, t time.Time) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	p.Status.Phase = corev1.PodRunning
	return p
}

// shots renders each buffer as "name held consumed+inflight terminal".
func shots(out *buffers.PassOutcome) string {
	var s []string
	for _, b := range out.Buffers {
		line := fmt.Sprintf("%s %d", b.Obj.Name, b.Replicas)
		if o := b.OneShot; o != nil {
			line += fmt.Sprintf(" %d+%d", o.Consumed, o.InFlight)
			if o.Terminal != "" {
				line += " " + o.Terminal
			}
		}
		if b.NotReady != "" {
			line += " " + b.NotReady
		}
		s = append(s, line)
	}
	return strings.Join(s, ",")
}

func TestOneShot(t *testing.T) {
	train := map[string]string{"job": "train"}
	cpuPod := builder.Pod(ns, "x").CPU("1").Memory("1Gi").Obj()
	gpuPod := builder.Pod(ns, "x").CPU("1").ClaimFromTemplate("gpu", "one-gpu").Obj()
	n1 := builder.Node("n1").CPU("16").Memory("64Gi").Obj()
	cpuGroup := group("cpu", builder.Node(template.PlaceholderNodeName).CPU("4").Memory("64Gi").Obj())
	gpuNode := builder.Node("g1").CPU("16").Memory("64Gi").Obj()
	gpuGroup := group("gpu", builder.Node(template.PlaceholderNodeName).CPU("16").Memory("64Gi").Obj(), gpuSlice(template.PlaceholderNodeName, 2))
	dra := []any{builder.DeviceClass(class).Driver(driver).Obj(), builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", class)).Obj()}
	// A worker of n CPUs has n GiB: n chunks of the template's shape.
	worker := func(name, cpu string) *builder.PodBuilder {
		return builder.Pod(ns, name).CPU(cpu).Memory(cpu+"Gi").Label("job", "train")
	}
	bound := func(name, cpu string, at time.Time) *corev1.Pod {
		return boundAt(worker(name, cpu).Node("n1").Obj(), at)
	}
	tmpls := []runtime.Object{labelled("cpu", cpuPod, train)}
	for _, tc := range []struct {
		name   string
		buf    *unstructured.Unstructured
		kube   []runtime.Object
		groups []*nodegroups.Info
		objs   []any
		pods   []*corev1.Pod // the cluster's pods, as observed
		want   string
	}{
		{"nothing bound: all of it held", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1}, nil, "b 4 0+0"},
		{"bound pods of the template's labels fill it", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{bound("w0", "1", now), bound("w1", "1", now)}, "b 2 2+0"},
		{"a bigger pod fills several chunks", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{bound("w0", "3", now)}, "b 1 3+0"},
		{"pods bound before it was ready took other capacity", withStatus(buffer("b", oneShot("cpu", 4, nil), nil), readySince(now.Add(-time.Minute), 0)),
			tmpls, nil, []any{n1}, []*corev1.Pod{bound("w0", "1", now.Add(-2*time.Minute)), bound("w1", "1", now.Add(-30*time.Second))}, "b 3 1+0"},
		{"other labels, other namespaces do not fill it", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{boundAt(builder.Pod(ns, "o").CPU("1").Label("job", "serve").Node("n1").Obj(), now),
				boundAt(builder.Pod("elsewhere", "e").CPU("1").Label("job", "train").Node("n1").Obj(), now)}, "b 4 0+0"},
		{"Karpenter's selector annotation picks the pods", buffer("b", oneShot("cpu", 4, nil), map[string]string{v1beta1.MatchSelectorAnnotation: "team in (a)"}),
			tmpls, nil, []any{n1}, []*corev1.Pod{boundAt(builder.Pod(ns, "a").CPU("1").Memory("1Gi").Label("team", "a").Node("n1").Obj(), now), bound("w0", "1", now)}, "b 3 1+0"},
		{"a pod short of one dimension fills no chunk", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{boundAt(builder.Pod(ns, "w0").CPU("4").Memory("512Mi").Label("job", "train").Node("n1").Obj(), now)}, "b 4 0+0"},
		{"pending pods about to bind take their chunks for the pass", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{bound("w0", "1", now), worker("w1", "1").Obj(), worker("w2", "1").Obj()}, "b 1 1+2"},
		{"gated pods do not", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{func() *corev1.Pod {
				p := worker("w0", "1").Obj()
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
				return p
			}()}, "b 4 0+0"},
		{"the high-water mark read back never decreases", withStatus(buffer("b", oneShot("cpu", 4, nil), nil), readySince(now.Add(-time.Minute), 3)),
			tmpls, nil, []any{n1}, []*corev1.Pod{bound("w0", "1", now)}, "b 1 3+0"},
		{"filled: Fulfilled, nothing held", buffer("b", oneShot("cpu", 4, nil), nil), tmpls, nil, []any{n1},
			[]*corev1.Pod{bound("w0", "2", now), bound("w1", "1", now), bound("w2", "1", now), bound("w3", "1", now)}, "b 0 4+0 Fulfilled"},
		{"deadline passed unfilled: Expired, nothing held", withStatus(buffer("b", oneShot("cpu", 4, ptr.To[int32](60)), nil), readySince(now.Add(-61*time.Second), 1)),
			tmpls, nil, []any{n1}, nil, "b 0 1+0 Expired"},
		{"deadline not yet", withStatus(buffer("b", oneShot("cpu", 4, ptr.To[int32](60)), nil), readySince(now.Add(-59*time.Second), 0)),
			tmpls, nil, []any{n1}, nil, "b 4 0+0"},
		{"filled at the deadline is Fulfilled", withStatus(buffer("b", oneShot("cpu", 2, ptr.To[int32](60)), nil), readySince(now.Add(-time.Hour), 0)),
			tmpls, nil, []any{n1}, []*corev1.Pod{bound("w0", "2", now)}, "b 0 2+0 Fulfilled"},
		{"ended for good: the template may go", withStatus(buffer("b", oneShot("gone", 4, nil), nil), readySince(now.Add(-time.Hour), 4,
			metav1.Condition{Type: v1beta1.ConditionFulfilled, Status: metav1.ConditionTrue, Reason: buffers.ReasonBufferFilled})),
			tmpls, nil, []any{n1}, nil, "b 0 4+0 Fulfilled"},
		{"devices count: a pod of one GPU fills one GPU chunk", buffer("b", oneShot("gpu", 2, nil), nil), []runtime.Object{labelled("gpu", gpuPod, train)},
			[]*nodegroups.Info{gpuGroup}, append([]any{gpuNode, gpuSlice("g1", 2)}, dra...),
			[]*corev1.Pod{boundAt(builder.Pod(ns, "w0").CPU("2").Label("job", "train").ClaimFromTemplate("gpu", "one-gpu").Node("g1").Obj(), now)}, "b 1 1+0"},
		{"a recreate buffer refills", buffer("b", fromTemplate("cpu", 4), nil), tmpls, []*nodegroups.Info{cpuGroup}, []any{n1},
			[]*corev1.Pod{bound("w0", "1", now), bound("w1", "1", now)}, "b 4"},
		{"a malformed selector", buffer("b", oneShot("cpu", 4, nil), map[string]string{v1beta1.MatchSelectorAnnotation: "job in ("}), tmpls, nil, []any{n1}, nil,
			"b 0 InvalidSpec"},
		{"an unknown refill strategy", buffer("b", v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "cpu"}, Replicas: ptr.To[int32](1),
			RefillStrategy: ptr.To("sometimes")}, nil), tmpls, nil, []any{n1}, nil, "b 0 InvalidSpec"},
		{"a negative deadline", buffer("b", oneShot("cpu", 4, ptr.To[int32](-1)), nil), tmpls, nil, []any{n1}, nil, "b 0 InvalidSpec"},
		{"one-shot with limits", buffer("b", func() v1beta1.CapacityBufferSpec {
			s := oneShot("cpu", 4, nil)
			s.Limits = &v1beta1.ResourceList{"cpu": *cpuPod.Spec.Containers[0].Resources.Requests.Cpu()}
			return s
		}(), nil), tmpls, nil, []any{n1}, nil, "b 0 InvalidSpec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := tc.groups
			if groups == nil {
				groups = []*nodegroups.Info{cpuGroup}
			}
			e := newEnv(t, []*unstructured.Unstructured{tc.buf}, tc.kube, groups, tc.objs...)
			e.in.Pods = tc.pods
			out, err := e.proc.Run(e.ctx, e.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := shots(out); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if b := out.Buffers[0]; int(b.Replicas) != len(b.Pods) {
				t.Errorf("%d pods simulated for %d held", len(b.Pods), b.Replicas)
			}
		})
	}
}

// The status a one-shot buffer gets as it fills and ends, and that a
// status written once is written again unchanged (no write every pass).
func TestOneShotStatus(t *testing.T) {
	train := map[string]string{"job": "train"}
	kube := []runtime.Object{labelled("cpu", builder.Pod(ns, "x").CPU("1").Obj(), train)}
	n1 := builder.Node("n1").CPU("16").Memory("64Gi").Obj()
	cpuGroup := group("cpu", builder.Node(template.PlaceholderNodeName).CPU("4").Memory("64Gi").Obj())
	bound := func(name string) *corev1.Pod {
		return boundAt(builder.Pod(ns, name).CPU("1").Label("job", "train").Node("n1").Obj(), now)
	}
	type want struct {
		replicas, ready, consumed int32
		conds                     []string // Type=Status/Reason that must be there
		absent                    []string // condition types that must not
		msg                       string   // part of Provisioning's message
	}
	for _, tc := range []struct {
		name string
		buf  *unstructured.Unstructured
		pods []*corev1.Pod
		want want
	}{
		{"filling", buffer("b", oneShot("cpu", 3, ptr.To[int32](600)), nil), []*corev1.Pod{bound("w0")},
			want{3, 3, 1, []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "Provisioning=True/FitsExistingCapacity"},
				[]string{v1beta1.ConditionFulfilled, v1beta1.ConditionExpired}, "all 2 pod(s) fit"}},
		{"filled", buffer("b", oneShot("cpu", 2, nil), nil), []*corev1.Pod{bound("w0"), bound("w1")},
			want{2, 2, 2, []string{"Fulfilled=True/BufferFilled", "Provisioning=False/BufferFilled"}, []string{v1beta1.ConditionExpired}, "all 2 chunk(s) consumed"}},
		{"expired", withStatus(buffer("b", oneShot("cpu", 3, ptr.To[int32](60)), nil), readySince(now.Add(-time.Hour), 1)), nil,
			want{1, 1, 1, []string{"Expired=True/FillDeadlineExceeded", "Provisioning=False/FillDeadlineExceeded"}, []string{v1beta1.ConditionFulfilled},
				"1 of 3 chunk(s) consumed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []*unstructured.Unstructured{tc.buf}, kube, []*nodegroups.Info{cpuGroup}, n1)
			e.in.Pods = tc.pods
			out, err := e.proc.Run(e.ctx, e.in)
			if err != nil {
				t.Fatal(err)
			}
			st := out.Buffers[0].Status(nil, "")
			if got := [3]int32{ptr.Deref(st.Replicas, -1), ptr.Deref(st.ReadyReplicas, -1), ptr.Deref(st.ConsumedReplicas, -1)}; got != [3]int32{tc.want.replicas, tc.want.ready, tc.want.consumed} {
				t.Errorf("replicas/ready/consumed %v, want %v", got, [3]int32{tc.want.replicas, tc.want.ready, tc.want.consumed})
			}
			for _, c := range tc.want.conds {
				typ, rest, _ := strings.Cut(c, "=")
				status, reason, _ := strings.Cut(rest, "/")
				got := apimeta.FindStatusCondition(st.Conditions, typ)
				if got == nil || string(got.Status) != status || got.Reason != reason {
					t.Errorf("condition %s: got %+v", c, got)
				}
			}
			for _, typ := range tc.want.absent {
				if apimeta.FindStatusCondition(st.Conditions, typ) != nil {
					t.Errorf("condition %s set", typ)
				}
			}
			if c := apimeta.FindStatusCondition(st.Conditions, v1beta1.ConditionProvisioning); c == nil || !strings.Contains(c.Message, tc.want.msg) {
				t.Errorf("Provisioning %+v, want a message with %q", c, tc.want.msg)
			}

			// The next pass reads the status back (a restart: a new
			// manager) and writes the same status again.
			obj := withStatus(tc.buf.DeepCopy(), st)
			e2 := newEnv(t, []*unstructured.Unstructured{obj}, kube, []*nodegroups.Info{cpuGroup}, n1)
			e2.in.Pods, e2.in.Now = tc.pods, now.Add(time.Second)
			out2, err := e2.proc.Run(e2.ctx, e2.in)
			if err != nil {
				t.Fatal(err)
			}
			b := out2.Buffers[0]
			if st2 := b.Status(nil, ""); !apimeta.IsStatusConditionTrue(st2.Conditions, v1beta1.ConditionReadyForProvisioning) ||
				ptr.Deref(st2.ConsumedReplicas, -1) != tc.want.consumed || !equality.Semantic.DeepEqual(st2, withTimes(st, st2)) {
				t.Errorf("the second pass changed the status:\n%+v\n%+v", st, st2)
			}
		})
	}
}

// withTimes is st with the condition times of other (SetStatusCondition
// stamps new conditions with the clock).
func withTimes(st, other v1beta1.CapacityBufferStatus) v1beta1.CapacityBufferStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		if c := apimeta.FindStatusCondition(other.Conditions, st.Conditions[i].Type); c != nil {
			st.Conditions[i].LastTransitionTime = c.LastTransitionTime
		}
	}
	return st
}

// A stale copy of the buffer (the status write not yet seen) after its
// pods left neither lowers what was consumed nor revives it once ended.
func TestOneShotLatches(t *testing.T) {
	kube := []runtime.Object{labelled("cpu", builder.Pod(ns, "x").CPU("1").Obj(), map[string]string{"job": "train"})}
	n1 := builder.Node("n1").CPU("16").Memory("64Gi").Obj()
	cpuGroup := group("cpu", builder.Node(template.PlaceholderNodeName).CPU("4").Memory("64Gi").Obj())
	bound := func(name string) *corev1.Pod {
		return boundAt(builder.Pod(ns, name).CPU("1").Label("job", "train").Node("n1").Obj(), now)
	}
	for _, tc := range []struct {
		name         string
		first, again string
		pods         []*corev1.Pod
	}{
		{"partly filled", "b 1 1+0", "b 1 1+0", []*corev1.Pod{bound("w0")}},
		{"filled", "b 0 2+0 Fulfilled", "b 0 2+0 Fulfilled", []*corev1.Pod{bound("w0"), bound("w1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []*unstructured.Unstructured{buffer("b", oneShot("cpu", 2, nil), nil)}, kube, []*nodegroups.Info{cpuGroup}, n1)
			e.in.Pods = tc.pods
			out, err := e.proc.Run(e.ctx, e.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := shots(out); got != tc.first {
				t.Errorf("first pass %q, want %q", got, tc.first)
			}
			// The same manager, a new pass (a fresh snapshot).
			e2 := newEnv(t, []*unstructured.Unstructured{buffer("b", oneShot("cpu", 2, nil), nil)}, kube, []*nodegroups.Info{cpuGroup}, n1)
			e2.in.Pods, e2.in.Now = nil, now.Add(time.Minute)
			if out, err = e.proc.Run(e2.ctx, e2.in); err != nil {
				t.Fatal(err)
			}
			if got := shots(out); got != tc.again {
				t.Errorf("pass after the pods left %q, want %q", got, tc.again)
			}
		})
	}
}
