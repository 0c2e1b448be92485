package controlplane

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := ClusterConfig{StateDir: "s", BinDir: "b", KwokStageDir: "k", Ports: PortsFrom(20000)}
	tests := []struct {
		name    string
		mutate  func(*ClusterConfig)
		wantErr string
	}{
		{"valid", func(*ClusterConfig) {}, ""},
		{"no state dir", func(c *ClusterConfig) { c.StateDir = "" }, "StateDir"},
		{"port out of range", func(c *ClusterConfig) { c.Ports.Kwok = 70000 }, "port of kwok is 70000"},
		{"port shared", func(c *ClusterConfig) { c.Ports.Scheduler = c.Ports.APIServer }, "both use port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.mutate(&cfg)
			err := cfg.validate()
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("validate() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestTail(t *testing.T) {
	if got := tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("tail = %q", got)
	}
	if got := tail("a", 5); got != "a" {
		t.Errorf("tail = %q", got)
	}
}

// A control plane that cannot start names the component that failed and
// shows its last log lines.
func TestStartFailsNamingComponent(t *testing.T) {
	ctx := context.Background()
	root, err := ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(root, "_out", "bin")
	// No deadline of our own on the build: cold, it is the slow part, and
	// go test's -timeout bounds it.
	if err := EnsureBinaries(ctx, binDir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stageDir, err := KwokStageDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, component, logLine string
		occupy                   func(Ports) int
	}{
		{"apiserver port taken", "kube-apiserver", "address already in use", func(p Ports) int { return p.APIServer }},
		{"etcd port taken", "etcd", "address already in use", func(p Ports) int { return p.Etcd }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ports, err := FreePorts()
			if err != nil {
				t.Fatal(err)
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", tc.occupy(ports)))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			cp, err := Start(ctx, ClusterConfig{StateDir: t.TempDir(), BinDir: binDir, KwokStageDir: stageDir,
				Ports: ports, ReadyTimeout: time.Minute})
			if err == nil {
				_ = cp.Stop()
				t.Fatal("Start succeeded with a port taken")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.component+" ") || !strings.Contains(msg, "--- last lines of") || !strings.Contains(msg, tc.logLine) {
				t.Fatalf("error does not name %s with its log tail mentioning %q:\n%s", tc.component, tc.logLine, msg)
			}
			// Nothing of the failed attempt is left listening.
			for _, p := range []int{ports.Etcd, ports.EtcdPeer, ports.APIServer} {
				if p == tc.occupy(ports) {
					continue
				}
				if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
					t.Errorf("port %d still in use after the failed start: %v", p, err)
				} else {
					l.Close()
				}
			}
		})
	}
}
