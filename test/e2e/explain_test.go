package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// splitGroup is a GPU group whose nodes never have a GPU and a NIC on one
// PCIe root (GPU i on pci<i>, NIC i on pci<gpus+i>).
func (s *scenario) splitGroup(name string, max, gpus int) kwok.NodeGroupConfig {
	g := s.gpuGroup(name, max, gpus)
	for i := range g.Template.Drivers[1].Devices {
		g.Template.Drivers[1].Devices[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			pcieRoot: {StringValue: ptr.To(fmt.Sprintf("pci%d", gpus+i))}}
	}
	return g
}

// waitEvent waits for an event with reason on the pod whose message holds
// every one of want, and returns it.
func (s *scenario) waitEvent(t *testing.T, pod, reason string, timeout time.Duration, want ...string) string {
	t.Helper()
	var found string
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("%s event on %s naming %q", reason, pod, want), func(ctx context.Context) (bool, string, error) {
		msgs, err := s.events(ctx, pod, reason)
		for _, m := range msgs {
			if containsAll(m, want...) {
				found = m
				return true, m, nil
			}
		}
		return false, fmt.Sprintf("%q", msgs), err
	})
	return found
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// explainJSON runs explain -o json for the pod and decodes it.
func (s *scenario) explainJSON(t *testing.T, cfg kwok.Config, pod string, args ...string) *explain.Report {
	t.Helper()
	code, out, logs := s.c.Explain(t, cfg, append(args, "-o", "json", s.ns+"/"+pod)...)
	if code != 0 {
		t.Fatalf("explain -o json exited %d:\n%s\n%s", code, out, logs)
	}
	var r explain.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	return &r
}

// A pod whose claim pairs a GPU and a NIC on one PCIe root, while no
// group's nodes have both on one root: its NotTriggerScaleUp event names
// DynamicResources and the matchAttribute constraint, and `explain` says
// the same per group, as a table and as JSON.
func TestExplainDRAConstraint(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	split := s.splitGroup("split", 4, 4)
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{split, s.cpuGroup("cpu", 4)}}
	s.c.StartAutoscaler(t, cfg, "--namespace="+s.ns) // the status goes to the test's namespace
	tmpl := s.gpuNICTemplate(t)
	s.c.Create(s.ctx, t, s.pod("infer").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	// Blamed, and measured: the group's nodes have no GPU and NIC on one root.
	constraint := "matchAttribute " + pcieRoot + " of claim accel: the node has no gpu+nic set with one " + pcieRoot
	msg := s.waitEvent(t, "infer", "NotTriggerScaleUp", 2*time.Minute, split.Name+": DynamicResources", constraint)
	t.Logf("event: %s", msg)

	code, table, logs := s.c.Explain(t, cfg, s.ns+"/infer")
	if code != 0 {
		t.Fatalf("explain exited %d:\n%s\n%s", code, table, logs)
	}
	t.Logf("explain:\n%s", table)
	var row string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, split.Name+" ") {
			row = line
		}
	}
	if !containsAll(row, explain.VerdictCannotHelp, "DynamicResources", constraint) {
		t.Errorf("explain's row for %s = %q, want cannot-help, DynamicResources and %q", split.Name, row, constraint)
	}
	r := s.explainJSON(t, cfg, "infer")
	if r.State != "Unschedulable" {
		t.Errorf("state %q, want Unschedulable", r.State)
	}
	var got *explain.GroupVerdict
	for i := range r.NodeGroups {
		if r.NodeGroups[i].NodeGroup == split.Name {
			got = &r.NodeGroups[i]
		}
	}
	if got == nil || got.Reason != "DynamicResources" || got.Constraint != constraint || got.Verdict != explain.VerdictCannotHelp {
		t.Errorf("explain -o json for %s: %+v, want DynamicResources blaming %q", split.Name, got, constraint)
	}
	if nodes, _ := s.groupNodes(s.ctx, split.Name); len(nodes) != 0 {
		t.Errorf("%d nodes added to %s", len(nodes), split.Name)
	}
	// The status says it too, and shows the pools of the group's template.
	st := s.waitStatus(t, "infer listed in podsNotHelped", func(st *status.AutoscalerStatus) bool {
		for _, p := range st.PodsNotHelped {
			for _, r := range p.Reasons {
				if p.Name == "infer" && r.NodeGroup == split.Name && r.Reason == "DynamicResources" && r.Constraint == constraint {
					return true
				}
			}
		}
		return false
	})
	for _, g := range st.NodeGroups {
		if g.Name == split.Name && (len(g.DRAPools) != 2 || g.DRAPools[0].Devices != 4 || g.DRAPools[1].Devices != 4) {
			t.Errorf("draPools of %s: %+v, want a GPU and a NIC pool of 4 devices", g.Name, g.DRAPools)
		}
	}
}

// waitStatus waits until the status ConfigMap in the test's namespace
// satisfies ok, and returns it.
func (s *scenario) waitStatus(t *testing.T, what string, ok func(*status.AutoscalerStatus) bool) *status.AutoscalerStatus {
	t.Helper()
	var got *status.AutoscalerStatus
	framework.Eventually(s.ctx, t, time.Minute, "status: "+what, func(ctx context.Context) (bool, string, error) {
		st, err := status.Read(ctx, s.c.Client, s.ns, "cluster-autoscaler-status")
		if err != nil || st == nil {
			return false, "no status", err
		}
		got = st
		return ok(st), fmt.Sprintf("%+v", st), nil
	})
	return got
}

