package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// `up` twice works (the second finds the first), and `down` leaves no
// process and no listening port behind.
func TestUpTwiceThenDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := controlplane.ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(root, "_out", "bin")
	self := filepath.Join(t.TempDir(), "localcluster")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", self, ".").CombinedOutput(); err != nil {
		t.Fatalf("building localcluster: %v\n%s", err, out)
	}
	stateDir := t.TempDir()
	base := freePortRun(t, 6)
	run := func(args ...string) string {
		t.Helper()
		args = append(args, "--state-dir", stateDir, "--bin-dir", binDir, "--port-base", fmt.Sprint(base))
		out, err := exec.CommandContext(ctx, self, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("localcluster %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(self, "down", "--state-dir", stateDir).Run() })

	out := run("up")
	// One line per component as it starts and as it is ready, then the total.
	for _, want := range []string{"build kube-apiserver: ok", "build kwok", "start etcd ...", "start etcd: ok",
		"start kube-apiserver: ok", "start kube-controller-manager: ok", "start kube-scheduler: ok", "start kwok: ok", "ready in "} {
		if !strings.Contains(out, want) {
			t.Errorf("first up does not say %q:\n%s", want, out)
		}
	}
	pid := strings.TrimSpace(readFile(t, filepath.Join(stateDir, "pid")))
	if out := run("up"); !strings.Contains(out, "already running (pid "+pid+")") {
		t.Fatalf("second up did not find the running control plane (pid %s): %s", pid, out)
	}
	if !strings.Contains(readFile(t, filepath.Join(stateDir, "kubeconfig")), fmt.Sprintf("127.0.0.1:%d", base+2)) {
		t.Fatal("kubeconfig does not point at the apiserver port")
	}
	// An autoscaler the demo left running goes with the control plane.
	auto := fakeAutoscaler(t)
	if err := controlplane.RecordAutoscaler(stateDir, auto.Process.Pid); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = auto.Wait(); close(exited) }()
	if out := run("down"); !strings.Contains(out, fmt.Sprintf("stopped dra-autoscaler (pid %d)", auto.Process.Pid)) || !strings.Contains(out, "stopped\n") {
		t.Fatalf("down: %s", out)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("the recorded dra-autoscaler still runs after down")
	}
	for _, p := range controlplane.PortsFrom(base).All() {
		if !portFree(p) {
			t.Errorf("port %d still listening after down", p)
		}
	}
	if procs := processesMentioning(stateDir); len(procs) > 0 {
		t.Errorf("processes left after down: %s", strings.Join(procs, "\n"))
	}
	if out := run("status"); !strings.Contains(out, "not running") {
		t.Errorf("status after down: %s", out)
	}
}

// fakeAutoscaler runs a copy of sleep named dra-autoscaler.
func fakeAutoscaler(t *testing.T) *exec.Cmd {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "dra-autoscaler")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// freePortRun finds n consecutive free ports below the kernel's
// ephemeral range (32768 and up by default): ports there are handed to
// outgoing connections and to the e2e tests' control planes running
// beside this test (port 0), and one was taken between the check and the
// bind (kube-controller-manager: "address already in use").
func freePortRun(t *testing.T, n int) int {
	for range 100 {
		base := 20000 + rand.IntN(12000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			ok = portFree(p)
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// processesMentioning lists live processes whose command line names dir:
// every component gets paths under the state directory.
func processesMentioning(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if s := strings.ReplaceAll(string(cmdline), "\x00", " "); strings.Contains(s, dir) {
			found = append(found, e.Name()+": "+s)
		}
	}
	return found
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
