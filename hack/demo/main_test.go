package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }

// The demo, with short clocks, on a control plane of its own: every scene
// behaves, and the autoscaler it leaves running is recorded for make down.
func TestDemoScenes(t *testing.T) {
	c := framework.Get(t)
	state := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	out := &syncBuffer{}
	o, err := parseOptions([]string{
		"--kubeconfig=" + c.Kubeconf, "--state-dir=" + state, "--autoscaler=" + c.AutoscalerBinary(t),
		"--cloud-config=../../deploy/kwok/kwok-provider.yaml", "--scenes-config=scenes-kwok.yaml",
		"--sharing-config=../../deploy/examples/kwok-sharing.yaml",
		"--log=" + filepath.Join(state, "autoscaler.log"), "--address=" + addr,
		"--scale-down-unneeded-time=3s", "--scene-timeout=2m",
	}, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := controlplane.StopAutoscaler(state); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err = run(ctx, o)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("%v\nthe end of the autoscaler's log:\n%s", err, fileTail(o.logFile, 60))
	}
	scenes := (&demo{o: o, cfg: &kwok.Config{}}).scenes()
	if got := strings.Count(out.String(), "   result: ok "); got != len(scenes) {
		t.Errorf("%d scene results ok, want %d", got, len(scenes))
	}
	data, err := os.ReadFile(filepath.Join(state, controlplane.AutoscalerPIDFile))
	if err != nil {
		t.Fatalf("the autoscaler left running is not recorded: %v", err)
	}
	if pid := strings.TrimSpace(string(data)); !strings.Contains(out.String(), "(pid "+pid+",") {
		t.Errorf("the hints name another pid than the recorded %s", pid)
	}
	for _, hint := range []string{"cluster-autoscaler-status", addr + "/metrics", " explain ", "make down"} {
		if !strings.Contains(out.String(), hint) {
			t.Errorf("the closing hints lack %q", hint)
		}
	}
}

func TestParseOptionsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--scene-timeout=0s"},
		{"--scan-interval=-1s"},
		{"--gpu-pods=-1"},
		{"--nope"},
		{"extra"},
	} {
		var out bytes.Buffer
		if _, err := parseOptions(args, &out); err == nil {
			t.Errorf("parseOptions(%q) accepted", args)
		}
	}
	if o, err := parseOptions(nil, &bytes.Buffer{}); err != nil || o.provider != "kwok" || o.unneededTime != 10*time.Second {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
