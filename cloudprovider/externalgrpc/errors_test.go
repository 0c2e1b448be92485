package externalgrpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// rpcCase calls one client method that makes exactly one RPC.
type rpcCase struct {
	rpc   string // the interceptor's name of the RPC
	group string // the group the error must name
	call  func(p *Provider, g cloudprovider.NodeGroup) error
}

var ctx = context.Background()

var rpcCases = []rpcCase{
	{"NodeGroupForNode", "", func(p *Provider, _ cloudprovider.NodeGroup) error {
		_, err := p.NodeGroupForNode(builder.Node("n").Obj())
		return err
	}},
	{"PricingNodePrice", "", func(p *Provider, _ cloudprovider.NodeGroup) error {
		m, _ := p.Pricing()
		_, err := m.NodePrice(builder.Node("n").Obj(), time.Now(), time.Now().Add(time.Hour))
		return err
	}},
	{"PricingPodPrice", "", func(p *Provider, _ cloudprovider.NodeGroup) error {
		m, _ := p.Pricing()
		_, err := m.PodPrice(builder.Pod("ns", "p").Obj(), time.Now(), time.Now().Add(time.Hour))
		return err
	}},
	{"NodeGroupTargetSize", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error { _, err := g.TargetSize(); return err }},
	{"NodeGroupDeleteNodes", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error {
		return g.DeleteNodes(ctx, []*corev1.Node{nodeWithID("fake://gpu/0")})
	}},
	{"NodeGroupDecreaseTargetSize", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error { return g.DecreaseTargetSize(ctx, -1) }},
	{"NodeGroupGetOptions", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error {
		_, err := g.GetOptions(cloudprovider.NodeGroupAutoscalingOptions{})
		return err
	}},
	{"Ext/NodeGroupIncreaseSize", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error { _, err := g.IncreaseSize(ctx, 1); return err }},
	{"Ext/NodeGroupAtomicIncreaseSize", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error {
		_, err := g.AtomicIncreaseSize(ctx, 1)
		return err
	}},
	{"Ext/NodeGroupForceDeleteNodes", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error {
		return g.ForceDeleteNodes(ctx, []*corev1.Node{nodeWithID("fake://gpu/0")})
	}},
	{"Ext/NodeGroupInstances", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error { _, err := g.Nodes(); return err }},
	{"Ext/NodeGroupTemplate", "gpu", func(_ *Provider, g cloudprovider.NodeGroup) error { _, err := g.TemplateNodeInfo(); return err }},
	{"Cleanup", "", func(p *Provider, _ cloudprovider.NodeGroup) error { return p.Cleanup() }},
}

// TestErrorMapping: every RPC's failure comes back as a CallError naming
// the address, the RPC and the group, with the server's code and message.
func TestErrorMapping(t *testing.T) {
	for _, tc := range rpcCases {
		for _, code := range []codes.Code{codes.NotFound, codes.Internal, codes.PermissionDenied} {
			t.Run(tc.rpc+"/"+code.String(), func(t *testing.T) {
				cp := &fakeCP{}
				cp.add("gpu", 0, 4).template = gpuTemplate("t")
				e := start(t, cp, Config{})
				e.refresh(t)
				e.faults.set(tc.rpc, status.Error(code, "the server says no"))
				err := tc.call(e.p, e.group(t, "gpu"))
				var ce *CallError
				if !errors.As(err, &ce) {
					t.Fatalf("error %v (%T), want a CallError", err, err)
				}
				rpc := strings.TrimPrefix(tc.rpc, "Ext/")
				if ce.Code != code || ce.RPC != rpc || ce.Group != tc.group || ce.Address != "bufnet:1" || ce.Message != "the server says no" {
					t.Fatalf("CallError %+v, want code %s rpc %s group %q", ce, code, rpc, tc.group)
				}
				if errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatal("a failure reads as ErrNotImplemented")
				}
			})
		}
	}
}

