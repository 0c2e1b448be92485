package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// channelGroup is unitGroup whose nodes also publish 4 IMEX-like channel
// devices, each carrying its unit's clique as an attribute (as NVIDIA's
// ComputeDomain driver publishes them): the template says the value is
// the unit's (cloudprovider.LaunchValue), the provider fills it per unit.
func (s *scenario) channelGroup(t *testing.T, name string, max int) (kwok.NodeGroupConfig, string) {
	g := s.unitGroup(name, max)
	driver := "channel." + s.ns + ".example.com"
	var devices []resourceapi.Device
	for i := range 4 {
		devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("channel-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"clique": {StringValue: ptr.To(cloudprovider.LaunchValue(cliqueLabel))}}})
	}
	g.Template.Drivers = append(g.Template.Drivers, kwok.DriverConfig{Driver: driver, Devices: devices})
	s.c.Create(s.ctx, t, builder.DeviceClass(s.ns+"-channel").Driver(driver).Obj())
	return g, driver
}

// channelClique is the clique attribute of the channel device the pod's
// claim was allocated, read from the slice its node published.
func (s *scenario) channelClique(ctx context.Context, pod *corev1.Pod) (string, error) {
	for _, st := range pod.Status.ResourceClaimStatuses {
		claim, err := s.c.Client.ResourceV1().ResourceClaims(s.ns).Get(ctx, ptr.Deref(st.ResourceClaimName, ""), metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Request != "channel" {
				continue
			}
			list, err := s.c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + pod.Spec.NodeName})
			if err != nil {
				return "", err
			}
			for _, sl := range list.Items {
				for _, d := range sl.Spec.Devices {
					if sl.Spec.Driver == r.Driver && sl.Spec.Pool.Name == r.Pool && d.Name == r.Device {
						return ptr.Deref(d.Attributes["clique"].StringValue, ""), nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("pod %s: no allocated channel found", pod.Name)
}

// A ComputeDomain-shaped workload (issue 41, item 3): two pods, a gang in
// one clique, each claiming 4 GPUs and an IMEX channel. One new unit; the
// pods' channels, allocated by the scheduler, carry the unit's clique.
// Pods joining the domain (their channel must be of that clique) take the
// unit's free nodes; once it is full, one more gets no new unit: a new
// unit's channels are of a clique of its own, whatever the template was
// read off (before item 3, the template read off a node of the clique
// promised its channels, and a unit was bought for nothing).
func TestComputeDomainChannels(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g, driver := s.channelGroup(t, "imex", 8)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	gpus := builder.Request("gpu", s.ns+"-gpu").Count(4)
	s.c.Create(s.ctx, t, builder.PodGroup(s.ns, "cd").MinCount(2).TopologyKey(cliqueLabel).Obj(),
		builder.ClaimTemplate(s.ns, "cd").Request(gpus, builder.Request("channel", s.ns+"-channel")).Obj())
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("cd-%d", i)).CPU("1").PodGroup("cd").ClaimFromTemplate("work", "cd").Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the domain's two pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	nodes, err := s.groupNodes(s.ctx, g.Name)
	if err != nil {
		t.Fatal(err)
	}
	clique := ""
	for _, n := range nodes {
		if clique == "" {
			clique = n.Labels[cliqueLabel]
		}
		if n.Labels[cliqueLabel] != clique || clique == "" {
			t.Fatalf("nodes %s in clique %q and %q: want one unit", n.Name, n.Labels[cliqueLabel], clique)
		}
	}
	if len(nodes) != 4 {
		t.Fatalf("%d nodes, want one unit of 4", len(nodes))
	}
	for i := range 2 {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, fmt.Sprintf("cd-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.channelClique(s.ctx, pod); err != nil || got != clique {
			t.Errorf("pod %s: channel of clique %q (%v), want the unit's %q", pod.Name, got, err, clique)
		}
	}

	// Joining the domain: a channel of its clique.
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "join").Request(gpus,
		builder.Request("channel", s.ns+"-channel").Selector(fmt.Sprintf(`device.attributes[%q].clique == %q`, driver, clique))).Obj())
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("join-%d", i)).CPU("1").ClaimFromTemplate("work", "join").Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the two joining pods bound in the unit", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 4, seen, err
	})
	s.c.Create(s.ctx, t, s.pod("join-2").CPU("1").ClaimFromTemplate("work", "join").Obj())
	s.waitEvent(t, "join-2", "NotTriggerScaleUp", time.Minute)
	framework.Consistently(s.ctx, t, 5*time.Second, "no unit bought for a pod whose channel must be of the full clique", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, g)
		return err == nil && counts[0] == 4, seen, err
	})

	// A second domain written as NVIDIA's examples write one, without a
	// PodGroup: pods that follow each other into one clique (required pod
	// affinity). No unit has room: one new unit, both pods in it.
	follow := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"domain": "second"}}, TopologyKey: cliqueLabel}}}}
	for i := range 2 {
		pod := s.pod(fmt.Sprintf("second-%d", i)).CPU("1").Label("domain", "second").ClaimFromTemplate("work", "cd").Obj()
		pod.Spec.Affinity = follow
		s.c.Create(s.ctx, t, pod)
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the second domain's pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 6, seen, err
	})
	second := map[string]bool{}
	for i := range 2 {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, fmt.Sprintf("second-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node, err := s.c.Client.CoreV1().Nodes().Get(s.ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		second[node.Labels[cliqueLabel]] = true
		if got, err := s.channelClique(s.ctx, pod); err != nil || got != node.Labels[cliqueLabel] {
			t.Errorf("pod %s: channel of clique %q (%v), want its node's %q", pod.Name, got, err, node.Labels[cliqueLabel])
		}
	}
	if counts, seen, err := s.nodeCounts(s.ctx, g); err != nil || counts[0] != 8 || len(second) != 1 || second[clique] {
		t.Errorf("nodes %v (%v, %s), second domain's cliques %v: want one more unit of 4, both pods in its clique", counts, err, seen, second)
	}
}
