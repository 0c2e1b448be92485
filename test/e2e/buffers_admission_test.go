package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// labelledTemplate stores a 3-CPU pod with labels as a PodTemplate of
// namespace ns.
func (s *bufferScenario) labelledTemplate(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	pod := s.pod("x").CPU("3").Obj()
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}}
	if _, err := s.c.Client.CoreV1().PodTemplates(ns).Create(s.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("PodTemplate %s/%s: %v", ns, name, err)
	}
}

// bufferIn creates a buffer of replicas pods of template in namespace ns.
func (s *bufferScenario) bufferIn(t *testing.T, ns, name, template string, replicas int32) {
	t.Helper()
	b := &v1beta1.CapacityBuffer{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: v1beta1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: template}, Replicas: ptr.To(replicas)}}
	data, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if _, err := s.dyn.Resource(v1beta1.Resource).Namespace(ns).Create(s.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating buffer %s/%s: %v", ns, name, err)
	}
}

// waitBufferIn is waitBuffer for a buffer of namespace ns.
func (s *bufferScenario) waitBufferIn(t *testing.T, ns, name, what string, timeout time.Duration, ok func(*v1beta1.CapacityBuffer) bool) *v1beta1.CapacityBuffer {
	t.Helper()
	var got *v1beta1.CapacityBuffer
	framework.Eventually(s.ctx, t, timeout, ns+"/"+name+": "+what, func(ctx context.Context) (bool, string, error) {
		u, err := s.dyn.Resource(v1beta1.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if got, err = v1beta1.FromUnstructured(u); err != nil {
			return false, "", err
		}
		return ok(got), fmt.Sprintf("replicas=%v conditions=%+v", ptr.Deref(got.Status.Replicas, -1), got.Status.Conditions), nil
	})
	return got
}

func conditionMessage(b *v1beta1.CapacityBuffer, typ string) string {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, typ); c != nil {
		return c.Message
	}
	return ""
}

// denyPolicy makes a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1)
// that denies pods labelled tier=forbidden in the test's namespace, with
// its binding, and waits until the API server enforces it (a dry-run pod
// refused). It returns the policy's name.
func (s *bufferScenario) denyPolicy(t *testing.T) string {
	t.Helper()
	name := s.ns + "-no-forbidden-tier"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.metadata.labels) || !('tier' in object.metadata.labels) || object.metadata.labels['tier'] != 'forbidden'",
				Message:    "pods of tier forbidden may not run in this namespace",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": s.ns}}},
		},
	}
	api := s.c.Client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(s.ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("ValidatingAdmissionPolicy: %v", err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(s.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("ValidatingAdmissionPolicyBinding: %v", err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	probe := s.pod("probe").Label("tier", "forbidden").Obj()
	probe.UID = ""
	framework.Eventually(s.ctx, t, time.Minute, "the policy enforced", func(ctx context.Context) (bool, string, error) {
		_, err := s.c.Client.CoreV1().Pods(s.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), name), fmt.Sprint(err), nil
	})
	return name
}

// A buffer whose pod a ValidatingAdmissionPolicy rejects holds nothing:
// ReadyForProvisioning=False naming the policy, a Warning event, no node;
// beside it, an admitted buffer of the same shape gets its node, so the
// one node there is the admitted buffer's alone.
func TestCapacityBufferRejectedByAdmissionPolicy(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 4)
	policy := s.denyPolicy(t)
	s.labelledTemplate(t, s.ns, "allowed", map[string]string{"tier": "web"})
	s.labelledTemplate(t, s.ns, "forbidden", map[string]string{"tier": "forbidden"})
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.bufferIn(t, s.ns, "denied", "forbidden", 1)
	s.bufferIn(t, s.ns, "admitted", "allowed", 1)

	b := s.waitBuffer(t, "denied", "rejected by admission", time.Minute,
		condition(v1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, buffers.ReasonPodRejected))
	if msg := conditionMessage(b, v1beta1.ConditionReadyForProvisioning); !strings.Contains(msg, "ValidatingAdmissionPolicy '"+policy+"'") ||
		!strings.Contains(msg, "pods of tier forbidden may not run") {
		t.Errorf("ReadyForProvisioning message %q does not name the policy and its message", msg)
	}
	if b.Status.Replicas != nil && *b.Status.Replicas != 0 {
		t.Errorf("the rejected buffer holds %d replicas", *b.Status.Replicas)
	}
	t.Logf("rejected buffer: %s", conditionMessage(b, v1beta1.ConditionReadyForProvisioning))
	s.waitBuffer(t, "admitted", "1 pod held", 2*time.Minute, holding(1, buffers.ReasonFitsExisting))
	s.waitNodes(t, g, 1, time.Minute)
	s.stayNodes(t, g, 1, 6*time.Second)
	s.waitBuffer(t, "denied", "still rejected", 10*time.Second,
		condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonNotReady))
	framework.Eventually(s.ctx, t, 30*time.Second, "a Warning event naming the policy", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventMessages(ctx, s.c, s.ns, "denied", buffers.ReasonPodRejected)
		return len(msgs) > 0 && strings.Contains(msgs[0], policy), fmt.Sprintf("%q", msgs), err
	})
}