// TestUnimplementedRPCs: an optional RPC the server does not offer is
// ErrNotImplemented (or, for the extension's, upstream's call instead).
func TestUnimplementedRPCs(t *testing.T) {
	unimpl := status.Error(codes.Unimplemented, "not here")
	for _, tc := range []struct {
		rpc      string
		call     func(p *Provider, g cloudprovider.NodeGroup) error
		notImpl  bool   // the caller sees ErrNotImplemented
		fallback string // else: the upstream RPC used instead
	}{
		{"PricingNodePrice", rpcCases[1].call, true, ""},
		{"PricingPodPrice", rpcCases[2].call, true, ""},
		{"NodeGroupGetOptions", rpcCases[6].call, true, ""},
		{"Ext/NodeGroupAtomicIncreaseSize", rpcCases[8].call, true, ""},
		{"Ext/NodeGroupIncreaseSize", rpcCases[7].call, false, "NodeGroupIncreaseSize"},
		{"Ext/NodeGroupForceDeleteNodes", rpcCases[9].call, false, "NodeGroupDeleteNodes"},
		{"Ext/NodeGroupInstances", rpcCases[10].call, false, "NodeGroupNodes"},
		{"Ext/NodeGroupTemplate", rpcCases[11].call, false, "NodeGroupTemplateNodeInfo"},
	} {
		t.Run(tc.rpc, func(t *testing.T) {
			cp := &fakeCP{}
			g := cp.add("gpu", 0, 4)
			g.template = gpuTemplate("t")
			g.instances = []cloudprovider.Instance{{Id: "fake://gpu/0"}}
			e := start(t, cp, Config{})
			e.refresh(t)
			e.faults.set(tc.rpc, unimpl)
			err := tc.call(e.p, e.group(t, "gpu"))
			if tc.notImpl {
				if !errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatalf("error %v, want ErrNotImplemented", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v, want upstream's %s used instead", err, tc.fallback)
			}
			if n := e.faults.calls(tc.fallback); n != 1 {
				t.Fatalf("%s called %d times, want 1", tc.fallback, n)
			}
		})
	}
}

// TestProviderErrorsCrossTheWire: what the provider behind the server
// says reaches the client: its message (code Unknown), a group that no
// longer exists (NotFound), ErrNotImplemented (Unimplemented).
func TestProviderErrorsCrossTheWire(t *testing.T) {
	cp := &fakeCP{}
	g := cp.add("gpu", 0, 4)
	e := start(t, cp, Config{})
	e.refresh(t)
	ng := e.group(t, "gpu")

	g.err["TargetSize"] = errors.New("quota service down")
	_, err := ng.TargetSize()
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.Unknown || !strings.Contains(ce.Message, "quota service down") {
		t.Fatalf("TargetSize = %v, want Unknown with the provider's message", err)
	}
	// No template from the provider: ErrNotImplemented on both services.
	if _, err := ng.TemplateNodeInfo(); !errors.Is(err, cloudprovider.ErrNotImplemented) {
		t.Fatalf("TemplateNodeInfo = %v, want ErrNotImplemented", err)
	}
	cp.groups = nil
	_, err = ng.Nodes()
	if !errors.As(err, &ce) || ce.Code != codes.NotFound || ce.Group != "gpu" {
		t.Fatalf("Nodes of a vanished group = %v, want NotFound naming gpu", err)
	}
}

func TestBadArgumentsNeverReachTheServer(t *testing.T) {
	cp := &fakeCP{}
	cp.add("gpu", 0, 4)
	e := start(t, cp, Config{})
	e.refresh(t)
	ng := e.group(t, "gpu")
	for name, err := range map[string]error{
		"IncreaseSize 0":         func() error { _, err := ng.IncreaseSize(ctx, 0); return err }(),
		"AtomicIncreaseSize -1":  func() error { _, err := ng.AtomicIncreaseSize(ctx, -1); return err }(),
		"DecreaseTargetSize(+1)": ng.DecreaseTargetSize(ctx, 1),
	} {
		if err == nil || !strings.Contains(err.Error(), "node group gpu") {
			t.Errorf("%s: error %v, want one naming the group", name, err)
		}
	}
	for _, rpc := range []string{"Ext/NodeGroupIncreaseSize", "Ext/NodeGroupAtomicIncreaseSize", "NodeGroupDecreaseTargetSize"} {
		if n := e.faults.calls(rpc); n != 0 {
			t.Errorf("%s reached the server %d times", rpc, n)
		}
	}
}

// TestRetries: reads are retried on UNAVAILABLE, mutations never.
func TestRetries(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "restarting")
	for _, tc := range []struct {
		rpc   string
		call  func(p *Provider, g cloudprovider.NodeGroup) error
		calls int // RPCs the server sees
		ok    bool
	}{
		{"NodeGroupTargetSize", rpcCases[3].call, 3, true},
		{"Ext/NodeGroupInstances", rpcCases[10].call, 3, true},
		{"Ext/NodeGroupTemplate", rpcCases[11].call, 3, true},
		{"Ext/NodeGroupIncreaseSize", rpcCases[7].call, 1, false},
		{"Ext/NodeGroupAtomicIncreaseSize", rpcCases[8].call, 1, false},
		{"NodeGroupDeleteNodes", rpcCases[4].call, 1, false},
		{"NodeGroupDecreaseTargetSize", rpcCases[5].call, 1, false},
	} {
		t.Run(tc.rpc, func(t *testing.T) {
			cp := &fakeCP{}
			g := cp.add("gpu", 0, 4)
			g.template = gpuTemplate("t")
			e := start(t, cp, Config{})
			e.refresh(t)
			// Two failures, then the real answer.
			e.faults.set(tc.rpc, unavailable, unavailable, nil)
			err := tc.call(e.p, e.group(t, "gpu"))
			if (err == nil) != tc.ok {
				t.Fatalf("error %v, want ok=%v", err, tc.ok)
			}
			if n := e.faults.calls(tc.rpc); n != tc.calls {
				t.Fatalf("server saw %d calls, want %d", n, tc.calls)
			}
		})
	}
}

