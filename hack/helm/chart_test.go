package helm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const chartDir = "../../deploy/charts/dra-autoscaler"

type rule struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames"`
	Verbs         []string `json:"verbs"`
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules []rule `json:"rules"`
	Data  map[string]string
	Spec  struct {
		Replicas *int `json:"replicas"`
		Template struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				ServiceAccountName            string `json:"serviceAccountName"`
				PriorityClassName             string `json:"priorityClassName"`
				TerminationGracePeriodSeconds int    `json:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Image string   `json:"image"`
					Args  []string `json:"args"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func decode(t *testing.T, out []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

func render(t *testing.T, sets ...string) []object {
	t.Helper()
	vals, err := Values(sets...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(chartDir, DefaultRelease, vals)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kustomizeRules reads the rules of the ClusterRoles and Roles in the
// kustomize manifests (deploy/base and a provider's overlay).
func kustomizeRules(t *testing.T, files ...string) []string {
	t.Helper()
	var all []object
	for _, f := range files {
		all = append(all, decode(t, readFile(t, filepath.Join("../../deploy", f)))...)
	}
	return grants(all, false)
}

// grants flattens the rules of every ClusterRole and Role to one line per
// group, resource and verb ("ClusterRole  nodes create"), resource names
// left out when names is false (the chart names objects after the
// release, the kustomize base after upstream).
func grants(objs []object, names bool) []string {
	var out []string
	for _, o := range objs {
		if o.Kind != "ClusterRole" && o.Kind != "Role" {
			continue
		}
		for _, r := range o.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						line := fmt.Sprintf("%s %s %s %s", o.Kind, g, res, v)
						if names && len(r.ResourceNames) > 0 {
							line += " " + strings.Join(r.ResourceNames, ",")
						} else if len(r.ResourceNames) > 0 {
							line += " (named)"
						}
						out = append(out, line)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The providers' installs, and what each must grant: the same rules as
// the kustomize base and the provider's overlay, and nothing of another
// provider's (externalgrpc talks to its server, not to the API: the base
// only).
var providers = []struct {
	name      string
	sets      []string
	kustomize []string
}{
	{"kwok", []string{"cloudProvider=kwok"}, []string{"base/clusterrole.yaml", "base/role.yaml", nominationsRules, "kwok/rbac-kwok.yaml"}},
	{"clusterapi", []string{"cloudProvider=clusterapi",
		// The test infrastructure provider's kinds, which deploy/clusterapi lists.
		"clusterAPIInfrastructureResources[0].apiGroup=infrastructure.test.dra-autoscaler.io",
		"clusterAPIInfrastructureResources[0].resources={devmachinetemplates,devmachinepools}"},
		[]string{"base/clusterrole.yaml", "base/role.yaml", nominationsRules, "clusterapi/clusterrole-clusterapi.yaml"}},
	{"externalgrpc", []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=grpc.example:8086", "externalgrpc.tlsSecret=grpc-client"},
		[]string{"base/clusterrole.yaml", "base/role.yaml", nominationsRules}},
}

// nominationsRules is the kustomize component that turns nominations on
// with their rule; the chart's nominatePlannedNodes (default true) does
// the same.
const nominationsRules = "components/nominations/clusterrole.yaml"

func TestLint(t *testing.T) {
	cases := map[string][]string{}
	for _, p := range providers {
		cases[p.name] = p.sets
	}
	cases["externalgrpc, plaintext asked for"] = []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=grpc.example:8086", "externalgrpc.config.insecure=true"}
	cases["no nominations"] = []string{"cloudProvider=clusterapi", "nominatePlannedNodes=false"}
	cases["everything set"] = []string{"cloudProvider=clusterapi", "serviceMonitor.enabled=true", "autoscalingGroups[0].name=g", "autoscalingGroups[0].minSize=0",
		"autoscalingGroups[0].maxSize=3", "nodeSelector.pool=system", "tolerations[0].operator=Exists", "rbac.serviceAccount.annotations.a=b"}
	for name, sets := range cases {
		t.Run(name, func(t *testing.T) {
			vals, err := Values(sets...)
			if err != nil {
				t.Fatal(err)
			}
			if err := Lint(chartDir, DefaultRelease.Namespace, vals); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestProviderRBAC(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			objs := render(t, p.sets...)
			got, want := grants(objs, false), kustomizeRules(t, p.kustomize...)
			if !slices.Equal(got, want) {
				t.Errorf("rules differ from the kustomize manifests %v:\n  only in the chart: %q\n  only in kustomize: %q", p.kustomize, minus(got, want), minus(want, got))
			}
			named := strings.Join(grants(objs, true), "\n")
			for _, want := range []string{"leases get dra-autoscaler", "configmaps get dra-autoscaler-status", "configmaps get dra-autoscaler-priority-expander"} {
				if !strings.Contains(named, want) {
					t.Errorf("no rule %q in\n%s", want, named)
				}
			}
			if p.name == "kwok" && !strings.Contains(named, "configmaps update kwok-provider-cpu-4x,kwok-provider-gpu-8x") {
				t.Errorf("kwok state ConfigMaps not granted by name:\n%s", named)
			}
			for _, o := range objs {
				for _, r := range o.Rules {
					for _, v := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames) {
						if strings.Contains(v, "*") {
							t.Errorf("%s %s: wildcard in %+v", o.Kind, o.Metadata.Name, r)
						}
					}
				}
				clusterScoped := o.Kind == "ClusterRole" || o.Kind == "ClusterRoleBinding" || o.Kind == "CustomResourceDefinition"
				if !clusterScoped && o.Metadata.Namespace != "kube-system" {
					t.Errorf("%s %s in namespace %q, want the release's", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
				}
			}
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			if args[0] != "--cloud-provider="+p.name {
				t.Errorf("args %q: want --cloud-provider=%s first", args, p.name)
			}
		})
	}
}

// pods/status patch is granted exactly when nominations are on, as the
// kustomize base (without the component) grants it.
func TestNominationsRule(t *testing.T) {
	for _, on := range []bool{true, false} {
		objs := render(t, "cloudProvider=clusterapi", fmt.Sprintf("nominatePlannedNodes=%v", on))
		granted := slices.Contains(grants(objs, false), "ClusterRole  pods/status patch")
		args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
		if granted != on || !slices.Contains(args, fmt.Sprintf("--nominate-planned-nodes=%v", on)) {
			t.Errorf("nominatePlannedNodes=%v: pods/status patch granted %v, args %q", on, granted, args)
		}
	}
	files := []string{"base/clusterrole.yaml", "base/role.yaml", "clusterapi/clusterrole-clusterapi.yaml"}
	if slices.Contains(kustomizeRules(t, files...), "ClusterRole  pods/status patch") {
		t.Errorf("the kustomize base grants pods/status patch without the nominations component")
	}
}

// The cloud config the chart renders for externalgrpc: the TLS files of
// the Secret, or insecure: true as asked; never neither.
func TestExternalGRPCCloudConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want []string
		not  []string
	}{
		{"TLS", []string{"externalgrpc.tlsSecret=grpc-client"},
			[]string{"cert: /etc/externalgrpc/tls.crt", "key: /etc/externalgrpc/tls.key", "cacert: /etc/externalgrpc/ca.crt", "insecure: false"}, nil},
		{"plaintext", []string{"externalgrpc.config.insecure=true"}, []string{"insecure: true"}, []string{"cert:", "cacert:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, append([]string{"cloudProvider=externalgrpc", "externalgrpc.config.address=g:1"}, tc.sets...)...)
			var cfg string
			for _, o := range objs {
				if o.Kind == "ConfigMap" && strings.HasSuffix(o.Metadata.Name, "-cloud-config") {
					cfg = o.Data["cloud-config.yaml"]
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(cfg, w) {
					t.Errorf("cloud config lacks %q:\n%s", w, cfg)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(cfg, n) {
					t.Errorf("cloud config has %q:\n%s", n, cfg)
				}
			}
		})
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func deployment(t *testing.T, objs []object) object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == "Deployment" {
			return o
		}
	}
	t.Fatal("no Deployment rendered")
	return object{}
}

func version(t *testing.T) string {
	return strings.TrimSpace(string(readFile(t, "../../VERSION")))
}

// The pod protects itself and runs the release's image.
func TestDeploymentDefaults(t *testing.T) {
	d := deployment(t, render(t, "cloudProvider=clusterapi"))
	pod := d.Spec.Template
	if got := pod.Metadata.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"]; got != "false" {
		t.Errorf("safe-to-evict %q, want \"false\"", got)
	}
	if pod.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", pod.Spec.PriorityClassName)
	}
	// --max-graceful-termination-sec's default and the drain's 30s headroom.
	if g := pod.Spec.TerminationGracePeriodSeconds; g < 600+30 {
		t.Errorf("terminationGracePeriodSeconds %d does not cover a drain (630s)", g)
	}
	if want := "ghcr.io/dra-autoscaler/dra-autoscaler:" + version(t); pod.Spec.Containers[0].Image != want {
		t.Errorf("image %q, want %q", pod.Spec.Containers[0].Image, want)
	}
	if *d.Spec.Replicas != 2 || pod.Spec.ServiceAccountName != "dra-autoscaler" {
		t.Errorf("replicas %d, serviceAccountName %q", *d.Spec.Replicas, pod.Spec.ServiceAccountName)
	}
}

// Values map to flags and objects as upstream's chart maps them.
func TestValues(t *testing.T) {
	tests := []struct {
		name     string
		sets     []string
		args     []string // in the container's args
		kinds    []string // rendered kinds that must be there
		notKinds []string // and must not
	}{
		{"autoscalingGroups", []string{"autoscalingGroups[0].name=gpu-8x", "autoscalingGroups[0].minSize=0", "autoscalingGroups[0].maxSize=10"},
			[]string{"--nodes=0:10:gpu-8x"}, nil, nil},
		{"autoDiscovery", []string{"cloudProvider=clusterapi", "autoDiscovery.clusterName=c1", "autoDiscovery.namespace=ns1", "autoDiscovery.labels[0].pool=gpu"},
			[]string{"--node-group-auto-discovery=clusterapi:namespace=ns1,clusterName=c1,pool=gpu"}, []string{"ClusterRole"}, []string{"ConfigMap"}},
		{"extraArgs", []string{"extraArgs.expander=least-waste\\,priority", "extraArgs.balance-similar-node-groups=true", "extraArgs.v=4"},
			[]string{"--expander=least-waste,priority", "--balance-similar-node-groups=true", "--v=4"}, nil, nil},
		{"one replica, no election", []string{"replicaCount=1"}, []string{"--leader-elect=false"}, nil, nil},
		{"serviceMonitor", []string{"serviceMonitor.enabled=true"}, nil, []string{"ServiceMonitor"}, nil},
		{"no serviceMonitor by default", nil, nil, nil, []string{"ServiceMonitor"}},
		{"rbac.create=false", []string{"rbac.create=false"}, nil, []string{"ServiceAccount"}, []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}},
		{"no PDB", []string{"podDisruptionBudget=null"}, nil, nil, []string{"PodDisruptionBudget"}},
		{"clusterapi with a management kubeconfig", []string{"cloudProvider=clusterapi", "clusterAPIKubeconfigSecret=mgmt"},
			[]string{"--cloud-config=/etc/kubernetes/mgmt-kubeconfig"}, nil, nil},
		{"image tag", []string{"image.tag=0.0.9"}, nil, nil, nil},
		{"nominations by default", nil, []string{"--nominate-planned-nodes=true"}, nil, nil},
		{"no nominations", []string{"nominatePlannedNodes=false"}, []string{"--nominate-planned-nodes=false"}, nil, nil},
		{"externalgrpc over TLS", []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=g:1", "externalgrpc.tlsSecret=grpc-client"},
			[]string{"--cloud-config=/etc/dra-autoscaler/cloud-config.yaml"}, []string{"ConfigMap"}, nil},
		{"externalgrpc in plaintext, asked for", []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=g:1", "externalgrpc.config.insecure=true"},
			[]string{"--cloud-config=/etc/dra-autoscaler/cloud-config.yaml"}, []string{"ConfigMap"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A provider is required; kwok unless the case names another.
			objs := render(t, append([]string{"cloudProvider=kwok"}, tc.sets...)...)
			args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
			for _, a := range tc.args {
				if !slices.Contains(args, a) {
					t.Errorf("no %s in %q", a, args)
				}
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.Kind)
			}
			for _, k := range tc.kinds {
				if !slices.Contains(kinds, k) {
					t.Errorf("no %s rendered (%v)", k, kinds)
				}
			}
			for _, k := range tc.notKinds {
				if slices.Contains(kinds, k) {
					t.Errorf("%s rendered (%v)", k, kinds)
				}
			}
		})
	}
}

// Values the chart cannot honour are errors that say why.
func TestBadValues(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{"no provider", []string{"cloudProvider="}, "cloudProvider is required: set it to kwok (demo and tests only: it creates and deletes Node objects), clusterapi or externalgrpc"},
		{"unknown provider", []string{"cloudProvider=aws"}, `cloudProvider "aws"`},
		{"autoDiscovery on kwok", []string{"autoDiscovery.clusterName=c1"}, "the kwok provider discovers no node groups"},
		{"externalgrpc without an address", []string{"cloudProvider=externalgrpc", "externalgrpc.tlsSecret=s"}, "externalgrpc.config.address is required"},
		{"externalgrpc without TLS", []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=g:1"},
			"externalgrpc: no TLS: set externalgrpc.tlsSecret"},
		{"externalgrpc without TLS, insecure false", []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=g:1", "externalgrpc.config.insecure=false"},
			"or, to accept a plaintext connection that anyone on the network path can read and forge, externalgrpc.config.insecure=true"},
		{"externalgrpc with TLS and insecure", []string{"cloudProvider=externalgrpc", "externalgrpc.config.address=g:1", "externalgrpc.tlsSecret=s", "externalgrpc.config.insecure=true"},
			"tlsSecret and config.insecure=true both set"},
		{"nominations in extraArgs", []string{"extraArgs.nominate-planned-nodes=false"}, "set nominatePlannedNodes instead"},
		{"a group without maxSize", []string{"autoscalingGroups[0].name=g", "autoscalingGroups[0].minSize=1"}, "want name, minSize and maxSize"},
		{"no service account to bind", []string{"rbac.serviceAccount.create=false"}, "rbac.serviceAccount.name is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// kwok unless the case names another provider (or none).
			vals, err := Values(append([]string{"cloudProvider=kwok"}, tc.sets...)...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Render(chartDir, DefaultRelease, vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// The chart's copies are the repository's files, and every version is
// the release's (VERSION).
func TestCopiesAndVersions(t *testing.T) {
	crds, err := filepath.Glob("../../deploy/crds/*_*.yaml")
	if err != nil || len(crds) == 0 {
		t.Fatalf("CRDs %v (%v)", crds, err)
	}
	copies, _ := filepath.Glob(chartDir + "/crds/*.yaml")
	if len(copies) != len(crds) {
		t.Errorf("chart CRDs %v, want copies of %v (make crds)", copies, crds)
	}
	pairs := map[string]string{"../../deploy/kwok/kwok-provider.yaml": chartDir + "/files/kwok-provider.yaml"}
	for _, c := range crds {
		pairs[c] = filepath.Join(chartDir, "crds", filepath.Base(c))
	}
	for src, cp := range pairs {
		if !bytes.Equal(readFile(t, src), readFile(t, cp)) {
			t.Errorf("%s differs from %s: run make crds", cp, src)
		}
	}
	v := version(t)
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(readFile(t, chartDir+"/Chart.yaml"), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != v || meta.AppVersion != v {
		t.Errorf("Chart.yaml version %q appVersion %q, want VERSION %q", meta.Version, meta.AppVersion, v)
	}
	var kust struct {
		Images []struct{ NewTag string } `json:"images"`
	}
	if err := yaml.Unmarshal(readFile(t, "../../deploy/base/kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	if len(kust.Images) != 1 || kust.Images[0].NewTag != v {
		t.Errorf("deploy/base images %+v, want the tag %s", kust.Images, v)
	}
}
