package externalgrpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func gpuTemplate(nodeName string) *cloudprovider.NodeTemplate {
	return &cloudprovider.NodeTemplate{
		Node: builder.Node(nodeName).Label("group", "gpu").Obj(),
		ResourceSlices: []*resourceapi.ResourceSlice{
			builder.ResourceSlice(nodeName+"-gpu", nodeName, "gpu.example.com", nodeName).Devices(builder.Device("gpu-0")).Obj(),
		},
		Pods: []*corev1.Pod{builder.Pod("kube-system", "agent").Node(nodeName).CPU("100m").Obj()},
	}
}

func TestRefreshDropsInvalidGroups(t *testing.T) {
	cp := &fakeCP{}
	cp.add("cpu", 0, 5)
	cp.add("", 0, 5)
	cp.add("negative", -1, 5)
	cp.add("inverted", 3, 2)
	cp.add("cpu", 1, 1) // duplicate
	e := start(t, cp, Config{})
	e.refresh(t)
	groups := e.p.NodeGroups()
	if len(groups) != 1 || groups[0].Id() != "cpu" || groups[0].MinSize() != 0 || groups[0].MaxSize() != 5 || groups[0].Debug() != "fake cpu" {
		t.Fatalf("groups = %v, want only cpu 0..5", groups)
	}
}

func TestRefreshIsAllOrNothing(t *testing.T) {
	for _, rpc := range []string{"Refresh", "Ext/GetCapabilities", "NodeGroups", "Ext/Reservations"} {
		t.Run(rpc, func(t *testing.T) {
			cp := &fakeCP{}
			cp.add("cpu", 0, 5)
			e := start(t, cp, Config{})
			e.refresh(t)
			e.faults.set(rpc, status.Error(codes.Internal, "boom"))
			err := e.p.Refresh(context.Background())
			var ce *CallError
			if !errors.As(err, &ce) || ce.Code != codes.Internal || !strings.Contains(err.Error(), "bufnet:1") ||
				!strings.Contains(err.Error(), strings.TrimPrefix(rpc, "Ext/")) {
				t.Fatalf("Refresh error = %v, want an Internal CallError naming the address and %s", err, rpc)
			}
			if got := e.p.NodeGroups(); len(got) != 0 {
				t.Fatalf("after a failed Refresh NodeGroups = %v, want none", got)
			}
			if _, err := e.p.NodeGroupForNode(builder.Node("n").Label("group", "cpu").Obj()); err == nil {
				t.Fatal("NodeGroupForNode after a failed Refresh: no error")
			}
			e.faults.set(rpc)
			e.refresh(t)
			if len(e.p.NodeGroups()) != 1 {
				t.Fatal("the next good Refresh did not bring the group back")
			}
		})
	}
}

func TestUpstreamOnlyServer(t *testing.T) {
	cp := &fakeCP{}
	g := cp.add("gpu", 1, 5)
	g.template = gpuTemplate("gpu-template")
	e := start(t, cp, Config{}, server.UpstreamOnly())
	e.refresh(t)
	ng := e.group(t, "gpu")
	ctx := context.Background()

	tmpl, err := ng.TemplateNodeInfo()
	if err != nil || tmpl.Node.Name != "gpu-template" || len(tmpl.ResourceSlices) != 1 || len(tmpl.Pods) != 0 {
		t.Fatalf("template = %+v, %v; want upstream's Node and its slices (resourceSliceBytes), no pods", tmpl, err)
	}
	if _, err := ng.AtomicIncreaseSize(ctx, 2); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Fatalf("AtomicIncreaseSize = %v, want ErrNotImplemented", err)
	}
	if len(g.calls) != 1 || g.calls[0] != "TemplateNodeInfo" {
		t.Fatalf("provider calls %v: AtomicIncreaseSize must not reach the server", g.calls)
	}
	created, err := ng.IncreaseSize(ctx, 2)
	if err != nil || created != nil {
		t.Fatalf("IncreaseSize = %v, %v; want no ids and no error", created, err)
	}
	if n, _ := ng.TargetSize(); n != 2 {
		t.Fatalf("target %d, want 2", n)
	}
	insts, err := ng.Nodes()
	if err != nil || len(insts) != 2 || !insts[0].CreatedAt.IsZero() || insts[0].Status.State != cloudprovider.InstanceCreating {
		t.Fatalf("Nodes = %+v, %v", insts, err)
	}
	// ForceDeleteNodes falls back to DeleteNodes, which keeps min.
	two := []*corev1.Node{nodeWithID(insts[0].Id), nodeWithID(insts[1].Id)}
	if err := ng.ForceDeleteNodes(ctx, two); err == nil || !strings.Contains(err.Error(), "below min") {
		t.Fatalf("ForceDeleteNodes without the extension = %v, want DeleteNodes' refusal", err)
	}
	if _, err := e.p.Reservations(); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Fatalf("Reservations = %v, want ErrNotImplemented", err)
	}
}

