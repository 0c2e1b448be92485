package buffers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var podsResource = schema.GroupResource{Resource: "pods"}

// fakeAdmission answers dry runs with verdict and keeps the pods asked.
type fakeAdmission struct {
	verdict error
	asked   []*corev1.Pod
}

func (f *fakeAdmission) DryRunCreate(_ context.Context, pod *corev1.Pod) error {
	f.asked = append(f.asked, pod)
	return f.verdict
}

var (
	denied  = apierrors.NewForbidden(podsResource, "", errors.New("ValidatingAdmissionPolicy 'no-gpu-pods' with binding 'no-gpu-pods-binding' denied request: GPU pods are not allowed here"))
	noDry   = apierrors.NewBadRequest(`admission webhook "audit.example.com" does not support dry run`)
	quota   = apierrors.NewForbidden(podsResource, "", errors.New("exceeded quota: team-pods, requested: pods=1, used: pods=4, limited: pods=4"))
	down    = apierrors.NewInternalError(errors.New(`failed calling webhook "audit.example.com": connection refused`))
	noRBAC  = apierrors.NewForbidden(podsResource, "", errors.New(`user "system:serviceaccount:kube-system:dra-autoscaler" cannot create resource "pods" in API group "" in the namespace "team"`))
	goingNS = func() error {
		err := apierrors.NewForbidden(podsResource, "", errors.New("unable to create new content in namespace team because it is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace team is being terminated"}}
		return err
	}()
	errLost = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
)

// A buffer's pod is judged by admission before it holds anything; the
// verdict is kept per buffer generation and template version for
// AdmissionRecheck, asked again after it, and a dry run that fails keeps
// the last verdict or, without one, holds nothing.
func TestAdmission(t *testing.T) {
	cpuPod := builder.Pod(ns, "x").CPU("1").Memory("1Gi").Obj()
	n1 := builder.Node("n1").CPU("4").Memory("64Gi").Obj()
	type pass struct {
		after   time.Duration // since the first pass
		verdict error
		touch   bool // the PodTemplate changed before this pass
		asked   int  // dry runs so far
		held    int32
		reason  string // ReadyForProvisioning=False reason, "" when ready
		msg     string // part of the buffer's message or quota reason
	}
	for _, tc := range []struct {
		name   string
		passes []pass
	}{
		{"admitted, kept, asked again after the period", []pass{
			{0, nil, false, 1, 2, "", ""},
			{time.Minute, denied, false, 1, 2, "", ""},
			{buffers.AdmissionRecheck, denied, false, 2, 0, buffers.ReasonPodRejected, "ValidatingAdmissionPolicy 'no-gpu-pods'"},
		}},
		{"rejected by a policy, then the policy is gone", []pass{
			{0, denied, false, 1, 0, buffers.ReasonPodRejected, "denied request: GPU pods are not allowed here"},
			{time.Minute, nil, false, 1, 0, buffers.ReasonPodRejected, "no-gpu-pods"},
			{buffers.AdmissionRecheck, nil, false, 2, 2, "", ""},
		}},
		{"a changed template is judged at once", []pass{
			{0, nil, false, 1, 2, "", ""},
			{time.Second, denied, true, 2, 0, buffers.ReasonPodRejected, "no-gpu-pods"},
		}},
		{"a webhook that cannot dry-run rejects", []pass{
			{0, noDry, false, 1, 0, buffers.ReasonPodRejected, "does not support dry run"},
		}},
		{"quota is room, not policy: asked every pass", []pass{
			{0, quota, false, 1, 0, "", "exceeded quota: team-pods"},
			{time.Second, nil, false, 2, 2, "", ""},
		}},
		{"no answer and no verdict: nothing held", []pass{
			{0, down, false, 1, 0, buffers.ReasonAdmissionUnknown, "connection refused"},
			{time.Second, errLost, false, 2, 0, buffers.ReasonAdmissionUnknown, "connection refused"},
			{2 * time.Second, nil, false, 3, 2, "", ""},
		}},
		{"the autoscaler's own RBAC says nothing about the pod", []pass{
			{0, noRBAC, false, 1, 0, buffers.ReasonAdmissionUnknown, `cannot create resource "pods"`},
		}},
		{"a namespace being deleted holds nothing, and is no verdict", []pass{
			{0, goingNS, false, 1, 0, buffers.ReasonAdmissionUnknown, "namespace is being deleted"},
			{time.Second, nil, false, 2, 2, "", ""},
		}},
		{"no answer keeps the last verdict", []pass{
			{0, nil, false, 1, 2, "", ""},
			{buffers.AdmissionRecheck, down, false, 2, 2, "", ""},
			{buffers.AdmissionRecheck + time.Second, denied, false, 3, 0, buffers.ReasonPodRejected, "no-gpu-pods"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := podTemplate("cpu", cpuPod)
			tmpl.ResourceVersion = "1"
			tmpl.Template.Labels = map[string]string{"app": "web"}
			e := newEnv(t, []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 2), nil)}, []runtime.Object{tmpl},
				[]*nodegroups.Info{}, n1)
			api := &fakeAdmission{}
			e.proc.WithAdmission(api)
			for i, p := range tc.passes {
				api.verdict = p.verdict
				if p.touch {
					tmpl.ResourceVersion = fmt.Sprint(i + 10)
				}
				in := e.in
				in.Now = now.Add(p.after)
				e.runner.Snapshot().Fork()
				out, err := e.proc.Run(e.ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.runner.Snapshot().Revert(); err != nil {
					t.Fatal(err)
				}
				b := out.Buffers[0]
				if len(api.asked) != p.asked || b.Replicas != p.held || b.NotReady != p.reason || len(b.Pods) != int(p.held) {
					t.Errorf("pass %d: %d dry runs, %d held (%d pods), not ready %q; want %d, %d, %q (%s)",
						i, len(api.asked), b.Replicas, len(b.Pods), b.NotReady, p.asked, p.held, p.reason, b.Message)
				}
				if !strings.Contains(b.Message+b.Quota, p.msg) {
					t.Errorf("pass %d: message %q, quota %q; want one with %q", i, b.Message, b.Quota, p.msg)
				}
			}
			// The pod judged is the template's, in the buffer's
			// namespace, under a generated name, with nothing of ours.
			pod := api.asked[0]
			if pod.Namespace != ns || pod.Name != "" || !strings.HasPrefix(pod.GenerateName, "capacitybuffer-b-") || pod.Labels["app"] != "web" ||
				len(pod.OwnerReferences) != 0 || pod.Annotations[buffers.PodAnnotation] != "" || pod.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
				t.Errorf("dry-run pod %+v is not the template's pod", pod)
			}
			pod.Labels["app"] = "changed"
			if tmpl.Template.Labels["app"] != "web" {
				t.Error("the dry-run pod shares the template's labels")
			}
		})
	}
}