// rbacDoc reads the first object of kind in a YAML file of the repository
// (documents split by ---).
func rbacDoc[T any](t *testing.T, c *framework.Cluster, file, kind string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(c.BinDir)), file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != kind {
			continue
		}
		out := new(T)
		if err := yaml.Unmarshal([]byte(doc), out); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return out
	}
	t.Fatalf("no %s in %s", kind, file)
	return nil
}

// restrictedAutoscaler makes a ServiceAccount of the test's namespace
// with the install's rules (deploy/base and deploy/kwok) except the one
// that lists ResourceQuotas everywhere, plus list on them in the
// namespaces readable only, and returns a kubeconfig authenticating as it
// (a TokenRequest token: real RBAC).
func (s *bufferScenario) restrictedAutoscaler(t *testing.T, readable ...string) string {
	t.Helper()
	const sa = "restricted-autoscaler"
	ctx, rbac := s.ctx, s.c.Client.RbacV1()
	if _, err := s.c.Client.CoreV1().ServiceAccounts(s.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: s.ns}}
	base := rbacDoc[rbacv1.ClusterRole](t, s.c, "deploy/base/clusterrole.yaml", "ClusterRole")
	var rules []rbacv1.PolicyRule
	dropped := 0
	for _, r := range base.Rules {
		if len(r.Resources) == 1 && r.Resources[0] == "resourcequotas" {
			dropped++
			continue
		}
		rules = append(rules, r)
	}
	if dropped != 1 {
		t.Fatalf("%d resourcequotas rules in deploy/base/clusterrole.yaml, want 1", dropped)
	}
	kwokRole := rbacDoc[rbacv1.ClusterRole](t, s.c, "deploy/kwok/rbac-kwok.yaml", "ClusterRole")
	for i, r := range [][]rbacv1.PolicyRule{rules, kwokRole.Rules} {
		name := fmt.Sprintf("%s-autoscaler-%d", s.ns, i)
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: r}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	grant := func(ns, name string, rules ...rbacv1.PolicyRule) {
		s.c.Create(ctx, t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	// The kwok provider's instance records and the autoscaler's own
	// objects, in the test's namespace (--namespace).
	grant(s.ns, "autoscaler-own", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
	for _, ns := range readable {
		grant(ns, "autoscaler-quotas", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"list"}})
	}
	return s.c.ServiceAccountKubeconfig(ctx, t, s.ns, sa)
}

// A buffer in a namespace whose ResourceQuotas the autoscaler may not
// list (its RBAC grants list in another namespace only) holds nothing:
// LimitedByQuotas and Provisioning say the quotas could not be read, a
// Warning event tells it, no node is added for it; the buffer of the
// namespace it may read gets its node, so the rest of its rights work.
func TestCapacityBufferQuotasUnreadable(t *testing.T) {
	s := newBufferScenario(t)
	_, other := s.c.Namespace(t)
	g := s.cpuGroup("cpu4", 4)
	s.labelledTemplate(t, s.ns, "web", nil)
	s.labelledTemplate(t, other, "web", nil)
	// A quota the autoscaler cannot see, with room it must not assume.
	s.c.Create(s.ctx, t, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}})
	kubeconfig := s.restrictedAutoscaler(t, s.ns)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}, StateNamespace: s.ns},
		"--kubeconfig="+kubeconfig, "--namespace="+s.ns, "--write-status-configmap=false")
	s.bufferIn(t, other, "unreadable", "web", 1)
	s.bufferIn(t, s.ns, "readable", "web", 1)

	b := s.waitBufferIn(t, other, "unreadable", "no capacity: quotas unreadable", time.Minute,
		condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonQuotaListFailed))
	if !condition(v1beta1.ConditionLimitedByQuotas, metav1.ConditionTrue, buffers.ReasonQuotaListFailed)(b) || ptr.Deref(b.Status.Replicas, -1) != 0 {
		t.Errorf("status %+v: want LimitedByQuotas=True/QuotaListFailed and 0 replicas", b.Status)
	}
	if msg := conditionMessage(b, v1beta1.ConditionProvisioning); !containsAll(msg, "resourcequotas", "forbidden", other) {
		t.Errorf("Provisioning message %q does not say the quotas of %s could not be listed", msg, other)
	}
	t.Logf("unreadable buffer: %s", conditionMessage(b, v1beta1.ConditionProvisioning))
	s.waitBuffer(t, "readable", "1 pod held", 2*time.Minute, holding(1, buffers.ReasonFitsExisting))
	s.waitNodes(t, g, 1, time.Minute)
	s.stayNodes(t, g, 1, 6*time.Second)
	s.waitBufferIn(t, other, "unreadable", "still nothing held", 10*time.Second,
		condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonQuotaListFailed))
	framework.Eventually(s.ctx, t, 30*time.Second, "a Warning QuotaListFailed event", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventMessages(ctx, s.c, other, "unreadable", buffers.ReasonQuotaListFailed)
		return len(msgs) > 0, fmt.Sprintf("%q", msgs), err
	})
	// Only the quota listing was refused: the rest of the install's
	// rules are enough.
	for _, line := range strings.Split(grepLines(a.Log(), "orbidden"), "\n") {
		if line != "" && !strings.Contains(line, "resourcequotas") {
			t.Errorf("forbidden beyond the quotas: %s", line)
		}
	}
}