// A server built before resourceSliceBytes: the Node only, so a DRA pod
// cannot scale the group from zero.
func TestUpstreamServerWithoutTemplateSlices(t *testing.T) {
	cp := &fakeCP{}
	cp.add("gpu", 0, 5).template = gpuTemplate("t")
	e := start(t, cp, Config{}, server.UpstreamOnly(), server.NoTemplateSlices())
	e.refresh(t)
	tmpl, err := e.group(t, "gpu").TemplateNodeInfo()
	if err != nil || tmpl.Node.Name != "t" || len(tmpl.ResourceSlices) != 0 {
		t.Fatalf("template %+v, %v: want the Node only", tmpl, err)
	}
}

func TestExtensionOffSpeaksUpstreamOnly(t *testing.T) {
	cp := &fakeCP{}
	cp.add("gpu", 0, 5).template = gpuTemplate("t")
	e := start(t, cp, Config{Extension: ExtensionOff})
	e.refresh(t)
	tmpl, err := e.group(t, "gpu").TemplateNodeInfo()
	if err != nil || len(tmpl.ResourceSlices) != 1 || len(tmpl.Pods) != 0 {
		t.Fatalf("template %+v, %v: want upstream's (the Node and its slices, no pods)", tmpl, err)
	}
	if n := e.faults.calls("Ext/GetCapabilities"); n != 0 {
		t.Fatalf("extension: off still probed %d times", n)
	}
}

func nodeWithID(id string) *corev1.Node {
	n := builder.Node(strings.ReplaceAll(strings.TrimPrefix(id, "fake://"), "/", "-")).Obj()
	n.Spec.ProviderID = id
	return n
}

func TestExtension(t *testing.T) {
	cp := &fakeCP{}
	g := cp.add("gpu", 1, 4)
	g.template = gpuTemplate("gpu-template")
	start1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp.reservations = []cloudprovider.ReservedCapacity{
		{ID: "block", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"gpu"}, Count: 2, InUse: 1, Start: start1, End: start1.Add(time.Hour), Price: 3.5},
		{ID: "backwards", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"gpu"}, Count: 2, Start: start1, End: start1.Add(-time.Hour)},
	}
	e := start(t, cp, Config{})
	e.refresh(t)
	ng := e.group(t, "gpu")
	ctx := context.Background()

	tmpl, err := ng.TemplateNodeInfo()
	if err != nil || len(tmpl.ResourceSlices) != 1 || tmpl.ResourceSlices[0].Spec.Devices[0].Name != "gpu-0" || len(tmpl.Pods) != 1 {
		t.Fatalf("template = %+v, %v; want the Node, its slice and its pod", tmpl, err)
	}
	tmpl.Node.Labels["mutated"] = "yes"
	again, _ := ng.TemplateNodeInfo()
	if again.Node.Labels["mutated"] != "" {
		t.Fatal("TemplateNodeInfo handed out its cached copy")
	}
	if n := e.faults.calls("Ext/NodeGroupTemplate"); n != 1 {
		t.Fatalf("NodeGroupTemplate called %d times, want once per Refresh", n)
	}

	created, err := ng.AtomicIncreaseSize(ctx, 2)
	if err != nil || len(created) != 2 || created[0] != "fake://gpu/0" {
		t.Fatalf("AtomicIncreaseSize = %v, %v", created, err)
	}
	created, err = ng.IncreaseSize(ctx, 1)
	if err != nil || len(created) != 1 || created[0] != "fake://gpu/2" {
		t.Fatalf("IncreaseSize = %v, %v; want the created id", created, err)
	}
	insts, err := ng.Nodes()
	if err != nil || len(insts) != 3 || !insts[0].CreatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("Nodes = %+v, %v; want creation times", insts, err)
	}
	all := []*corev1.Node{nodeWithID(insts[0].Id), nodeWithID(insts[1].Id), nodeWithID(insts[2].Id)}
	if err := ng.ForceDeleteNodes(ctx, all); err != nil {
		t.Fatalf("ForceDeleteNodes below min: %v", err)
	}
	if n, _ := ng.TargetSize(); n != 0 {
		t.Fatalf("target %d after force delete, want 0", n)
	}
	rs, err := e.p.Reservations()
	if err != nil || len(rs) != 1 || rs[0].ID != "block" || rs[0].InUse != 1 || rs[0].Price != 3.5 || !rs[0].End.Equal(start1.Add(time.Hour)) {
		t.Fatalf("Reservations = %+v, %v; want block only (backwards dropped)", rs, err)
	}
	got, err := e.p.NodeGroupForNode(builder.Node("x").Label("group", "gpu").Obj())
	if err != nil || got == nil || got.Id() != "gpu" {
		t.Fatalf("NodeGroupForNode = %v, %v", got, err)
	}
	if got, err := e.p.NodeGroupForNode(builder.Node("y").Obj()); err != nil || got != nil {
		t.Fatalf("NodeGroupForNode of an unmanaged node = %v, %v; want nil, nil", got, err)
	}
	_, _ = e.p.NodeGroupForNode(builder.Node("y").Obj())
	if n := e.faults.calls("NodeGroupForNode"); n != 2 {
		t.Fatalf("NodeGroupForNode RPCs = %d, want 2 (answers cached until Refresh)", n)
	}
	e.refresh(t)
	_, _ = e.p.NodeGroupForNode(builder.Node("y").Obj())
	if n := e.faults.calls("NodeGroupForNode"); n != 3 {
		t.Fatalf("NodeGroupForNode RPCs = %d, want 3 (Refresh drops the cache)", n)
	}
	if n := e.faults.calls("Ext/GetCapabilities"); n != 2 {
		t.Fatalf("GetCapabilities probed %d times in 2 Refreshes, want once per Refresh", n)
	}
}

