package framework

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// Zone is a kwok controller of a test's own: it keeps alive the nodes
// annotated kwok.x-k8s.io/node=<its name> (a kwok group's
// template.annotations sets that) and their pods, as the kubelets of one
// zone would. Stopping it is a zone outage: the nodes' leases lapse, the
// node lifecycle controller marks them NotReady and taints them, their
// pods stay Terminating once evicted; starting it again ends the outage.
type Zone struct {
	Name string
	c    *Cluster
	log  *lockedBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartZone starts a kwok controller for nodes annotated with name (unique
// to the test: use its namespace); it is stopped when the test ends.
func (c *Cluster) StartZone(t testing.TB, name string) *Zone {
	t.Helper()
	z := &Zone{Name: name, c: c, log: &lockedBuffer{}}
	z.Start(t)
	t.Cleanup(func() {
		z.Stop()
		if t.Failed() {
			t.Logf("kwok controller of zone %s:\n%s", name, tail(z.log.String(), 40))
		}
	})
	return z
}

// Start runs the controller (again) and waits until it serves its health.
func (z *Zone) Start(t testing.TB) {
	t.Helper()
	stages, err := controlplane.KwokStageDir(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	var n int
	if _, err := fmt.Sscan(port, &n); err != nil {
		t.Fatal(err)
	}
	args := append(controlplane.KwokArgs(z.c.Kubeconf, stages, z.Name, n), "--v=2")
	cmd := exec.Command(filepath.Join(z.c.BinDir, "kwok"), args...)
	cmd.Stdout, cmd.Stderr = z.log, z.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	z.mu.Lock()
	z.cmd, z.done = cmd, done
	z.mu.Unlock()
	err = WaitFor(context.Background(), time.Minute, "kwok controller of zone "+z.Name+" serving", func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			return false, "", fmt.Errorf("kwok exited:\n%s", tail(z.log.String(), 20))
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Stop ends the controller at once (SIGKILL: kubelets that lose their
// network say nothing either).
func (z *Zone) Stop() {
	z.mu.Lock()
	cmd, done := z.cmd, z.done
	z.cmd = nil
	z.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}
