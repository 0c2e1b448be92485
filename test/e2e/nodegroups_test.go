package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const nodeGroupCRD = "deploy/crds/autoscaling.dra-autoscaler.io_nodegroups.yaml"

// nodeGroups lists the NodeGroup objects as `kubectl get nodegroups` does
// (a client-go list), by group id.
func nodeGroups(ctx context.Context, dyn dynamic.Interface) (map[string]v1alpha1.NodeGroup, error) {
	list, err := dyn.Resource(v1alpha1.NodeGroupResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]v1alpha1.NodeGroup{}
	for _, u := range list.Items {
		var ng v1alpha1.NodeGroup
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ng); err != nil {
			return nil, fmt.Errorf("NodeGroup %s: %w", u.GetName(), err)
		}
		out[ng.Status.NodeGroup] = ng
	}
	return out, nil
}

// nodeGroupTable is what `kubectl get nodegroups -o wide` asks the API
// server for: the objects as a Table of the CRD's printer columns.
func nodeGroupTable(ctx context.Context, c *framework.Cluster) (*metav1.Table, error) {
	raw, err := c.Client.Discovery().RESTClient().Get().AbsPath("/apis", v1alpha1.GroupName, "v1alpha1", "nodegroups").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		return nil, err
	}
	return &tbl, nil
}

// row is the table's row of object name, by column name.
func row(tbl *metav1.Table, name string) map[string]string {
	for _, r := range tbl.Rows {
		if len(r.Cells) == 0 || fmt.Sprint(r.Cells[0]) != name {
			continue
		}
		out := map[string]string{}
		for i, col := range tbl.ColumnDefinitions {
			if i < len(r.Cells) {
				out[col.Name] = fmt.Sprint(r.Cells[i])
			}
		}
		return out
	}
	return nil
}

func classDevices(cs []v1alpha1.ClassDevices) map[string]int32 {
	out := map[string]int32{}
	for _, c := range cs {
		out[c.Name] = c.Devices
	}
	return out
}

