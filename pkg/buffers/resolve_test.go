package buffers

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
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

// workloadSource is a Source whose scalableRefs all resolve to err.
type workloadSource struct {
	Listers
	err error
}

func (s *workloadSource) Workload(string, v1beta1.ScalableRef) (*Workload, error) { return nil, s.err }

// Why a scalableRef does not resolve is the ReadyForProvisioning reason.
func TestResolveScalableReasons(t *testing.T) {
	ref := v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "w"}
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	obj := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec: v1beta1.CapacityBufferSpec{ScalableRef: &ref, Replicas: ptr.To[int32](1)}}
	for _, tc := range []struct {
		err    error
		reason string
		msg    string
	}{
		{&UnsupportedKindError{Ref: ref, Why: "it has no scale subresource"}, ReasonScalableNotSupported, "no scale subresource"},
		{&NoPodsError{Ref: ref, Selector: "app=w"}, ReasonScalableNoPods, `"app=w"`},
		{apierrors.NewNotFound(gr, "w"), ReasonScalableNotFound, "Widget ns/w not found"},
		{apierrors.NewForbidden(gr, "w", errors.New("RBAC")), ReasonScalableForbidden, "grant get"},
		{errors.New("connection refused"), ReasonScalableNotFound, "connection refused"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			b := resolve(obj, &workloadSource{err: tc.err}, time.Now())
			if b.NotReady != tc.reason || !strings.Contains(b.Message, tc.msg) {
				t.Errorf("not ready %s: %q; want %s with %q", b.NotReady, b.Message, tc.reason, tc.msg)
			}
		})
	}
}

// Only a pod every group's template rejects (or that has no group at all)
// is infeasible; a limit of the moment is not.
func TestInfeasible(t *testing.T) {
	fit := plan.GroupReason{Group: "cpu", Reason: "NodeResourcesFit", Message: "Insufficient cpu"}
	dra := plan.GroupReason{Group: "gpu", Reason: "DynamicResources", Message: "cannot allocate all claims"}
	atMax := plan.GroupReason{Group: "big", Reason: "node-group-max-size", Message: "room for 0 more node(s)"}
	for _, tc := range []struct {
		name     string
		rs       []plan.GroupReason
		noGroups bool
		want     bool
	}{
		{"every template rejects it", []plan.GroupReason{fit, dra}, false, true},
		{"one group at its max", []plan.GroupReason{fit, atMax}, false, false},
		{"no group at all", nil, true, true},
		{"no reasons while groups exist", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := infeasible(tc.rs, tc.noGroups); got != tc.want {
				t.Errorf("infeasible = %v, want %v", got, tc.want)
			}
		})
	}
}
