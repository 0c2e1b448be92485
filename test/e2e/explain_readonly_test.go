package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// explainMayCall are the only RPCs explain may send: reads.
var explainMayCall = []string{"Refresh", "GetCapabilities", "NodeGroups", "NodeGroupForNode", "NodeGroupTargetSize", "NodeGroupNodes",
	"NodeGroupInstances", "NodeGroupTemplate", "NodeGroupTemplateNodeInfo", "NodeGroupGetOptions", "Reservations",
	"PricingNodePrice", "PricingPodPrice", "GPULabel", "GetAvailableGPUTypes"}

// `explain` against a running autoscaler on an external gRPC server that,
// as upstream's example server does, tears its provider down on Cleanup:
// the server, which records every call, receives no Cleanup and no write
// from explain while it runs and after it exits, only reads (told apart
// by their user agent), and the running autoscaler still scales through
// it afterwards.
func TestExplainReadOnlyOverExternalGRPC(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 2)
	kp := s.kwokBehindGRPC(t, cpu)
	cloudConfig, rec := framework.ServeGRPCWith(t, kp, framework.GRPCServeOptions{TearDownOnCleanup: true})
	a := s.c.StartAutoscaler(t, kwok.Config{}, "--cloud-provider=externalgrpc", "--cloud-config="+cloudConfig, "--namespace="+s.ns)

	// A pod no group can help (8 CPUs on 4-CPU nodes): the autoscaler
	// leaves it pending, and explain has something to say.
	s.c.Create(s.ctx, t, s.pod("big").CPU("8").Obj())
	s.waitEvent(t, "big", "NotTriggerScaleUp", 2*time.Minute, cpu.Name)

	code, out, logs := s.c.ExplainWith(t, "--cloud-provider=externalgrpc", "--cloud-config="+cloudConfig, "--namespace="+s.ns, s.ns+"/big")
	if code != 0 {
		t.Fatalf("explain exited %d:\n%s\n%s", code, out, logs)
	}
	if !strings.Contains(out, cpu.Name) {
		t.Errorf("explain does not name the group %s:\n%s", cpu.Name, out)
	}

	calls := rec.Calls()
	var explains []string
	for _, c := range calls {
		if c.Name() == "Cleanup" {
			t.Errorf("the server received Cleanup (user agent %q)", c.UserAgent)
		}
		if !strings.HasPrefix(c.UserAgent, externalgrpc.ReadOnlyUserAgent+" ") {
			continue
		}
		explains = append(explains, c.Name())
		if !slices.Contains(explainMayCall, c.Name()) {
			t.Errorf("explain sent %s, which is no read", c.Method)
		}
	}
	t.Logf("explain's calls: %v", explains)
	// Explain must have been seen, or the test proves nothing.
	if !slices.Contains(explains, "Refresh") || !slices.Contains(explains, "NodeGroups") {
		t.Fatalf("no Refresh and NodeGroups from explain's user agent %q among %d calls", externalgrpc.ReadOnlyUserAgent, len(calls))
	}

	// The server is intact: the running autoscaler scales through it.
	s.c.Create(s.ctx, t, s.pod("web").CPU("1").Obj())
	s.waitOnGroup(t, "web", cpu.Name)
	for _, c := range rec.Calls() {
		if c.Name() == "Cleanup" {
			t.Errorf("the server received Cleanup (user agent %q)", c.UserAgent)
		}
	}
	if !slices.ContainsFunc(rec.Calls(), func(c framework.RPC) bool {
		return strings.Contains(c.Name(), "IncreaseSize") && strings.HasPrefix(c.UserAgent, externalgrpc.UserAgent+" ")
	}) {
		t.Errorf("the autoscaler's scale-up was not seen by the server")
	}
	if a.Exited() {
		t.Fatal("the autoscaler exited")
	}
}