// DryRun creates the pod with dryRun=All, the API server's only way to
// run admission without storing anything.
func TestDryRunCreate(t *testing.T) {
	client := fake.NewClientset()
	var opts []string
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		opts = a.(clienttesting.CreateActionImpl).CreateOptions.DryRun
		return true, nil, denied
	})
	err := buffers.DryRun{Client: client}.DryRunCreate(context.Background(), builder.Pod(ns, "p").Obj())
	if !errors.Is(err, denied) && (err == nil || err.Error() != denied.Error()) {
		t.Errorf("error %v, want the API server's", err)
	}
	if len(opts) != 1 || opts[0] != "All" {
		t.Errorf("dryRun %q, want [All]", opts)
	}
}

// quotaForbidden is a Source whose quota listing RBAC refuses in one
// namespace.
type quotaForbidden struct {
	*buffers.Listers
	ns string
}

func (q quotaForbidden) Quotas(namespace string) ([]*corev1.ResourceQuota, error) {
	if namespace == q.ns {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "",
			fmt.Errorf(`User "system:serviceaccount:kube-system:cluster-autoscaler" cannot list resource "resourcequotas" in API group "" in the namespace %q`, namespace))
	}
	return q.Listers.Quotas(namespace)
}

// A namespace whose ResourceQuotas cannot be listed holds no buffer
// capacity in that pass (never unlimited), and says why; another
// namespace's buffer is served as usual.
func TestQuotaListingFails(t *testing.T) {
	cpuPod := builder.Pod(ns, "x").CPU("1").Memory("1Gi").Obj()
	other := podTemplate("cpu", cpuPod)
	other.Namespace = "other"
	elsewhere := buffer("b", fromTemplate("cpu", 2), nil)
	elsewhere.SetNamespace("other")
	elsewhere.SetUID("uid-other-b")
	e := newEnv(t, []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 2), nil), elsewhere},
		[]runtime.Object{podTemplate("cpu", cpuPod), other}, nil, builder.Node("n1").CPU("8").Memory("64Gi").Obj())
	e.proc = buffers.New(quotaForbidden{e.src, ns}, nil, nil)
	out, err := e.proc.Run(e.ctx, e.in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*buffers.Buffer{}
	for _, b := range out.Buffers {
		got[b.Key()] = b
	}
	denied := got[ns+"/b"]
	if denied.Replicas != 0 || len(denied.Pods) != 0 || !strings.Contains(denied.QuotaErr, "cannot list resource \"resourcequotas\"") {
		t.Errorf("buffer in %s: %d held, %d pods, quota error %q; want none held and the refusal", ns, denied.Replicas, len(denied.Pods), denied.QuotaErr)
	}
	if b := got["other/b"]; b.Replicas != 2 || b.Fit != 2 || b.QuotaErr != "" {
		t.Errorf("buffer in other: %d held, %d fit, %q; want 2 and 2", b.Replicas, b.Fit, b.QuotaErr)
	}
}
