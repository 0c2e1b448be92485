package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/clusterapi"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
)

// cluster is the Cluster API Cluster of the demo, in the demo namespace;
// its workload cluster is the local control plane itself.
const cluster = "demo"

// capiProvider: the example node groups as MachineDeployments of cluster,
// whose Machines the dev infrastructure provider turns into kwok Nodes
// with the groups' capacity, labels, taints and ResourceSlices. Their
// scale-from-zero templates come from the DevMachineTemplates'
// status.capacity, upstream's labels and taints annotations and a DRA
// template ConfigMap per group with drivers.
type capiProvider struct {
	client     kubernetes.Interface
	dyn        dynamic.Interface
	host       string
	port       int
	kubeconfig string
	groups     []kwok.NodeGroupConfig
}

func newCAPIProvider(cfg *rest.Config, client kubernetes.Interface, o options) (*capiProvider, error) {
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	for _, g := range groups.Groups {
		served[g.Name] = true
	}
	if !served[capi.Group] || !served[infra.Group] {
		return nil, fmt.Errorf("the Cluster API controllers do not run on this control plane (no %s or %s API): make down, then make up CAPI=1 (or make demo PROVIDER=clusterapi on a stopped one)", capi.Group, infra.Group)
	}
	c, err := kwok.LoadConfig(o.cloudConfig)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, fmt.Errorf("API server %s: no port", cfg.Host)
	}
	return &capiProvider{client: client, dyn: dyn, host: u.Hostname(), port: port, kubeconfig: o.kubeconfig, groups: c.NodeGroups}, nil
}

func (c *capiProvider) args() []string {
	return []string{"--cloud-provider=clusterapi", "--cloud-config=" + c.kubeconfig,
		"--node-group-auto-discovery=clusterapi:namespace=" + ns + ",clusterName=" + cluster}
}

// setUp makes the Cluster (its kubeconfig Secret, the fake control plane),
// waits until Cluster API calls it initialized, then makes each group.
func (c *capiProvider) setUp(ctx context.Context) error {
	kubeconfig, err := os.ReadFile(c.kubeconfig)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig", Namespace: ns, Labels: map[string]string{capi.ClusterNameLabel: cluster}},
		Data:       map[string][]byte{capi.KubeconfigSecretKey: kubeconfig},
		Type:       "cluster.x-k8s.io/secret",
	}
	if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := c.create(ctx, capi.ControlPlane(ns, cluster+"-cp"), capi.Cluster(ns, cluster, c.host, c.port)); err != nil {
		return err
	}
	if err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := c.dyn.Resource(capi.ClusterResource).Namespace(ns).Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ok, _, _ := unstructured.NestedBool(got.Object, "status", "initialization", "controlPlaneInitialized")
		return ok, nil
	}); err != nil {
		return fmt.Errorf("cluster %s/%s: control plane not initialized (is the Cluster API manager running? make up CAPI=1): %w", ns, cluster, err)
	}
	for i := range c.groups {
		if err := c.group(ctx, &c.groups[i]); err != nil {
			return fmt.Errorf("node group %s: %w", c.groups[i].Name, err)
		}
	}
	fmt.Printf("Cluster API: cluster %s/%s with MachineDeployments %s (0 replicas)\n", ns, cluster, strings.Join(c.names(), ", "))
	return nil
}

// group makes one kwok group a DevMachineTemplate and a MachineDeployment
// of the same name (and its DRA template ConfigMap).
func (c *capiProvider) group(ctx context.Context, g *kwok.NodeGroupConfig) error {
	var slices []resourceapi.ResourceSliceSpec
	for _, d := range g.Template.Drivers {
		if len(d.SharedCounters) > 0 {
			slices = append(slices, resourceapi.ResourceSliceSpec{Driver: d.Driver, SharedCounters: d.SharedCounters})
		}
		if len(d.Devices) > 0 {
			slices = append(slices, resourceapi.ResourceSliceSpec{Driver: d.Driver, Devices: d.Devices})
		}
	}
	spec := infra.MachineSpec{Capacity: g.Template.Capacity, Labels: g.Template.Labels, Taints: g.Template.Taints,
		ResourceSlices: slices, BootDelay: g.BootDelay.Duration.String()}
	var labels, taints []string
	for k, v := range g.Template.Labels {
		labels = append(labels, k+"="+v)
	}
	for _, t := range g.Template.Taints {
		taints = append(taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	ann := []string{}
	if len(labels) > 0 {
		ann = append(ann, "capacity.cluster-autoscaler.kubernetes.io/labels", strings.Join(labels, ","))
	}
	if len(taints) > 0 {
		ann = append(ann, "capacity.cluster-autoscaler.kubernetes.io/taints", strings.Join(taints, ","))
	}
	if len(slices) > 0 {
		cm, err := draTemplate(g.Name, slices)
		if err != nil {
			return err
		}
		if _, err := c.client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		ann = append(ann, clusterapi.AnnotationDRATemplate, cm.Name)
	}
	return c.create(ctx, capi.MachineTemplate(ns, g.Name, spec),
		capi.MachineDeployment(ns, cluster, g.Name, g.Name, capi.Bounds(g.MinSize, g.MaxSize), capi.Annotations(ann...)))
}

// draTemplate is the ConfigMap the clusterapi provider reads the group's
// ResourceSlices from.
func draTemplate(group string, specs []resourceapi.ResourceSliceSpec) (*corev1.ConfigMap, error) {
	var docs []string
	for _, spec := range specs {
		data, err := yaml.Marshal(resourceapi.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"}, Spec: spec})
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(data))
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: group + "-dra"},
		Data: map[string]string{clusterapi.DRATemplateKey: strings.Join(docs, "---\n")}}, nil
}

func (c *capiProvider) create(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		res, err := capi.ResourceOf(o)
		if err != nil {
			return err
		}
		if _, err := c.dyn.Resource(res).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

func (c *capiProvider) names() []string {
	var out []string
	for _, g := range c.groups {
		out = append(out, g.Name)
	}
	return out
}

// nodes are the Nodes of the demo's Machines, by MachineDeployment.
func (c *capiProvider) nodes(ctx context.Context) (map[string]string, error) {
	list, err := c.dyn.Resource(capi.MachineResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range list.Items {
		m := capi.MachineOf(&list.Items[i])
		if m.NodeName != "" && !m.Deleting {
			out[m.NodeName] = list.Items[i].GetLabels()[capi.DeploymentNameLabel]
		}
	}
	return out, nil
}
