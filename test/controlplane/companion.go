package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AutoscalerPIDFile, in the state directory, holds the pid of a
// dra-autoscaler left running on the control plane (the demo leaves one, to
// be looked at); whoever stops the control plane stops it first.
const AutoscalerPIDFile = "dra-autoscaler.pid"

// RecordAutoscaler notes pid in stateDir's AutoscalerPIDFile.
func RecordAutoscaler(stateDir string, pid int) error {
	return os.WriteFile(filepath.Join(stateDir, AutoscalerPIDFile), []byte(strconv.Itoa(pid)), 0o644)
}

// StopAutoscaler ends the dra-autoscaler recorded in stateDir, if it still
// runs (SIGTERM, then SIGKILL after 15s), and removes the record. It
// returns the pid it stopped, 0 if none ran.
func StopAutoscaler(stateDir string) (int, error) {
	path := filepath.Join(stateDir, AutoscalerPIDFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !isAutoscaler(pid) {
		return 0, os.Remove(path)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !exits(pid, 15*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !exits(pid, 5*time.Second) {
			return pid, fmt.Errorf("dra-autoscaler (pid %d) did not exit after SIGKILL", pid)
		}
	}
	return pid, os.Remove(path)
}

// isAutoscaler guards against a recycled pid: only a live process whose
// command line names dra-autoscaler counts (a zombie has exited; it waits
// for its parent to reap it).
func isAutoscaler(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), "dra-autoscaler") {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

func exits(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for isAutoscaler(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