func TestMalformedTemplates(t *testing.T) {
	other := gpuTemplate("t")
	other.ResourceSlices[0].Spec.NodeName = ptrTo("somewhere-else")
	allNodes := gpuTemplate("t")
	allNodes.ResourceSlices[0].Spec.NodeName = nil
	allNodes.ResourceSlices[0].Spec.AllNodes = ptrTo(true)
	pod := gpuTemplate("t")
	pod.Pods[0].Spec.NodeName = "elsewhere"
	noPool := gpuTemplate("t")
	noPool.ResourceSlices[0].Spec.Pool.Name = ""
	for _, tc := range []struct {
		name string
		tmpl *cloudprovider.NodeTemplate
		want string
	}{
		{"slice of another node", other, `does not name the template node "t"`},
		{"slice for all nodes", allNodes, `does not name the template node "t"`},
		{"pod of another node", pod, `not the template node "t"`},
		{"slice without pool", noPool, "no driver or pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := &fakeCP{}
			cp.add("gpu", 0, 4).template = tc.tmpl
			e := start(t, cp, Config{})
			e.refresh(t)
			_, err := e.group(t, "gpu").TemplateNodeInfo()
			if err == nil || !strings.Contains(err.Error(), "node group gpu") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("TemplateNodeInfo error = %v, want one naming the group and %q", err, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// The autoscaler keeps the groups it started with: the objects survive
// Refreshes, and one the server stops listing fails clearly.
func TestGroupsAreStableAcrossRefreshes(t *testing.T) {
	cp := &fakeCP{}
	cp.add("a", 0, 2)
	cp.add("b", 0, 3)
	e := start(t, cp, Config{})
	e.refresh(t)
	a, b := e.group(t, "a"), e.group(t, "b")
	cp.groups[1].max = 7
	cp.groups = cp.groups[1:]
	e.refresh(t)
	if got := e.group(t, "b"); got != b || got.MaxSize() != 7 {
		t.Fatalf("group b after Refresh: same object %v, max %d; want the same object, max 7", got == b, got.MaxSize())
	}
	if len(e.p.NodeGroups()) != 1 {
		t.Fatalf("NodeGroups %v, want only b", e.p.NodeGroups())
	}
	if _, err := a.TargetSize(); err == nil || !strings.Contains(err.Error(), "node group a: not listed") {
		t.Fatalf("TargetSize of a dropped group = %v, want a clear error", err)
	}
	if _, err := a.IncreaseSize(context.Background(), 1); err == nil {
		t.Fatal("IncreaseSize of a dropped group succeeded")
	}
}

func TestConnectWaitsForTheServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing answers yet
	cp := &fakeCP{}
	cp.add("a", 0, 2)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		g := grpc.NewServer()
		server.New(cp).Register(g)
		t.Cleanup(g.Stop)
		_ = g.Serve(l)
	}()
	defer func(d time.Duration) { StartupTimeout = d }(StartupTimeout)
	StartupTimeout = 20 * time.Second
	p, err := Connect(&Config{Address: addr, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.conn.Close()
	if len(p.NodeGroups()) != 1 {
		t.Fatal("Connect returned before a good Refresh")
	}

	StartupTimeout = 1500 * time.Millisecond
	if _, err := Connect(&Config{Address: "127.0.0.1:1", Insecure: true}); err == nil || !strings.Contains(err.Error(), "no successful Refresh") {
		t.Fatalf("Connect to nothing = %v, want a start-up error", err)
	}
}

// What a server's cloud decides at launch (units, per-request domains)
// reaches the client as its template Node's annotations, with and
// without the extension.
func TestLaunchChoicesOverTheWire(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"extension", Config{}}, {"upstream only", Config{Extension: ExtensionOff}}} {
		t.Run(tc.name, func(t *testing.T) {
			cp := &fakeCP{}
			tmpl := gpuTemplate("t")
			tmpl.Node.Annotations = map[string]string{cloudprovider.AnnotationUnitSize: "4", cloudprovider.AnnotationTopologyPerRequest: "nvidia.com/gpu.clique"}
			cp.add("gpu", 0, 8).template = tmpl
			e := start(t, cp, tc.cfg)
			e.refresh(t)
			got, err := e.group(t, "gpu").TemplateNodeInfo()
			if err != nil {
				t.Fatal(err)
			}
			if n, err := got.UnitSize(); n != 4 || err != nil || !got.TopologyPerRequest("nvidia.com/gpu.clique") {
				t.Errorf("unit size %d (%v), annotations %v: want 4 and the clique chosen per request", n, err, got.Node.Annotations)
			}
		})
	}
}
