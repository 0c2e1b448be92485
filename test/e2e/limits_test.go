package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// --max-nodes-total holds across the cluster: with room for 2 more nodes
// and 5 pods needing a node each, 2 nodes come and the other 3 pods are
// told why. Not parallel: the limit counts every node of the cluster.
func TestMaxNodesTotal(t *testing.T) {
	s := newScenario(t)
	nodes, err := s.c.Client.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpu := s.cpuGroup("cpu", 10)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}},
		fmt.Sprintf("--max-nodes-total=%d", len(nodes.Items)+2))
	for i := range 5 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "2 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	framework.Eventually(s.ctx, t, time.Minute, "the 3 others told max-nodes-total stopped them", func(ctx context.Context) (bool, string, error) {
		pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		told, seen := 0, []string{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				continue
			}
			msgs, err := s.events(ctx, p.Name, "NotTriggerScaleUp")
			if err != nil {
				return false, "", err
			}
			seen = append(seen, fmt.Sprintf("%s: %q", p.Name, msgs))
			for _, m := range msgs {
				if strings.Contains(m, "max-nodes-total") {
					told++
					break
				}
			}
		}
		return told == 3, strings.Join(seen, "; "), nil
	})
	framework.Consistently(s.ctx, t, 3*time.Second, "still 2 nodes", func(ctx context.Context) (bool, string, error) {
		g, err := s.groupNodes(ctx, cpu.Name)
		return len(g) == 2, fmt.Sprintf("%d nodes", len(g)), err
	})
}
