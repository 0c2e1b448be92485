package drainability

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func annotated(p *corev1.Pod, k, v string) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
	return p
}

func withVolume(p *corev1.Pod, v corev1.Volume) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, v)
	return p
}

func TestCheck(t *testing.T) {
	rs := func(ns, name string) *corev1.Pod {
		return builder.Pod(ns, name).OwnedBy("apps/v1", "ReplicaSet", "rs").Node("n1").Obj()
	}
	ds := builder.DaemonSet("kube-system", "agent").Obj()
	emptyDir := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	memDir := corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}
	strict := Rules{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true}
	// The owner lookup knows ReplicaSet "rs" only, and cannot tell for Jobs.
	owners := strict
	owners.Owners = func(_ string, ref *metav1.OwnerReference) (bool, bool) {
		if ref.Kind == "Job" {
			return false, false
		}
		return ref.Kind == "ReplicaSet" && ref.Name == "rs", true
	}
	orphan := builder.Pod("app", "p").OwnedBy("apps/v1", "ReplicaSet", "gone").Node("n1").Obj()
	ofJob := builder.Pod("app", "p").OwnedBy("batch/v1", "Job", "j").Node("n1").Obj()
	custom := strict
	custom.SkipNodesWithCustomControllerPods = true
	tests := []struct {
		name    string
		rules   Rules
		pod     *corev1.Pod
		hasPDB  bool
		verdict Verdict
		reason  string
		warning bool
	}{
		{name: "replicated pod moves", rules: strict, pod: rs("app", "p"), verdict: Moves},
		{name: "pod whose controller exists moves", rules: owners, pod: rs("app", "p"), verdict: Moves},
		{name: "pod whose controller is gone blocks", rules: owners, pod: orphan, verdict: Blocks, reason: ControllerNotFound},
		{name: "controller unknown to the lookup is not judged", rules: owners, pod: ofJob, verdict: Moves},
		{name: "without a lookup a gone controller is not seen", rules: strict, pod: orphan, verdict: Moves},
		{name: "pod without controller blocks", rules: strict, pod: builder.Pod("app", "p").Node("n1").Obj(), verdict: Blocks, reason: NotReplicated},
		{name: "DaemonSet pod stays", rules: strict, pod: builder.PodFromDaemonSet(ds, "agent-x", "n1"), verdict: Stays},
		{name: "mirror pod stays", rules: strict, pod: annotated(builder.Pod("kube-system", "etcd").Node("n1").Obj(), corev1.MirrorPodAnnotationKey, "x"), verdict: Stays},
		{name: "finished pod stays", rules: strict, pod: func() *corev1.Pod {
			p := builder.Pod("app", "job").Node("n1").Obj()
			p.Status.Phase = corev1.PodSucceeded
			return p
		}(), verdict: Stays},
		{name: "safe-to-evict true moves a pod without controller", rules: strict, pod: annotated(builder.Pod("app", "p").Node("n1").Obj(), SafeToEvictAnnotation, "true"), verdict: Moves},
		{name: "safe-to-evict false blocks", rules: strict, pod: annotated(rs("app", "p"), SafeToEvictAnnotation, "false"), verdict: Blocks, reason: NotSafeToEvict},
		{name: "malformed safe-to-evict blocks with a warning", rules: strict, pod: annotated(rs("app", "p"), SafeToEvictAnnotation, "yes please"), verdict: Blocks, reason: NotSafeToEvict, warning: true},
		{name: "kube-system pod without PDB blocks", rules: strict, pod: rs("kube-system", "dns"), verdict: Blocks, reason: UnmovableKubeSystemPod},
		{name: "kube-system pod with PDB moves", rules: strict, pod: rs("kube-system", "dns"), hasPDB: true, verdict: Moves},
		{name: "kube-system pod moves when allowed", rules: Rules{}, pod: rs("kube-system", "dns"), verdict: Moves},
		{name: "emptyDir blocks", rules: strict, pod: withVolume(rs("app", "p"), emptyDir), verdict: Blocks, reason: LocalStorageRequested},
		{name: "memory emptyDir is not local storage", rules: strict, pod: withVolume(rs("app", "p"), memDir), verdict: Moves},
		{name: "emptyDir declared safe", rules: strict, pod: annotated(withVolume(rs("app", "p"), emptyDir), SafeToEvictLocalVolumesAnnotation, "other, scratch"), verdict: Moves},
		{name: "custom controller blocks", rules: custom, pod: builder.Pod("app", "p").OwnedBy("ray.io/v1", "RayCluster", "r").Node("n1").Obj(), verdict: Blocks, reason: NotReplicated},
		{name: "a kind of another group is custom", rules: custom, pod: builder.Pod("app", "p").OwnedBy("example.com/v1", "ReplicaSet", "r").Node("n1").Obj(), verdict: Blocks, reason: NotReplicated},
		{name: "custom controller moves when allowed", rules: strict, pod: builder.Pod("app", "p").OwnedBy("ray.io/v1", "RayCluster", "r").Node("n1").Obj(), verdict: Moves},
		{name: "ReplicaSet is built in", rules: custom, pod: rs("app", "p"), verdict: Moves},
		{name: "Job is built in", rules: custom, pod: ofJob, verdict: Moves},
		{name: "StatefulSet is built in", rules: custom, pod: builder.Pod("app", "p").OwnedBy("apps/v1", "StatefulSet", "s").Node("n1").Obj(), verdict: Moves},
		{name: "ReplicationController is built in", rules: custom, pod: builder.Pod("app", "p").OwnedBy("v1", "ReplicationController", "rc").Node("n1").Obj(), verdict: Moves},
		{name: "emptyDir allowed by flag", rules: Rules{SkipNodesWithSystemPods: true}, pod: withVolume(rs("app", "p"), emptyDir), verdict: Moves},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.rules.Check(tc.pod, tc.hasPDB)
			if got.Verdict != tc.verdict || got.Reason != tc.reason || (got.Warning != "") != tc.warning {
				t.Fatalf("got %+v, want verdict %v reason %q warning %v", got, tc.verdict, tc.reason, tc.warning)
			}
		})
	}
}

