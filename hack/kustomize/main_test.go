package main

import (
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

func TestDeployBase(t *testing.T) {
	out, err := Build("../../deploy")
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
	for kind, n := range map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "ServiceMonitor": 1, "ConfigMap": 2} {
		if len(byKind[kind]) != n {
			t.Errorf("%d %s, want %d", len(byKind[kind]), kind, n)
		}
	}
	if len(byKind["Deployment"]) != 1 {
		return
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
	if !strings.Contains(strings.Join(c.Args, " "), "--leader-elect=true") {
		t.Errorf("args %v lack --leader-elect=true", c.Args)
	}
	mounted := false
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "dra-autoscaler-cloud-config-") {
			mounted = true // the generated name, hash suffix included
		}
	}
	if !mounted {
		t.Error("the generated cloud-config ConfigMap is not mounted")
	}
}

// The Cluster API provider's rules: every call cloudprovider/clusterapi
// makes on the management cluster, and no wildcard.
func TestDeployClusterAPI(t *testing.T) {
	out, err := Build("../../deploy/clusterapi")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		for _, r := range o.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if strings.Contains(g+res+v, "*") {
							t.Errorf("wildcard in %+v", r)
						}
						allowed[g+"/"+res+":"+v] = true
					}
				}
			}
		}
	}
	for _, want := range []string{
		"cluster.x-k8s.io/machinedeployments:list", "cluster.x-k8s.io/machinedeployments:watch",
		"cluster.x-k8s.io/machinesets:watch", "cluster.x-k8s.io/machinepools:watch", "cluster.x-k8s.io/machines:watch",
		"cluster.x-k8s.io/machines:patch",
		"cluster.x-k8s.io/machinedeployments/scale:get", "cluster.x-k8s.io/machinedeployments/scale:patch",
		"cluster.x-k8s.io/machinesets/scale:patch", "cluster.x-k8s.io/machinepools/scale:patch",
		"/configmaps:watch", "/events:create", "infrastructure.test.dra-autoscaler.io/devmachinetemplates:watch",
	} {
		if !allowed[want] {
			t.Errorf("missing %s", want)
		}
	}
}
