package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// testLabel keeps parallel tests apart: every group of a test carries it
// with the test's namespace as value and every pod of the test selects it,
// so one test's autoscaler never scales for another test's pods.
const testLabel = "e2e.dra-autoscaler.io/test"

const pcieRoot = "resource.kubernetes.io/pcieRoot"

// scenario is one test's world: its namespace, driver names and groups.
type scenario struct {
	c      *framework.Cluster
	ctx    context.Context
	ns     string
	gpu    string // DRA driver of GPUs
	nic    string // DRA driver of NICs
	groups []string
	// cleanupVolumes are volumes a test's stand-in provisioner created.
	cleanupVolumes []string
}

func newScenario(t *testing.T) *scenario { return newScenarioWithin(t, 5*time.Minute) }

// newScenarioWithin is newScenario for a test that takes longer than 5
// minutes.
func newScenarioWithin(t *testing.T, d time.Duration) *scenario {
	c := framework.Get(t)
	ctx, ns := c.NamespaceWithin(t, d)
	s := &scenario{c: c, ctx: ctx, ns: ns, gpu: "gpu." + ns + ".example.com", nic: "nic." + ns + ".example.com"}
	c.Create(ctx, t,
		builder.DeviceClass(ns+"-gpu").Driver(s.gpu).Obj(),
		builder.DeviceClass(ns+"-nic").Driver(s.nic).Obj(),
	)
	// Nodes the autoscaler adds are not the test's objects: remove them
	// (and their slices) with the test.
	t.Cleanup(func() { s.deleteGroupNodes() })
	return s
}

func (s *scenario) group(name string) string {
	// The namespace's random suffix keeps group names unique per run.
	prefix := s.ns
	if len(prefix) > 26 {
		prefix = prefix[:20] + prefix[len(prefix)-6:]
	}
	g := prefix + "-" + name
	s.groups = append(s.groups, g)
	return g
}

// cpuGroup is a group of plain 4-CPU nodes.
func (s *scenario) cpuGroup(name string, max int) kwok.NodeGroupConfig {
	return kwok.NodeGroupConfig{
		Name: s.group(name), MaxSize: max,
		Template: kwok.TemplateConfig{
			Labels:   map[string]string{testLabel: s.ns},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
		},
	}
}

// gpuGroup is a group of nodes with gpus GPUs and as many NICs, GPU i and
// NIC i on PCIe root pci<i>.
func (s *scenario) gpuGroup(name string, max, gpus int) kwok.NodeGroupConfig {
	g := s.cpuGroup(name, max)
	g.Template.Capacity[corev1.ResourceCPU] = resource.MustParse("64")
	g.Template.Capacity[corev1.ResourceMemory] = resource.MustParse("512Gi")
	var gd, nd []resourceapi.Device
	for i := range gpus {
		root := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{pcieRoot: {StringValue: ptr.To(fmt.Sprintf("pci%d", i))}}
		gd = append(gd, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: root})
		nd = append(nd, resourceapi.Device{Name: fmt.Sprintf("nic-%d", i), Attributes: root})
	}
	g.Template.Drivers = []kwok.DriverConfig{{Driver: s.gpu, Devices: gd}, {Driver: s.nic, Devices: nd}}
	return g
}

// pod is a pod of this test (it selects the test's nodes).
func (s *scenario) pod(name string) *builder.PodBuilder {
	return builder.Pod(s.ns, name).NodeSelector(testLabel, s.ns)
}

// gpuNICTemplate is a claim template for one GPU plus the NIC on its root.
func (s *scenario) gpuNICTemplate(t *testing.T) string {
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "gpu-nic").
		Request(builder.Request("gpu", s.ns+"-gpu"), builder.Request("nic", s.ns+"-nic")).
		MatchAttribute(pcieRoot).Obj())
	return "gpu-nic"
}

// groupNodes lists the nodes of a group.
func (s *scenario) groupNodes(ctx context.Context, group string) ([]corev1.Node, error) {
	list, err := s.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup + "=" + group})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (s *scenario) deleteGroupNodes() {
	ctx := context.Background()
	for _, g := range s.groups {
		nodes, _ := s.groupNodes(ctx, g)
		for _, n := range nodes {
			_ = s.c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			slices, _ := s.c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
			if slices != nil {
				for _, sl := range slices.Items {
					_ = s.c.Client.ResourceV1().ResourceSlices().Delete(ctx, sl.Name, metav1.DeleteOptions{})
				}
			}
		}
	}
}

// podsSeen describes the test's pods for wait messages.
func (s *scenario) podsSeen(ctx context.Context) (bound int, seen string, err error) {
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, "", err
	}
	var parts []string
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName != "" {
			bound++
		}
		parts = append(parts, describePod(&pods.Items[i]))
	}
	return bound, strings.Join(parts, "; "), nil
}

// events returns the messages of events with reason on the pod.
func (s *scenario) events(ctx context.Context, pod, reason string) ([]string, error) {
	return eventMessages(ctx, s.c, s.ns, pod, reason)
}

// eventMessages are the messages of the events with reason about the
// object name in namespace (the default namespace for cluster-scoped ones).
func eventMessages(ctx context.Context, c *framework.Cluster, namespace, name, reason string) ([]string, error) {
	list, err := c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out, nil
}
