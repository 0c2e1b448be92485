package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const deployNS = "kube-system"

// serviceMonitorCRD stands in for the Prometheus Operator's CRD, so the
// base's ServiceMonitor applies as it does in a cluster that has it.
func serviceMonitorCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "servicemonitors.monitoring.coreos.com"},
		"spec": map[string]any{
			"group": "monitoring.coreos.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
}

// applyDeploy server-side applies the objects of an install (an overlay
// of deploy/ built by kustomize, or the chart rendered) and checks that
// every object of the base, each named name, is there. The Deployment is
// deleted again: this control plane has no kubelet to run its image, and
// its pending pods would be every other test's business.
func applyDeploy(ctx context.Context, t *testing.T, c *framework.Cluster, objs []*unstructured.Unstructured, name string) {
	t.Helper()
	c.Apply(ctx, t, serviceMonitorCRD())
	c.Apply(ctx, t, objs...)
	d, err := c.Client.AppsV1().Deployments(deployNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Deployment not applied: %v", err)
	}
	if *d.Spec.Replicas != 2 || !*d.Spec.Template.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("Deployment as applied: replicas %d, runAsNonRoot %v", *d.Spec.Replicas, *d.Spec.Template.Spec.SecurityContext.RunAsNonRoot)
	}
	if a := d.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]; a != "false" || d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("Deployment as applied: safe-to-evict %q, priorityClassName %q", a, d.Spec.Template.Spec.PriorityClassName)
	}
	bg := metav1.DeletePropagationBackground
	if err := c.Client.AppsV1().Deployments(deployNS).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	for _, check := range []func() error{
		func() error {
			_, err := c.Client.CoreV1().ServiceAccounts(deployNS).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := c.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := c.Client.RbacV1().Roles(deployNS).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := c.Client.PolicyV1().PodDisruptionBudgets(deployNS).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := c.Client.CoreV1().Services(deployNS).Get(ctx, name, metav1.GetOptions{})
			return err
		},
	} {
		if err := check(); err != nil {
			t.Errorf("applied object missing: %v", err)
		}
	}
}

var forbidden = regexp.MustCompile(`(?i)forbidden`)

// The deploy/kwok overlay (the base and the kwok provider's rules) applies,
// and the autoscaler, authenticated as its ServiceAccount (a TokenRequest
// token, real RBAC), scales up with leader
// election and the status ConfigMap in kube-system, then scales down (an
// empty node removed, a node drained by eviction and removed), without a
// single forbidden call. Not parallel: it owns kube-system's lease and status.
func TestDeployManifestsRBAC(t *testing.T) {
	s := newScenario(t)
	applyDeploy(s.ctx, t, s.c, s.c.Kustomize(t, "deploy/kwok"), "cluster-autoscaler")
	scaleUpAndDownAs(t, s, "cluster-autoscaler", "cluster-autoscaler-status",
		"--namespace="+deployNS, "--expander=priority,least-waste", "--write-status-configmap=true",
		"--leader-elect=true", "--leader-elect-resource-namespace="+deployNS, "--leader-elect-resource-name=cluster-autoscaler")
}