func pdb(ns, name string, allowed int32, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func TestPDBs(t *testing.T) {
	web := func(name string) *corev1.Pod { return builder.Pod("app", name).Label("app", "web").Obj() }
	a, b, c := web("a"), web("b"), web("c")
	other := builder.Pod("other", "a").Label("app", "web").Obj()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	pdbs := NewPDBs([]*policyv1.PodDisruptionBudget{
		pdb("app", "web", 2, sel),
		pdb("app", "nobody", 0, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nobody"}}),
		pdb("app", "broken", 0, bad),
		pdb("app", "nil", 0, nil),
	}, []*corev1.Pod{a, b, c, other})
	reasons := map[string]string{}
	for _, p := range pdbs.Problems {
		reasons[p.PDB.Name] = p.Reason
	}
	if reasons["nobody"] != "SelectsNoPods" || reasons["broken"] != "InvalidSelector" || reasons["nil"] != "SelectsNoPods" || len(reasons) != 3 {
		t.Fatalf("problems %v", reasons)
	}
	if !pdbs.Covered(a) || pdbs.Covered(other) {
		t.Fatal("coverage: a must be covered, a pod of another namespace not")
	}
	if ok, _, _ := pdbs.Take([]*corev1.Pod{a, b, c}); ok {
		t.Fatal("three pods taken from a budget of two")
	}
	if ok, _, _ := pdbs.Take([]*corev1.Pod{a}); !ok {
		t.Fatal("a refused though the failed Take spent nothing")
	}
	ok, blocked, detail := pdbs.Take([]*corev1.Pod{b, c})
	if ok || blocked != c || !strings.Contains(detail, "app/web") {
		t.Fatalf("second Take: ok %v blocked %v detail %q; one disruption was left", ok, blocked, detail)
	}
	pdbs.Give([]*corev1.Pod{a})
	if ok, _, _ := pdbs.Take([]*corev1.Pod{b, c}); !ok {
		t.Fatal("room given back not usable")
	}
}

func TestGangs(t *testing.T) {
	group := func(name string, minCount int32, mode *schedulingv1beta1.DisruptionMode) *schedulingv1beta1.PodGroup {
		pg := builder.PodGroup("ml", name).MinCount(minCount).Obj()
		pg.Spec.DisruptionMode = mode
		return pg
	}
	single := &schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}
	all := &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	member := func(g, name, node string) *corev1.Pod { return builder.Pod("ml", name).PodGroup(g).Node(node).Obj() }
	// train: 4 members, 3 on n1 and 1 on n2, minCount 4. spare: 3
	// members, minCount 2, mode Single. strict: same, mode All.
	pods := []*corev1.Pod{
		member("train", "t0", "n1"), member("train", "t1", "n1"), member("train", "t2", "n1"), member("train", "t3", "n2"),
		member("spare", "s0", "n1"), member("spare", "s1", "n2"), member("spare", "s2", "n3"),
		member("strict", "x0", "n1"), member("strict", "x1", "n2"), member("strict", "x2", "n3"),
		member("basic", "b0", "n2"),
		member("unset", "u0", "n1"), member("unset", "u1", "n2"),
		member("basicall", "a0", "n1"), member("basicall", "a1", "n2"),
	}
	basic := builder.PodGroup("ml", "basic").Obj()
	basicAll := builder.PodGroup("ml", "basicall").Disruption(true).Obj()
	gangs := NewGangs([]*schedulingv1beta1.PodGroup{group("train", 4, single), group("spare", 2, single), group("strict", 2, all), basic,
		group("unset", 1, nil), basicAll}, nil, pods)
	tests := []struct {
		name     string
		leaving  []*corev1.Pod
		removing []string
		blocked  string
	}{
		{name: "one member of a full gang", leaving: pods[3:4], removing: []string{"n2"}, blocked: "ml/train"},
		{name: "the whole gang moves together", leaving: pods[0:4], removing: []string{"n1", "n2"}},
		{name: "a spare member in mode Single", leaving: pods[5:6], removing: []string{"n2"}},
		{name: "two of three in mode Single leaves too few", leaving: pods[4:6], removing: []string{"n1", "n2"}, blocked: "ml/spare"},
		{name: "mode All never loses one", leaving: pods[8:9], removing: []string{"n2"}, blocked: "ml/strict"},
		{name: "a basic group is no gang", leaving: pods[10:11], removing: []string{"n2"}},
		{name: "a gang with no mode counts as All", leaving: pods[12:13], removing: []string{"n2"}, blocked: "ml/unset"},
		{name: "a basic group in mode All never loses one", leaving: pods[14:15], removing: []string{"n2"}, blocked: "ml/basicall"},
		{name: "a basic group in mode All moves whole", leaving: pods[13:15], removing: []string{"n1", "n2"}},
		{name: "pods of no group", leaving: []*corev1.Pod{builder.Pod("ml", "lone").Node("n2").Obj()}, removing: []string{"n2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			removing := map[string]bool{}
			for _, n := range tc.removing {
				removing[n] = true
			}
			got := gangs.Check(tc.leaving, removing)
			if (got == "") != (tc.blocked == "") || !strings.Contains(got, tc.blocked) {
				t.Fatalf("Check = %q, want it to name %q", got, tc.blocked)
			}
		})
	}
}

func TestMemberNodes(t *testing.T) {
	pods := []*corev1.Pod{
		builder.Pod("ml", "a").PodGroup("train").Node("n2").Obj(),
		builder.Pod("ml", "b").PodGroup("train").Node("n1").Obj(),
		builder.Pod("ml", "c").PodGroup("train").Obj(), // pending: on no node
		builder.Pod("ml", "d").PodGroup("other").Node("n3").Obj(),
	}
	g := NewGangs([]*schedulingv1beta1.PodGroup{builder.PodGroup("ml", "train").MinCount(3).Obj()}, nil, pods)
	if got := strings.Join(g.MemberNodes(pods[:1]), ","); got != "n1,n2" {
		t.Fatalf("MemberNodes = %s, want n1,n2", got)
	}
	if got := g.MemberNodes(pods[3:]); len(got) != 0 {
		t.Fatalf("MemberNodes of a pod of no gang = %v", got)
	}
}