func TestRefreshRetriedWhileTheServerRestarts(t *testing.T) {
	cp := &fakeCP{}
	cp.add("gpu", 0, 4)
	e := start(t, cp, Config{})
	unavailable := status.Error(codes.Unavailable, "restarting")
	e.faults.set("Refresh", unavailable, unavailable, unavailable, nil)
	e.refresh(t)
	if n := e.faults.calls("Refresh"); n != 4 {
		t.Fatalf("Refresh attempts %d, want 4", n)
	}
	e.faults.set("NodeGroups", unavailable)
	if err := e.p.Refresh(ctx); err == nil {
		t.Fatal("a server that stays unavailable: Refresh succeeded")
	}
	if len(e.p.NodeGroups()) != 0 {
		t.Fatal("groups left after a failed Refresh")
	}
}

func TestTimeouts(t *testing.T) {
	cp := &fakeCP{}
	cp.add("gpu", 0, 4)
	e := start(t, cp, Config{GRPCTimeout: metav1.Duration{Duration: 100 * time.Millisecond}})
	e.refresh(t)
	ng := e.group(t, "gpu")
	e.faults.setDelay("NodeGroupTargetSize", time.Second)
	_, err := ng.TargetSize()
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != codes.DeadlineExceeded || !ce.Unknown() {
		t.Fatalf("slow TargetSize = %v, want DeadlineExceeded", err)
	}
	// The caller's context ends a mutation before grpc_timeout does.
	e.faults.setDelay("Ext/NodeGroupIncreaseSize", time.Second)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ng.IncreaseSize(cctx, 1)
	if !errors.As(err, &ce) || ce.Code != codes.Canceled {
		t.Fatalf("IncreaseSize with a cancelled context = %v, want Canceled", err)
	}
}

func TestErrorClassesAreMappedNotCast(t *testing.T) {
	cp := &fakeCP{}
	g := cp.add("gpu", 0, 4)
	g.instances = []cloudprovider.Instance{
		{Id: "a", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "boom"}}},
		{Id: "b", Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "stockout", ErrorMessage: "no GPUs"}}},
		{Id: "c"},
	}
	for _, cfg := range []Config{{}, {Extension: ExtensionOff}} {
		e := start(t, cp, cfg)
		e.refresh(t)
		insts, err := e.group(t, "gpu").Nodes()
		if err != nil {
			t.Fatal(err)
		}
		if c := insts[0].Status.ErrorInfo.ErrorClass; c != cloudprovider.OtherErrorClass {
			t.Errorf("extension %q: other class came back as %d", cfg.Extension, c)
		}
		if e := insts[1].Status.ErrorInfo; e.ErrorClass != cloudprovider.OutOfResourcesErrorClass || e.ErrorMessage != "no GPUs" {
			t.Errorf("extension %q: out-of-resources came back as %+v", cfg.Extension, e)
		}
		if insts[2].Status != nil {
			t.Errorf("extension %q: unknown state came back as %+v", cfg.Extension, insts[2].Status)
		}
	}
}
