package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules []struct {
		APIGroups     []string `json:"apiGroups"`
		Resources     []string `json:"resources"`
		ResourceNames []string `json:"resourceNames"`
		Verbs         []string `json:"verbs"`
	} `json:"rules"`
	Spec struct {
		Replicas *int `json:"replicas"`
		Template struct {
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot *bool `json:"runAsNonRoot"`
				} `json:"securityContext"`
				Containers []struct {
					Args            []string `json:"args"`
					SecurityContext struct {
						ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem"`
					} `json:"securityContext"`
					Resources struct {
						Requests map[string]string `json:"requests"`
						Limits   map[string]string `json:"limits"`
					} `json:"resources"`
					LivenessProbe struct {
						HTTPGet struct {
							Path string `json:"path"`
						} `json:"httpGet"`
					} `json:"livenessProbe"`
				} `json:"containers"`
				Volumes []struct {
					ConfigMap *struct {
						Name string `json:"name"`
					} `json:"configMap"`
				} `json:"volumes"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// build builds dir and checks what every build of deploy/ must hold:
// namespaced objects in kube-system, no wildcard in any rule, every Role
// verb but create restricted to names.
func build(t *testing.T, dir string) map[string][]object {
	t.Helper()
	out, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]object{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		byKind[o.Kind] = append(byKind[o.Kind], o)
		clusterScoped := o.Kind == "ClusterRole" || o.Kind == "ClusterRoleBinding" || o.Kind == "CustomResourceDefinition"
		if !clusterScoped && o.Metadata.Namespace != "kube-system" {
			t.Errorf("%s %s in namespace %q, want kube-system", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
		for _, r := range o.Rules {
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				for _, v := range list {
					if strings.Contains(v, "*") {
						t.Errorf("%s %s: wildcard in rule %+v", o.Kind, o.Metadata.Name, r)
					}
				}
			}
			if o.Kind == "Role" {
				for _, v := range r.Verbs {
					if v != "create" && len(r.ResourceNames) == 0 {
						t.Errorf("Role rule %+v: %s not restricted to names", r, v)
					}
				}
			}
		}
	}
	return byKind
}

// allowed are the rules of the build's roles as "group/resource:verb",
// and "group/resource/name:verb" for rules restricted to names.
func allowed(byKind map[string][]object) map[string]bool {
	out := map[string]bool{}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, o := range byKind[kind] {
			for _, r := range o.Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							if len(r.ResourceNames) == 0 {
								out[g+"/"+res+":"+v] = true
							}
							for _, n := range r.ResourceNames {
								out[g+"/"+res+"/"+n+":"+v] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

// kwokOnly are the kwok provider's rules: the base must not grant them.
var kwokOnly = []string{"/nodes:create", "/nodes:delete", "resource.k8s.io/resourceslices:create", "resource.k8s.io/resourceslices:delete",
	"storage.k8s.io/csinodes:create", "storage.k8s.io/csinodes:delete"}

func counts(t *testing.T, byKind map[string][]object, want map[string]int) {
	t.Helper()
	for kind, n := range want {
		if len(byKind[kind]) != n {
			t.Errorf("%d %s, want %d", len(byKind[kind]), kind, n)
		}
	}
}

// args are the Deployment's container args; the pod spec is checked as
// the base has it.
func args(t *testing.T, byKind map[string][]object) (args []string, cloudConfigMounted bool) {
	t.Helper()
	if len(byKind["Deployment"]) != 1 {
		t.Fatalf("%d Deployments", len(byKind["Deployment"]))
	}
	d := byKind["Deployment"][0].Spec
	pod := d.Template.Spec
	if d.Replicas == nil || *d.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Replicas)
	}
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("not runAsNonRoot")
	}
	c := pod.Containers[0]
	if c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("root filesystem not read-only")
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v", c.Resources)
	}
	if c.LivenessProbe.HTTPGet.Path != "/health-check" {
		t.Errorf("liveness probe on %q", c.LivenessProbe.HTTPGet.Path)
	}
	if !slices.Contains(c.Args, "--leader-elect=true") {
		t.Errorf("args %v lack --leader-elect=true", c.Args)
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "dra-autoscaler-cloud-config-") {
			cloudConfigMounted = true // the generated name, hash suffix included
		}
	}
	return c.Args, cloudConfigMounted
}

// nominations is the one rule nominations need: deploy/components/nominations
// grants it with --nominate-planned-nodes=true, the base neither.
const nominations = "/pods/status:patch"

// nominating tells whether args turn nominations on, failing on a
// missing or repeated flag (the component replaces the base's).
func nominating(t *testing.T, args []string) bool {
	t.Helper()
	var found []string
	for _, a := range args {
		if strings.HasPrefix(a, "--nominate-planned-nodes") {
			found = append(found, a)
		}
	}
	if len(found) != 1 {
		t.Fatalf("args %v: want one --nominate-planned-nodes, got %v", args, found)
	}
	return found[0] == "--nominate-planned-nodes=true"
}

// The base is the same for every provider: no provider flag, no cloud
// config, none of the kwok provider's rules, and no nominations (no
// pods/status rule, the flag off).
func TestDeployBase(t *testing.T) {
	byKind := build(t, "../../deploy/base")
	counts(t, byKind, map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "ServiceMonitor": 1, "ConfigMap": 1, "CustomResourceDefinition": 4})
	rules := allowed(byKind)
	for _, r := range kwokOnly {
		if rules[r] {
			t.Errorf("the base grants %s, the kwok provider's", r)
		}
	}
	for _, want := range []string{"/nodes:list", "/nodes:patch", "resource.k8s.io/resourceslices:watch", "autoscaling.dra-autoscaler.io/capacityreservations:watch",
		"autoscaling.dra-autoscaler.io/nodegroups:create", "autoscaling.dra-autoscaler.io/nodegroups:delete", "autoscaling.dra-autoscaler.io/nodegroups/status:update"} {
		if !rules[want] {
			t.Errorf("the base lacks %s", want)
		}
	}
	a, mounted := args(t, byKind)
	if slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--cloud-") }) || mounted {
		t.Errorf("the base names a provider: args %v, cloud config mounted %v", a, mounted)
	}
	if rules[nominations] || nominating(t, a) {
		t.Errorf("the base nominates (%v) or grants %s (%v) without the nominations component", nominating(t, a), nominations, rules[nominations])
	}
}

// The kwok overlay: the base, the provider's flags with the example node
// groups mounted, and its rules, a state ConfigMap name for every group.
func TestDeployKwok(t *testing.T) {
	byKind := build(t, "../../deploy/kwok")
	counts(t, byKind, map[string]int{"ServiceAccount": 1, "ClusterRole": 3, "ClusterRoleBinding": 3, "Role": 2, "RoleBinding": 2,
		"Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "ServiceMonitor": 1, "ConfigMap": 2, "CustomResourceDefinition": 4})
	a, mounted := args(t, byKind)
	if len(a) < 2 || a[0] != "--cloud-provider=kwok" || a[1] != "--cloud-config=/etc/dra-autoscaler/kwok-provider.yaml" || !mounted {
		t.Errorf("args %v, cloud config mounted %v", a, mounted)
	}
	if !nominating(t, a) {
		t.Errorf("args %v: the overlay includes the nominations component, but they are off", a)
	}
	rules := allowed(byKind)
	want := append([]string{nominations}, kwokOnly...)
	data, err := os.ReadFile("../../deploy/kwok/kwok-provider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		NodeGroups []struct {
			Name string `json:"name"`
		} `json:"nodeGroups"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil || len(cfg.NodeGroups) == 0 {
		t.Fatalf("kwok-provider.yaml: %v (%d groups)", err, len(cfg.NodeGroups))
	}
	for _, g := range cfg.NodeGroups {
		want = append(want, "/configmaps/kwok-provider-"+g.Name+":get", "/configmaps/kwok-provider-"+g.Name+":update")
	}
	for _, w := range want {
		if !rules[w] {
			t.Errorf("missing %s", w)
		}
	}
}