// scaleUpAndDownAs runs the autoscaler with args (those of an install)
// authenticated as the ServiceAccount sa of deployNS, a TokenRequest token
// with the install's RBAC, and checks that it becomes leader, scales up
// (a CPU node and a GPU node with its ResourceSlices), writes its status
// ConfigMap statusName in deployNS, then scales down (an empty node removed,
// a node drained by eviction and removed), without a single forbidden
// call.
func scaleUpAndDownAs(t *testing.T, s *scenario, sa, statusName string, args ...string) {
	t.Helper()
	kubeconfig := s.c.ServiceAccountKubeconfig(s.ctx, t, deployNS, sa)
	// A GPU group too: its nodes' ResourceSlices are published with the
	// ServiceAccount's rights as well.
	cpu, gpu := s.cpuGroup("cpu", 4), s.gpuGroup("gpu", 2, 2)
	// The web pod goes to a CPU node, which the scale-down then drains.
	gpu.Template.Taints = []corev1.Taint{{Key: gpuTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	// The kwok provider records its instances in ConfigMaps of its own
	// (docs/kwok-faults.md): not the autoscaler's rights, the test
	// provider's, granted here in the test's namespace.
	s.grantKwokState(t, sa)
	// The install's flags, then the test's: a short lease, quick scale-down.
	args = append(append([]string{"--kubeconfig=" + kubeconfig}, args...),
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s")
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu, gpu}, StateNamespace: s.ns}, args...)
	s.replicaSet(t, "web", s.pod("web").CPU("1").Obj())
	s.c.Create(s.ctx, t, s.pod("infer").CPU("1").Toleration(gpuTaint, "true", corev1.TaintEffectNoSchedule).
		ClaimFromTemplate("accel", s.gpuNICTemplate(t)).Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "pods bound to new nodes", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	framework.Eventually(s.ctx, t, time.Minute, "status ConfigMap lists "+cpu.Name, func(ctx context.Context) (bool, string, error) {
		st, err := status.Read(ctx, s.c.Client, deployNS, statusName)
		if err != nil || st == nil {
			return false, "no status", err
		}
		for _, g := range st.NodeGroups {
			if g.Name == cpu.Name && g.Health.CloudProviderTarget != nil && *g.Health.CloudProviderTarget == 1 {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d groups at %s", len(st.NodeGroups), st.Time), nil
	})
	// Scale-down with the same token: the GPU node, empty once its pod is
	// gone, is removed with its slices; the CPU node is drained (the web
	// pod evicted through the Eviction API) onto a half-busy node, then
	// removed.
	web, _, err := s.appPods(s.ctx, "web")
	if err != nil || len(web) != 1 {
		t.Fatalf("web pods %v (%v)", web, err)
	}
	to := s.existingNode(t, cpu, "to", nil)
	s.c.Create(s.ctx, t, s.pod("busy").CPU("2").Node(to).Obj())
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, "infer", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	s.waitNodeGone(t, web[0].Spec.NodeName, 2*time.Minute)
	s.boundTo(t, "web", to, time.Minute)
	framework.Eventually(s.ctx, t, time.Minute, "the GPU node removed", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, gpu)
		return err == nil && counts[0] == 0, seen, err
	})
	metricAtLeast(t, s, a, "cluster_autoscaler_evicted_pods_total", 1, 10*time.Second)
	if !strings.Contains(a.Log(), "Became leader") {
		t.Error("never became leader")
	}
	if m := forbidden.FindAllString(a.Log(), -1); len(m) > 0 {
		t.Errorf("%d forbidden errors in the log:\n%s", len(m), grepLines(a.Log(), "orbidden"))
	}
}

// The same overlay with one rule dropped (create on nodes, the kwok
// provider's): the autoscaler runs with those roles and its scale-up is
// refused, which shows that RBAC is really in the way, and the rule is
// needed.
func TestDeployDroppedRuleFails(t *testing.T) {
	s := newScenario(t)
	objs := s.c.Kustomize(t, "deploy/kwok")
	applyDeploy(s.ctx, t, s.c, objs, "cluster-autoscaler")
	// The copies: the ServiceAccount and every binding renamed for sa,
	// the kwok ClusterRole renamed and without the rule; the base's roles
	// are bound as they are.
	const sa, kwokRole = "cluster-autoscaler-restricted", "cluster-autoscaler-kwok"
	rename := func(name string) string { return strings.Replace(name, "cluster-autoscaler", sa, 1) }
	var restricted []*unstructured.Unstructured
	var clusterScoped []string // ClusterRoles and ClusterRoleBindings made, by kind/name
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			if o.GetName() != kwokRole {
				continue
			}
			o = o.DeepCopy()
			o.SetName(rename(kwokRole))
			clusterScoped = append(clusterScoped, "ClusterRole/"+o.GetName())
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			dropped := false
			for _, r := range rules {
				rule := r.(map[string]any)
				if res := fmt.Sprint(rule["resources"]); res == "[nodes]" && fmt.Sprint(rule["apiGroups"]) == "[]" {
					var verbs []any
					for _, v := range rule["verbs"].([]any) {
						if v != "create" {
							verbs = append(verbs, v)
						}
					}
					dropped = len(verbs) < len(rule["verbs"].([]any))
					rule["verbs"] = verbs
				}
			}
			if !dropped {
				t.Fatalf("no 'create nodes' rule to drop in %v", rules)
			}
			_ = unstructured.SetNestedSlice(o.Object, rules, "rules")
			restricted = append(restricted, o)
		case "ServiceAccount":
			o = o.DeepCopy()
			o.SetName(sa)
			restricted = append(restricted, o)
		case "ClusterRoleBinding", "RoleBinding":
			o = o.DeepCopy()
			o.SetName(rename(o.GetName()))
			if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); o.GetKind() == "ClusterRoleBinding" && ref == kwokRole {
				_ = unstructured.SetNestedField(o.Object, rename(kwokRole), "roleRef", "name")
			}
			if o.GetKind() == "ClusterRoleBinding" {
				clusterScoped = append(clusterScoped, "ClusterRoleBinding/"+o.GetName())
			}
			_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": deployNS}}, "subjects")
			restricted = append(restricted, o)
		}
	}
	if !slices.Contains(clusterScoped, "ClusterRole/"+rename(kwokRole)) {
		t.Fatalf("no ClusterRole %s in deploy/kwok", kwokRole)
	}
	s.c.Apply(s.ctx, t, restricted...)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, o := range clusterScoped {
			kind, name, _ := strings.Cut(o, "/")
			if kind == "ClusterRole" {
				_ = s.c.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
			} else {
				_ = s.c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			}
		}
	})
	kubeconfig := s.c.ServiceAccountKubeconfig(s.ctx, t, deployNS, sa)
	cpu := s.cpuGroup("cpu", 4)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}}, "--kubeconfig="+kubeconfig,
		"--namespace="+deployNS, "--write-status-configmap=false")
	s.c.Create(s.ctx, t, s.pod("web").CPU("3").Obj())
	// klog quotes the error, escaping its quotes: match the words.
	user := fmt.Sprintf("system:serviceaccount:%s:%s", deployNS, sa)
	framework.Eventually(s.ctx, t, 2*time.Minute, "node creation refused by RBAC", func(ctx context.Context) (bool, string, error) {
		return containsAll(a.Log(), "nodes is forbidden", user, "cannot create resource"), grepLines(a.Log(), "orbidden"), nil
	})
	framework.Consistently(s.ctx, t, 3*time.Second, "no node added, the pod pending", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, cpu.Name)
		n, seen, _ := s.podsSeen(ctx)
		return len(nodes) == 0 && n == 0, seen, err
	})
}

// grantKwokState lets the ServiceAccount sa of deployNS keep the kwok
// provider's instance records in the test's namespace.
func (s *scenario) grantKwokState(t *testing.T, sa string) {
	s.c.Create(s.ctx, t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "kwok-provider-state"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "kwok-provider-state"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "kwok-provider-state"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: deployNS, Name: sa}}},
	)
}
