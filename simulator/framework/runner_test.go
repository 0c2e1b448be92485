package framework

import (
	"context"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	ns        = "default"
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
	pcieRoot  = "resource.kubernetes.io/pcieRoot"
)

// newRunner builds a runner with the default profile and the given gates.
// Gates are process-wide: a test that changes one restores it.
func newRunner(t *testing.T, gates string) (*Runner, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	r, err := New(ctx, Options{FeatureGates: gates})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r, ctx
}

func TestNewRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"unknown gate", Options{FeatureGates: "NoSuchGate=true"}, "NoSuchGate"},
		{"malformed gate", Options{FeatureGates: "DRADeviceTaints"}, "feature gates"},
		{"missing file", Options{ConfigFile: filepath.Join(dir, "absent.yaml")}, "scheduler configuration"},
		{"not a config", Options{ConfigFile: write("pod.yaml", "apiVersion: v1\nkind: Pod\n")}, "scheduler configuration"},
		{"invalid config", Options{ConfigFile: write("bad.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: -1\n")}, "parallelism"},
		{"unknown profile", Options{SchedulerName: "gpu-scheduler"}, "no profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			_, err := New(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New() error = %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigFileProfile(t *testing.T) {
	// A profile without NodeResourcesFit lets an oversized pod through:
	// proof that the file's plugin set is the one running.
	cfg := `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: lenient
  plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesFit
`
	path := filepath.Join(t.TempDir(), "sched.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	r, err := New(ctx, Options{ConfigFile: path})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	snapshottest.Load(t, r.Snapshot(), builder.Node("n1").CPU("1").Obj())
	res, err := r.RunFilters(ctx, builder.Pod(ns, "big").CPU("4").Obj(), []string{"n1"})
	if err != nil || !res[0].Fits {
		t.Fatalf("lenient profile: results %+v, err %v; want the pod to fit", res, err)
	}

	strict, ctx := newRunner(t, "")
	snapshottest.Load(t, strict.Snapshot(), builder.Node("n1").CPU("1").Obj())
	res, err = strict.RunFilters(ctx, builder.Pod(ns, "big").CPU("4").Obj(), []string{"n1"})
	if err != nil || res[0].Fits || res[0].Plugin != names.NodeResourcesFit {
		t.Fatalf("default profile: results %+v, err %v; want NodeResourcesFit to reject", res, err)
	}
}

func TestRunFiltersPerNodeReasonsAndNoSideEffects(t *testing.T) {
	r, ctx := newRunner(t, "")
	s := r.Snapshot()
	snapshottest.Load(t, s,
		builder.Node("small").CPU("1").Obj(),
		builder.Node("tainted").Taint("dedicated", "infer", v1.TaintEffectNoSchedule).Obj(),
		builder.Node("ok").Obj(),
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
	)
	pod := builder.Pod(ns, "p").CPU("2").Obj()
	res, err := r.RunFilters(ctx, pod, []string{"small", "tainted", "ok", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"small": names.NodeResourcesFit, "tainted": names.TaintToleration, "ok": "", "absent": ""}
	for _, nr := range res {
		if nr.Fits != (nr.Node == "ok") || nr.Plugin != want[nr.Node] {
			t.Errorf("node %s: %+v, want plugin %q", nr.Node, nr, want[nr.Node])
		}
		if !nr.Fits && nr.Message == "" {
			t.Errorf("node %s: rejected without a message", nr.Node)
		}
	}
	// A template claim simulated for filtering must not stay behind.
	withClaim := builder.Pod(ns, "q").ClaimFromTemplate("gpu", "one-gpu").Obj()
	if _, err := r.RunFilters(ctx, withClaim, []string{"ok"}); err != nil {
		t.Fatal(err)
	}
	if claims, _ := s.ResourceClaims().List(); len(claims) != 0 || s.Depth() != 0 {
		t.Fatalf("RunFilters left %d claims and %d forks behind", len(claims), s.Depth())
	}
	if _, err := r.RunFilters(ctx, builder.Pod(ns, "no-uid").UID("").Obj(), []string{"ok"}); err == nil {
		t.Fatal("a pod without UID must be refused")
	}
}
