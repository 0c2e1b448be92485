package controlplane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StopAutoscaler stops the recorded process only if it is a dra-autoscaler,
// and removes the record either way.
func TestStopAutoscaler(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "dra-autoscaler")
	if err := os.WriteFile(fake, data, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(bin string) *exec.Cmd {
		cmd := exec.Command(bin, "300")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		// Start returns once the exec began; the kernel shows the new
		// command line a moment later (an empty one until then).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if c, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline"); err == nil && len(c) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no command line after 10s", bin)
			}
		}
		return cmd
	}
	record := filepath.Join(dir, AutoscalerPIDFile)

	// Nothing recorded: nothing to do.
	if pid, err := StopAutoscaler(dir); pid != 0 || err != nil {
		t.Fatalf("no record: %d, %v", pid, err)
	}
	// A recorded dra-autoscaler is stopped.
	auto := start(fake)
	exited := make(chan struct{})
	go func() { _ = auto.Wait(); close(exited) }()
	if err := RecordAutoscaler(dir, auto.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if pid, err := StopAutoscaler(dir); pid != auto.Process.Pid || err != nil {
		t.Fatalf("stopping %d: %d, %v", auto.Process.Pid, pid, err)
	}
	<-exited
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("record left: %v", err)
	}
	// A recycled pid of another program is left alone.
	other := start(sleep)
	if err := os.WriteFile(record, []byte(strconv.Itoa(other.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, err := StopAutoscaler(dir); pid != 0 || err != nil {
		t.Fatalf("another program: %d, %v", pid, err)
	}
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(other.Process.Pid) + "/stat"); err != nil || strings.Contains(string(stat), ") Z ") {
		t.Error("another program was stopped")
	}
	// A record that is not a pid is dropped.
	if err := os.WriteFile(record, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, err := StopAutoscaler(dir); pid != 0 || err != nil {
		t.Fatalf("garbage: %d, %v", pid, err)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("garbage record left: %v", err)
	}
}