// The NodeGroup objects show what can be provisioned now and what stops
// it, as a reservation, the group's max size and a backoff bite in turn;
// `kubectl get nodegroups -o wide` prints them in columns.
func TestNodeGroupObjects(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	crs := reservationsClient(t, s.c)
	s.c.InstallCRD(s.ctx, t, nodeGroupCRD)
	dyn, err := dynamic.NewForConfig(s.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A reserved-only group of 2 GPUs and 2 NICs per node, whose launches
	// fail (quota), and an on-demand group of one GPU and one NIC.
	res, ond := s.gpuGroup("res", 3, 2), s.gpuGroup("ond", 2, 1)
	res.CapacityType, ond.CapacityType = kwok.CapacityReserved, kwok.CapacityOnDemand
	res.Price, ond.Price = ptr.To(3.5), ptr.To(2.25)
	res.Faults.OutOfResourcesAfter = ptr.To(0)
	res.Template.Labels["pool"], ond.Template.Labels["pool"] = "res", "ond"
	// The on-demand group's nodes take a while, which its time to Ready
	// must show.
	const boot = 3 * time.Second
	ond.BootDelay = metav1.Duration{Duration: boot}
	resv := s.ns + "-res"
	createReservation(s.ctx, t, crs, reservation(resv, map[string]any{"type": "Targeted", "nodeGroups": []any{res.Name}, "count": int64(2)}))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{res, ond}},
		"--namespace="+s.ns, "--initial-node-group-backoff-duration=10m", "--max-node-provision-time=30s")
	gpu, nic := s.ns+"-gpu", s.ns+"-nic"

	waitGroup := func(what, group string, ok func(st v1alpha1.NodeGroupStatus) bool) v1alpha1.NodeGroupStatus {
		t.Helper()
		var got v1alpha1.NodeGroupStatus
		framework.Eventually(s.ctx, t, 2*time.Minute, what, func(ctx context.Context) (bool, string, error) {
			ngs, err := nodeGroups(ctx, dyn)
			if err != nil {
				return false, "", err
			}
			ng, found := ngs[group]
			got = ng.Status
			if !found {
				return false, fmt.Sprintf("no NodeGroup of %s among %d", group, len(ngs)), nil
			}
			data, _ := json.Marshal(ng.Status)
			return ok(ng.Status), string(data), nil
		})
		return got
	}

	// 1. The reservation bites: 2 of the group's 3 nodes.
	st := waitGroup("the reservation limits the reserved group", res.Name, func(st v1alpha1.NodeGroupStatus) bool {
		return st.Provisionable.LimitedBy == objects.LimitedByReservation
	})
	if p := st.Provisionable; p.Nodes != 2 || classDevices(p.DeviceClasses)[gpu] != 4 || classDevices(p.DeviceClasses)[nic] != 4 {
		t.Errorf("reserved group: provisionable %+v, want 2 nodes, 4 %s and 4 %s", p, gpu, nic)
	}
	if st.CapacityType != "reserved" || st.ReservationLeft == nil || *st.ReservationLeft != 2 || st.MaxSize != 3 || st.Health != v1alpha1.NodeGroupHealthy {
		t.Errorf("reserved group: %+v", st)
	}
	if tm := st.Template; tm == nil || classDevices(tm.DeviceClasses)[gpu] != 2 || len(tm.Drivers) != 2 || tm.Allocatable.Cpu().String() != "64" {
		t.Errorf("reserved group's template: %+v", tm)
	}
	if st.PricePerNodeHour != "3.5" {
		t.Errorf("price %v, want 3.5", st.PricePerNodeHour)
	}
	od := waitGroup("the on-demand group up to its max", ond.Name, func(st v1alpha1.NodeGroupStatus) bool {
		return st.Provisionable.Nodes == 2 && st.Provisionable.LimitedBy == limits.ReasonGroupMax
	})
	if od.CapacityType != "on-demand" || od.ReservationLeft != nil || classDevices(od.Provisionable.DeviceClasses)[gpu] != 2 {
		t.Errorf("on-demand group: %+v", od)
	}

	// Nothing changes while nothing happens: no write at all, though a
	// pass runs every second.
	rvs := func(ctx context.Context) (string, error) {
		var out []string
		for _, g := range []string{res.Name, ond.Name} {
			u, err := dyn.Resource(v1alpha1.NodeGroupResource).Get(ctx, objects.ObjectName(g), metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			out = append(out, u.GetResourceVersion())
		}
		return strings.Join(out, ","), nil
	}
	before, err := rvs(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	framework.Consistently(s.ctx, t, 4*time.Second, "the objects unwritten while nothing changes", func(ctx context.Context) (bool, string, error) {
		now, err := rvs(ctx)
		return now == before, "resourceVersions " + before + " -> " + now, err
	})

	// What `kubectl get nodegroups -o wide` prints: the CRD's columns.
	tbl, err := nodeGroupTable(s.ctx, s.c)
	if err != nil {
		t.Fatal(err)
	}
	r := row(tbl, res.Name)
	if r == nil {
		t.Fatalf("no row of %s in %+v", res.Name, tbl.Rows)
	}
	for col, want := range map[string]string{"Min": "0", "Max": "3", "Target": "0", "Ready": "0", "Upcoming": "0", "Health": "Healthy",
		"Price": "3.5", "Provisionable": "2", "Limited-By": "reservation", "Capacity": "reserved"} {
		if r[col] != want {
			t.Errorf("column %s = %q, want %q (row %v)", col, r[col], want, r)
		}
	}
	wide := map[string]bool{}
	for _, c := range tbl.ColumnDefinitions {
		wide[c.Name] = c.Priority > 0
	}
	if !wide["Provisionable"] || !wide["Limited-By"] || wide["Max"] {
		t.Errorf("columns %+v: want Provisionable and Limited-By in -o wide only", tbl.ColumnDefinitions)
	}
	t.Logf("kubectl get nodegroups -o wide:\n%s", formatTable(tbl))

	// 2. More reserved than the group may hold: its max size bites.
	patchSpec(s.ctx, t, crs, resv, map[string]any{"count": int64(10)})
	st = waitGroup("the max size limits the reserved group", res.Name, func(st v1alpha1.NodeGroupStatus) bool {
		return st.Provisionable.LimitedBy == limits.ReasonGroupMax
	})
	if p := st.Provisionable; p.Nodes != 3 || classDevices(p.DeviceClasses)[gpu] != 6 || st.ReservationLeft == nil || *st.ReservationLeft != 10 {
		t.Errorf("reserved group: %+v, want 3 nodes and 6 %s, 10 reserved left", st, gpu)
	}

	// 3. A pod for the reserved group: the launch fails, the group backs
	// off. A pod for the on-demand group runs; its time to Ready shows.
	tmpl := s.gpuTemplate(t)
	s.c.Create(s.ctx, t, s.pod("on-res").CPU("1").NodeSelector("pool", "res").ClaimFromTemplate("gpu", tmpl).Obj(),
		s.pod("on-ond").CPU("1").NodeSelector("pool", "ond").ClaimFromTemplate("gpu", tmpl).Obj())
	st = waitGroup("the backoff stops the reserved group", res.Name, func(st v1alpha1.NodeGroupStatus) bool {
		return st.Provisionable.LimitedBy == objects.LimitedByBackoff
	})
	if st.Provisionable.Nodes != 0 || st.Health != v1alpha1.NodeGroupBackoff || st.Backoff == nil || st.Backoff.Reason == "" ||
		classDevices(st.Provisionable.DeviceClasses)[gpu] != 0 {
		t.Errorf("backed-off group: %+v", st)
	}
	od = waitGroup("the on-demand group's time to Ready", ond.Name, func(st v1alpha1.NodeGroupStatus) bool {
		return st.ProvisioningTime != nil && st.ReadyNodes == 1
	})
	if pt := od.ProvisioningTime; pt.Samples != 1 || pt.P50.Duration < boot || pt.P50.Duration > time.Minute || pt.P90 != pt.P50 || od.Provisionable.Nodes != 1 {
		t.Errorf("on-demand group after one node booting %s: %+v, time to Ready %+v", boot, od, od.ProvisioningTime)
	}
	tbl, err = nodeGroupTable(s.ctx, s.c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get nodegroups -o wide, after the backoff:\n%s", formatTable(tbl))
	if r := row(tbl, res.Name); r["Health"] != "Backoff" || r["Provisionable"] != "0" || r["Limited-By"] != "backoff" {
		t.Errorf("backed-off row %v", r)
	}

	// The served CRD declares the columns `kubectl get` prints.
	crd, err := dyn.Resource(crdGVR).Get(s.ctx, "nodegroups."+v1alpha1.GroupName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var cols []string
	for _, v := range versions {
		pc, _, _ := unstructured.NestedSlice(v.(map[string]any), "additionalPrinterColumns")
		for _, c := range pc {
			cols = append(cols, c.(map[string]any)["name"].(string))
		}
	}
	for _, want := range []string{"Min", "Max", "Target", "Ready", "Upcoming", "Health", "Price"} {
		if !strings.Contains(" "+strings.Join(cols, " ")+" ", " "+want+" ") {
			t.Errorf("served CRD's printer columns %v lack %s", cols, want)
		}
	}
}

// formatTable prints a Table as kubectl does, roughly.
func formatTable(tbl *metav1.Table) string {
	var b strings.Builder
	widths := make([]int, len(tbl.ColumnDefinitions))
	cells := [][]string{{}}
	for i, c := range tbl.ColumnDefinitions {
		cells[0] = append(cells[0], strings.ToUpper(c.Name))
		widths[i] = len(c.Name)
	}
	for _, r := range tbl.Rows {
		var line []string
		for i, c := range r.Cells {
			v := fmt.Sprint(c)
			if c == nil {
				v = "<none>"
			}
			line = append(line, v)
			if i < len(widths) {
				widths[i] = max(widths[i], len(v))
			}
		}
		cells = append(cells, line)
	}
	for _, line := range cells {
		for i, v := range line {
			if i < len(widths) {
				fmt.Fprintf(&b, "%-*s   ", widths[i], v)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// A group with zeroOrMaxNodeScaling (kwok options) grows to its max in
// one request for a single pod, keeps every node while one holds a pod,
// and loses them all together once none does; the status says so.
func TestZeroOrMaxNodeScaling(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("block", 3)
	yes := true
	g.Options = &kwok.GroupOptionsConfig{ZeroOrMaxNodeScaling: &yes}
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, append(fastScaleDown, "--namespace="+s.ns)...)
	s.c.Create(s.ctx, t, s.pod("first").CPU("3").Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "the pod bound, the group at its max", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		counts, groups, err2 := s.nodeCounts(ctx, g)
		return err == nil && err2 == nil && n == 1 && counts[0] == 3, seen + " " + groups, errors.Join(err, err2)
	})
	if !strings.Contains(a.Log(), "delta=3 atomic=true") {
		t.Error("the group did not grow by 3 in one atomic request")
	}
	// Another pod on another node, then the first goes: one node holds a
	// pod, so none is removed.
	s.c.Create(s.ctx, t, s.pod("second").CPU("3").Obj())
	framework.Eventually(s.ctx, t, time.Minute, "the second pod bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	s.deleteNow(t, "first")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if counts, seen, err := s.nodeCounts(s.ctx, g); err != nil || counts[0] != 3 {
			t.Fatalf("nodes %s (%v) while a pod is on one: want all 3 kept", seen, err)
		}
	}
	s.deleteNow(t, "second")
	framework.Eventually(s.ctx, t, 2*time.Minute, "every node removed", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, g)
		return err == nil && counts[0] == 0, seen, err
	})
	st, err := s.statusOf(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ng := range st.NodeGroups {
		if ng.Name == g.Name && (ng.Options == nil || !ng.Options.ZeroOrMaxNodeScaling || ng.Options.From != "provider") {
			t.Errorf("status options %+v, want zeroOrMaxNodeScaling from the provider", ng.Options)
		}
	}
}

// deleteNow deletes a pod of the test without grace.
func (s *scenario) deleteNow(t *testing.T, name string) {
	t.Helper()
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
}
