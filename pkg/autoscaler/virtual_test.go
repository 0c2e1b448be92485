package autoscaler_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/nominate"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The loop's behaviour over time (cooldowns, unneeded time, provision
// timeouts, backoff, nominations' timeouts), tested in virtual time: in
// a synctest bubble the wiring runs on the real clock and the real
// ticker of loop.Run, and time moves only when every goroutine of the
// bubble waits, so minutes pass at once and exactly.

// scanInterval is the virtual loop's --scan-interval.
const scanInterval = 10 * time.Second

// running is the autoscaler running its loop in a bubble.
type running struct {
	*fixture
	began time.Time
}

// runLoop wires the autoscaler over objs (setup may change the options
// and the world; the scan interval is scanInterval) and runs its loop
// until the test ends. Call it inside synctest.Test.
func runLoop(t *testing.T, setup func(*config.Options, *autoscaler.Env), provider *fakeprovider.Provider, objs ...runtime.Object) *running {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	// Everything the wiring starts (the scheduler framework's metrics
	// goroutine too) ends with ctx: the bubble must end empty.
	ctx, cancel := context.WithCancel(ctx)
	f := newLoopWith(t, ctx, func(o *config.Options, env *autoscaler.Env) {
		o.ScanInterval = scanInterval
		if setup != nil {
			setup(o, env)
		}
	}, nil, record.NewFakeRecorder(1000), provider, objs...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Loop.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Wait()
	})
	return &running{fixture: f, began: time.Now()}
}

// at lets virtual time pass until d after the loop started, the loop
// running its passes (at 0, then every scanInterval), and waits until
// every pass due by then has ended.
func (r *running) at(d time.Duration) {
	time.Sleep(time.Until(r.began.Add(d)))
	synctest.Wait()
}

// calls are the group's provider calls by method.
func calls(g *fakeprovider.FakeNodeGroup) map[string]int {
	out := map[string]int{}
	for _, c := range g.Calls() {
		out[c.Method]++
	}
	return out
}

// groupNode is a registered, ready node of g (an instance of its own,
// the group's target counting it) that has existed for an hour.
func groupNode(g *fakeprovider.FakeNodeGroup, name, cpu string) *runtimeNode {
	id := g.AddInstance(cloudprovider.InstanceRunning, nil)
	g.SetTarget(g.Target() + 1)
	n := builder.Node(name).CPU(cpu).Memory("32Gi").Obj()
	n.Spec.ProviderID = id
	n.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	return &runtimeNode{Node: n, id: id}
}

// An empty node is removed once it has been unneeded for
// --scale-down-unneeded-time, not a pass before.
func TestVirtualUnneededTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := cpuGroup("cpu", "4")
		n := groupNode(g, "idle", "4")
		r := runLoop(t, func(o *config.Options, _ *autoscaler.Env) { o.ScaleDown.UnneededTime = 10 * time.Minute },
			fakeprovider.New(g), n.Node)
		r.at(10*time.Minute - scanInterval/2)
		if c := calls(g); c["DeleteNodes"] != 0 {
			t.Fatalf("removed before the unneeded time: %v", g.Calls())
		}
		r.at(10*time.Minute + 2*scanInterval)
		if c := g.Calls(); len(c) != 1 || c[0].Method != "DeleteNodes" || c[0].Nodes[0] != n.id {
			t.Fatalf("calls %+v, want the idle node deleted", c)
		}
	})
}

// runtimeNode is a Node and its instance's providerID.
type runtimeNode struct {
	*corev1.Node
	id string
}

// pendingFor is a pod of cpu CPUs the scheduler found unschedulable
// when the test began.
func pendingFor(name, cpu string) *corev1.Pod {
	p := unschedulablePod(name, cpu)
	p.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute))
	return p
}

// No node is removed within --scale-down-delay-after-add of a
// scale-up, though it has been unneeded far longer; it goes once the
// cooldown ends.
func TestVirtualCooldownAfterScaleUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small, big := cpuGroup("small", "4"), cpuGroup("big", "16")
		idle := groupNode(small, "idle", "4")
		r := runLoop(t, func(o *config.Options, _ *autoscaler.Env) {
			o.ScaleDown.UnneededTime, o.ScaleDown.DelayAfterAdd = time.Minute, 10*time.Minute
		}, fakeprovider.New(small, big), idle.Node, pendingFor("trainer", "8"))
		r.at(scanInterval / 2)
		if c := calls(big); c["IncreaseSize"] != 1 {
			t.Fatalf("big's calls %+v, want the scale-up at once", big.Calls())
		}
		r.at(10*time.Minute - scanInterval/2)
		if c := calls(small); c["DeleteNodes"] != 0 {
			t.Fatalf("idle removed inside the cooldown: %+v", small.Calls())
		}
		r.at(10*time.Minute + 2*scanInterval)
		if c := small.Calls(); len(c) != 1 || c[0].Method != "DeleteNodes" || c[0].Nodes[0] != idle.id {
			t.Fatalf("small's calls %+v, want idle deleted once the cooldown ended", c)
		}
	})
}

