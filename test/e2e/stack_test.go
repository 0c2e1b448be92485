package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The stack works: the controller manager creates the claim from its
// template, the real scheduler allocates a device from a ResourceSlice and
// binds the pod, kwok reports it Running.
func TestDRAPodGetsDeviceAndRuns(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx, ns := c.Namespace(t)
	driver := ns + ".gpu.example.com"
	node := framework.Kwok(builder.Node(ns+"-gpu").CPU("8").Memory("32Gi").Label(testLabel, ns).Obj())
	class := builder.DeviceClass(ns + "-gpu").Driver(driver).Obj()
	c.Create(ctx, t,
		node,
		builder.ResourceSlice(ns+"-gpus", node.Name, driver, node.Name).Devices(
			builder.Device("gpu-0").Attr("pcieRoot", "pci0"),
			builder.Device("gpu-1").Attr("pcieRoot", "pci1"),
		).Obj(),
		class,
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", class.Name)).Obj(),
		builder.Pod(ns, "inference").CPU("1").ClaimFromTemplate("gpu", "one-gpu").NodeSelector(testLabel, ns).Obj(),
	)

	var claimName string
	framework.Eventually(ctx, t, time.Minute, "pod Running on "+node.Name, func(ctx context.Context) (bool, string, error) {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "inference", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if len(pod.Status.ResourceClaimStatuses) == 1 && pod.Status.ResourceClaimStatuses[0].ResourceClaimName != nil {
			claimName = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
		}
		return pod.Spec.NodeName == node.Name && pod.Status.Phase == corev1.PodRunning, describePod(pod), nil
	})
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %q made by the controller: %v", claimName, err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s not allocated one device: %+v", claimName, claim.Status.Allocation)
	}
	got := claim.Status.Allocation.Devices.Results[0]
	if got.Driver != driver || got.Pool != node.Name || !strings.HasPrefix(got.Device, "gpu-") {
		t.Errorf("allocated %s/%s/%s, want a gpu of %s/%s", got.Driver, got.Pool, got.Device, driver, node.Name)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].Name != "inference" {
		t.Errorf("claim reserved for %+v, want the pod", claim.Status.ReservedFor)
	}
}

// All-or-nothing holds in the real scheduler: a gang of 3 (minCount 3) on
// a node with room for 2 binds nobody; a second node lets all 3 bind.
func TestGangBindsAllOrNothing(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	ctx, ns := c.Namespace(t)
	c.Create(ctx, t,
		framework.Kwok(builder.Node(ns+"-a").CPU("2").Memory("8Gi").Label(testLabel, ns).Obj()),
		builder.PodGroup(ns, "trainer").MinCount(3).Obj(),
	)
	for i := range 3 {
		c.Create(ctx, t, builder.Pod(ns, fmt.Sprintf("worker-%d", i)).CPU("1").PodGroup("trainer").NodeSelector(testLabel, ns).Obj())
	}

	bound := func(ctx context.Context) (int, string, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, "", err
		}
		n, seen := 0, []string{}
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName != "" {
				n++
			}
			seen = append(seen, describePod(&pods.Items[i]))
		}
		return n, strings.Join(seen, "; "), nil
	}
	// Long enough for several scheduling attempts of every member.
	framework.Consistently(ctx, t, 10*time.Second, "no member of the gang bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := bound(ctx)
		return n == 0, seen, err
	})

	c.Create(ctx, t, framework.Kwok(builder.Node(ns+"-b").CPU("2").Memory("8Gi").Label(testLabel, ns).Obj()))
	framework.Eventually(ctx, t, 90*time.Second, "all 3 members bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := bound(ctx)
		return n == 3, seen, err
	})
}

func describePod(pod *corev1.Pod) string {
	s := fmt.Sprintf("%s: phase=%s node=%q", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			s += fmt.Sprintf(" unschedulable=%q", c.Message)
		}
	}
	return s
}
