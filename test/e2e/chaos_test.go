package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// podDeaths watches the namespace's pods and remembers every pod that was
// deleted while bound to a node: work somebody destroyed.
type podDeaths struct {
	mu     sync.Mutex
	killed []string
	seen   int
}

func (s *scenario) watchPodDeaths(t *testing.T) *podDeaths {
	d := &podDeaths{}
	w, err := s.c.Client.CoreV1().Pods(s.ns).Watch(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			d.mu.Lock()
			d.seen++
			// Deletions the test itself makes carry no grace of their own
			// here: the test deletes only after it stopped watching.
			if (ev.Type == watch.Deleted || ev.Type == watch.Modified && p.DeletionTimestamp != nil) && p.Spec.NodeName != "" {
				d.killed = append(d.killed, fmt.Sprintf("%s on %s (%s)", p.Name, p.Spec.NodeName, p.Status.Phase))
			}
			d.mu.Unlock()
		}
	}()
	return d
}

func (d *podDeaths) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.killed...)
}

// gangRunning counts, per gang (pod name prefix before the last "-"), the
// members Running and the members in all.
func gangRunning(pods []corev1.Pod) map[string][2]int {
	out := map[string][2]int{}
	for _, p := range pods {
		g := p.Name[:strings.LastIndex(p.Name, "-")]
		c := out[g]
		c[1]++
		if p.Status.Phase == corev1.PodRunning {
			c[0]++
		}
		out[g] = c
	}
	return out
}

// Chaos: eight gangs of four one-GPU members at once, on three groups of
// 2-GPU nodes that each lose about 20 % of their instances (seeded): one
// group's fail at once, one's never register, one's register and never
// turn Ready. Polled every 200 ms: no gang runs partly for longer than one
// provision time, no bound pod is ever deleted, every gang eventually
// runs, and once scale-down had its turn no node is left that no pod uses.
func TestChaosGangsUnderRandomFailures(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	var groups []kwok.NodeGroupConfig
	for i, mode := range []kwok.FailureMode{kwok.FailAtRequest, kwok.FailNeverRegister, kwok.FailNeverReady} {
		g := s.gpuGroup(fmt.Sprintf("chaos%d", i), 16, 2)
		g.BootDelay.Duration = time.Second
		g.Faults.FailureRate, g.Faults.FailureMode, g.Faults.Seed = 0.2, mode, int64(42+i)
		groups = append(groups, g)
	}
	const provision = 8 * time.Second
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: groups}, "--namespace="+s.ns,
		"--max-node-provision-time="+provision.String(),
		"--initial-node-group-backoff-duration=2s", "--max-node-group-backoff-duration=8s",
		"--scale-down-unneeded-time=5s", "--scale-down-delay-after-add=0s", "--scale-down-delay-after-failure=0s")
	deaths := s.watchPodDeaths(t)
	const gangs, size = 8, 4
	for i := range gangs {
		s.gang(t, fmt.Sprintf("g%d", i), size, "")
	}

	partialSince := map[string]time.Time{}
	var worstPartial time.Duration
	polls := 0
	framework.Eventually(s.ctx, t, 6*time.Minute, "every gang Running", func(ctx context.Context) (bool, string, error) {
		polls++
		pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		counts := gangRunning(pods.Items)
		full := 0
		var seen []string
		for g, c := range counts {
			switch {
			case c[0] == c[1]:
				full++
				delete(partialSince, g)
			case c[0] > 0:
				if partialSince[g].IsZero() {
					partialSince[g] = time.Now()
				}
				if d := time.Since(partialSince[g]); d > worstPartial {
					worstPartial = d
				}
			default:
				delete(partialSince, g)
			}
			seen = append(seen, fmt.Sprintf("%s %d/%d", g, c[0], c[1]))
		}
		sort.Strings(seen)
		if worstPartial > provision {
			t.Fatalf("a gang ran partly for %s, longer than the provision time %s: %v", worstPartial, provision, seen)
		}
		return full == gangs, strings.Join(seen, ", "), nil
	})
	framework.Eventually(s.ctx, t, 2*time.Minute, "no node left that no pod uses", func(ctx context.Context) (bool, string, error) {
		idle, total, err := s.idleNodes(ctx, groups)
		return err == nil && len(idle) == 0, fmt.Sprintf("%d nodes, idle %v", total, idle), err
	})
	if killed := deaths.list(); len(killed) > 0 {
		t.Errorf("bound pods deleted: %v", killed)
	}
	m, _ := a.Metrics(s.ctx)
	_, total, _ := s.idleNodes(s.ctx, groups)
	t.Logf("chaos: %d gangs of %d Running on %d nodes; %d polls; longest partial run %s; scaled up %s; failed scale-ups %s; bound pods deleted: %d",
		gangs, size, total, polls, worstPartial.Round(time.Millisecond), sumSamples(m, "cluster_autoscaler_scaled_up_nodes_total"),
		samples(m, "cluster_autoscaler_failed_scale_ups_total"), len(deaths.list()))
}

// idleNodes are the groups' nodes that run no pod of the test.
func (s *scenario) idleNodes(ctx context.Context, groups []kwok.NodeGroupConfig) ([]string, int, error) {
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	used := map[string]bool{}
	for _, p := range pods.Items {
		used[p.Spec.NodeName] = true
	}
	var idle []string
	total := 0
	for _, g := range groups {
		nodes, err := s.groupNodes(ctx, g.Name)
		if err != nil {
			return nil, 0, err
		}
		total += len(nodes)
		for _, n := range nodes {
			if !used[n.Name] {
				idle = append(idle, n.Name)
			}
		}
	}
	return idle, total, nil
}

var sampleLine = regexp.MustCompile(`^(\S+?)(\{[^}]*\})? (\S+)$`)

// samples are the non-zero samples of a metric, "labels=value".
func samples(exposition, name string) string {
	var out []string
	for _, l := range strings.Split(exposition, "\n") {
		m := sampleLine.FindStringSubmatch(l)
		if m != nil && m[1] == name && m[3] != "0" {
			out = append(out, m[2]+"="+m[3])
		}
	}
	return strings.Join(out, " ")
}

func sumSamples(exposition, name string) string {
	var sum float64
	for _, l := range strings.Split(exposition, "\n") {
		m := sampleLine.FindStringSubmatch(l)
		if m != nil && m[1] == name {
			var v float64
			fmt.Sscan(m[3], &v)
			sum += v
		}
	}
	return fmt.Sprint(sum)
}