// The Cluster API overlay: the base, --cloud-provider=clusterapi, every
// call cloudprovider/clusterapi makes on the management cluster, and none
// of the kwok provider's rules.
func TestDeployClusterAPI(t *testing.T) {
	byKind := build(t, "../../deploy/clusterapi")
	counts(t, byKind, map[string]int{"ServiceAccount": 1, "ClusterRole": 3, "ClusterRoleBinding": 3, "Role": 1, "RoleBinding": 1,
		"Deployment": 1, "ConfigMap": 1, "CustomResourceDefinition": 4})
	a, mounted := args(t, byKind)
	if len(a) == 0 || a[0] != "--cloud-provider=clusterapi" || slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--cloud-config") }) || mounted {
		t.Errorf("args %v, cloud config mounted %v", a, mounted)
	}
	if !nominating(t, a) {
		t.Errorf("args %v: the overlay includes the nominations component, but they are off", a)
	}
	rules := allowed(byKind)
	for _, r := range kwokOnly {
		if rules[r] {
			t.Errorf("the Cluster API overlay grants %s, the kwok provider's", r)
		}
	}
	for _, want := range []string{
		"cluster.x-k8s.io/machinedeployments:list", "cluster.x-k8s.io/machinedeployments:watch",
		"cluster.x-k8s.io/machinesets:watch", "cluster.x-k8s.io/machinepools:watch", "cluster.x-k8s.io/machines:watch",
		"cluster.x-k8s.io/machines:patch",
		"cluster.x-k8s.io/machinedeployments/scale:get", "cluster.x-k8s.io/machinedeployments/scale:patch",
		"cluster.x-k8s.io/machinesets/scale:patch", "cluster.x-k8s.io/machinepools/scale:patch",
		"/configmaps:watch", "/events:create", "infrastructure.test.dra-autoscaler.io/devmachinetemplates:watch", nominations,
	} {
		if !rules[want] {
			t.Errorf("missing %s", want)
		}
	}
}