// A node that never registers is given up after
// --max-node-provision-time (its instance deleted), and the group is
// backed off: the pod waits --initial-node-group-backoff-duration
// before the group is asked again.
func TestVirtualProvisionTimeoutAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := cpuGroup("big", "16")
		r := runLoop(t, func(o *config.Options, _ *autoscaler.Env) {
			o.MaxNodeProvisionTime, o.InitialNodeGroupBackoffDuration = 5*time.Minute, 3*time.Minute
		}, fakeprovider.New(big), pendingFor("trainer", "8"))
		r.at(5*time.Minute - scanInterval/2)
		if c := calls(big); c["IncreaseSize"] != 1 || len(big.Calls()) != 1 {
			t.Fatalf("calls %+v, want only the scale-up before the provision time", big.Calls())
		}
		// Given up by the first pass past the provision time (5m10s:
		// at 5m it is not past yet), backed off from then.
		r.at(5*time.Minute + 2*scanInterval)
		if c := calls(big); c["DeleteNodes"]+c["ForceDeleteNodes"]+c["DecreaseTargetSize"] != 1 || c["IncreaseSize"] != 1 {
			t.Fatalf("calls %+v, want the late instance given up, nothing asked again", big.Calls())
		}
		r.at(8*time.Minute + scanInterval/2)
		if c := calls(big); c["IncreaseSize"] != 1 {
			t.Fatalf("calls %+v, want no scale-up inside the backoff", big.Calls())
		}
		r.at(8*time.Minute + 3*scanInterval)
		if c := calls(big); c["IncreaseSize"] != 2 {
			t.Fatalf("calls %+v, want the group asked again once the backoff ended", big.Calls())
		}
	})
}

// A group whose creations fail is backed off for the initial backoff,
// then for twice that after it fails again.
func TestVirtualBackoffDoubles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := cpuGroup("flaky", "16")
		flaky.FailIncrease(errors.New("quota exceeded"), 0)
		r := runLoop(t, func(o *config.Options, _ *autoscaler.Env) {
			o.InitialNodeGroupBackoffDuration, o.MaxNodeGroupBackoffDuration = 2*time.Minute, time.Hour
		}, fakeprovider.New(flaky), pendingFor("trainer", "8"))
		for _, step := range []struct {
			at   time.Duration
			want int
		}{
			{scanInterval / 2, 1},               // tried at once, failed
			{2*time.Minute - scanInterval/2, 1}, // backed off
			{2*time.Minute + 2*scanInterval, 2}, // tried again, failed
			{6*time.Minute - scanInterval/2, 2}, // backed off twice as long
			{6*time.Minute + 2*scanInterval, 3}, // and tried again
		} {
			r.at(step.at)
			if got := calls(flaky)["IncreaseSize"]; got != step.want {
				t.Fatalf("at %s: %d attempts (%+v), want %d", time.Since(r.began).Round(time.Second), got, flaky.Calls(), step.want)
			}
		}
	})
}

// A nomination the scheduler does not follow within
// --nomination-timeout is cleared, counted as ignored, and the pod is
// not nominated again.
func TestVirtualNominationTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small := cpuGroup("small", "4")
		n1 := groupNode(small, "n1", "4")
		r := runLoop(t, func(o *config.Options, _ *autoscaler.Env) {
			o.Nominations.Enabled, o.Nominations.Timeout = true, time.Minute
		}, fakeprovider.New(small), n1.Node, pendingFor("p", "2"))
		nominated := func() string {
			t.Helper()
			p, err := r.client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return p.Status.NominatedNodeName
		}
		for _, step := range []struct {
			at      time.Duration
			want    string
			ignored float64
		}{
			{scanInterval / 2, "n1", 0},             // nominated by the first pass
			{time.Minute - scanInterval/2, "n1", 0}, // kept while the scheduler may follow
			{time.Minute + 2*scanInterval, "", 1},   // cleared once the timeout passed
			{10 * time.Minute, "", 1},               // and not nominated again
		} {
			r.at(step.at)
			got, ignored := nominated(), testutil.ToFloat64(r.Metrics.NominationOutcomes.WithLabelValues(nominate.Ignored))
			if got != step.want || ignored != step.ignored {
				t.Fatalf("at %s: nominated for %q, %v ignored; want %q, %v", time.Since(r.began).Round(time.Second), got, ignored, step.want, step.ignored)
			}
		}
	})
}