// A pod that --max-nodes-total keeps from a node hears it (event) and
// explain says it. Not parallel: the limit counts every node.
func TestExplainMaxNodesTotal(t *testing.T) {
	s := newScenario(t)
	// --max-nodes-total=0 means no limit: make sure there is a node to
	// count (one the test's pods do not select).
	s.c.Create(s.ctx, t, framework.Kwok(builder.Node(s.ns+"-other").Obj()))
	nodes, err := s.c.Client.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{s.cpuGroup("cpu", 10)}}
	limit := fmt.Sprintf("--max-nodes-total=%d", len(nodes.Items))
	s.c.StartAutoscaler(t, cfg, limit)
	s.c.Create(s.ctx, t, s.pod("web").CPU("3").Obj())
	s.waitEvent(t, "web", "NotTriggerScaleUp", 2*time.Minute, "max-nodes-total")
	r := s.explainJSON(t, cfg, "web", limit)
	if len(r.NodeGroups) != 1 || r.NodeGroups[0].Reason != "max-nodes-total" || r.NodeGroups[0].Verdict != explain.VerdictCannotHelp {
		t.Errorf("explain: %+v, want the group stopped by max-nodes-total", r.NodeGroups)
	}
	code, table, _ := s.c.Explain(t, cfg, limit, s.ns+"/web")
	if code != 0 || !strings.Contains(table, "max-nodes-total") {
		t.Errorf("explain table (exit %d) does not name max-nodes-total:\n%s", code, table)
	}
}

// The autoscaler simulates with TaintToleration disabled while the real
// scheduler has it: a pod that does not tolerate an existing node's taint
// fits there in the simulation only. Past the (shortened) threshold the
// pod gets a SchedulerDisagreement event quoting the scheduler and naming
// the node, and the metrics count it.
func TestSchedulerDisagreement(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	node := s.ns + "-tainted"
	s.c.Create(s.ctx, t, framework.Kwok(builder.Node(node).CPU("8").Memory("32Gi").Label(testLabel, s.ns).
		Taint("dedicated", "batch", corev1.TaintEffectNoSchedule).Obj()))
	schedCfg := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(schedCfg, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: TaintToleration
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cpu := s.cpuGroup("cpu", 2)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}},
		"--scheduler-config-file="+schedCfg, "--scheduler-disagreement-threshold=3s", "--namespace="+s.ns)
	s.c.Create(s.ctx, t, s.pod("web").CPU("1").Obj())
	msg := s.waitEvent(t, "web", "SchedulerDisagreement", 2*time.Minute, "node "+node, "untolerated taint")
	t.Logf("event: %s", msg)
	framework.Eventually(s.ctx, t, time.Minute, "disagreement metrics", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		ok := strings.Contains(m, "cluster_autoscaler_scheduler_disagreement_pods 1") &&
			strings.Contains(m, "cluster_autoscaler_scheduler_disagreements_total 1")
		return ok, grepLines(m, "scheduler_disagreement"), err
	})
	s.waitStatus(t, "the disagreement listed", func(st *status.AutoscalerStatus) bool {
		return len(st.SchedulerDisagreements) == 1 && st.SchedulerDisagreements[0].Node == node &&
			strings.Contains(st.SchedulerDisagreements[0].SchedulerMessage, "untolerated taint")
	})
	// The simulation's placement stands for an existing node: no scale-up.
	if nodes, _ := s.groupNodes(s.ctx, cpu.Name); len(nodes) != 0 {
		t.Errorf("%d nodes added to %s", len(nodes), cpu.Name)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// A pod asking more devices than any node of a group has: the event and
// explain say, per group, how many the pod asks and how many the group's
// nodes offer (none at all on a CPU group).
func TestExplainRequestShortage(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	gpu, cpu := s.gpuGroup("gpu8", 4, 8), s.cpuGroup("cpu", 4)
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{gpu, cpu}}
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "nine").Request(builder.Request("gpu", s.ns+"-gpu").Count(9)).Obj())
	s.c.StartAutoscaler(t, cfg)
	s.c.Create(s.ctx, t, s.pod("big").CPU("1").ClaimFromTemplate("gpus", "nine").Obj())
	short := fmt.Sprintf("request gpu asks 9 device(s) of class %s-gpu; the node offers 8", s.ns)
	none := fmt.Sprintf("request gpu asks 9 device(s) of class %s-gpu; the node has none that match", s.ns)
	msg := s.waitEvent(t, "big", "NotTriggerScaleUp", 2*time.Minute, gpu.Name+": DynamicResources", short, cpu.Name)
	t.Logf("event: %s", msg)
	r := s.explainJSON(t, cfg, "big")
	want := map[string]string{gpu.Name: short, cpu.Name: none}
	for _, g := range r.NodeGroups {
		if w, ok := want[g.NodeGroup]; ok && (g.Verdict != explain.VerdictCannotHelp || !strings.Contains(g.Constraint+" "+g.Message, w)) {
			t.Errorf("explain for %s: %+v, want cannot-help saying %q", g.NodeGroup, g, w)
		}
		delete(want, g.NodeGroup)
	}
	if len(want) > 0 {
		t.Errorf("explain has no verdict for %v", want)
	}
}
