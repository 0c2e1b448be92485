package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The binary refuses an externalgrpc config without certificates unless
// it says insecure: true: it exits at start with an error naming the file
// and both fixes, without a single call to the server (a plaintext one,
// listening). With insecure: true it runs, says so in its log and in the
// status ConfigMap, and scales.
func TestExternalGRPCRequiresTLSUnlessInsecure(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 2)
	kp := s.kwokBehindGRPC(t, cpu)
	plain, rec := framework.ServeGRPCWith(t, kp, framework.GRPCServeOptions{Insecure: true})
	address := readAddress(t, plain)
	dir := t.TempDir()
	refused := []struct {
		name, config string
		want         []string
	}{
		{"upstream's plaintext config (no cert)", fmt.Sprintf("address: %s\ngrpc_timeout: 10s\n", address),
			[]string{"no TLS: set cacert", "or set insecure: true"}},
		{"insecure: false", fmt.Sprintf("address: %s\ninsecure: false\n", address),
			[]string{"no TLS: set cacert", "or set insecure: true"}},
		{"insecure with a CA", fmt.Sprintf("address: %s\ninsecure: true\ncacert: %s/ca.crt\n", address, dir),
			[]string{"insecure: true and TLS files"}},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			path := framework.WriteFile(t, dir, fmt.Sprintf("refused-%d.yaml", i), tc.config)
			code, out := s.c.RunAutoscaler(t, time.Minute, "--kubeconfig="+s.c.Kubeconf, "--cloud-provider=externalgrpc",
				"--cloud-config="+path, "--address=127.0.0.1:0", "--leader-elect=false", "--namespace="+s.ns)
			if code == 0 || !containsAll(out, append([]string{"--cloud-config: " + path + ": "}, tc.want...)...) {
				t.Errorf("exit %d, want a start-up error naming %s and %q:\n%s", code, path, tc.want, lastLines(out, 20))
			}
			if strings.Contains(out, "panic") {
				t.Errorf("a panic, not an error:\n%s", lastLines(out, 40))
			}
		})
	}
	if calls := rec.Calls(); len(calls) > 0 {
		t.Errorf("a refused config still reached the server: %v", calls)
	}

	a := s.c.StartAutoscaler(t, kwok.Config{}, "--cloud-provider=externalgrpc", "--cloud-config="+plain, "--namespace="+s.ns)
	s.c.Create(s.ctx, t, s.pod("web").CPU("1").Obj())
	s.waitOnGroup(t, "web", cpu.Name)
	if !strings.Contains(a.Log(), "Insecure connection to the externalgrpc server") {
		t.Errorf("no start-up warning of the insecure connection in the log:\n%s", lastLines(a.Log(), 30))
	}
	framework.Eventually(s.ctx, t, time.Minute, "the status says the connection is insecure", func(ctx context.Context) (bool, string, error) {
		st, err := status.Read(ctx, s.c.Client, s.ns, "cluster-autoscaler-status")
		if err != nil || st == nil {
			return false, "no status", err
		}
		return strings.Contains(st.CloudProviderInsecure, address) && strings.Contains(st.CloudProviderInsecure, "insecure: true"),
			fmt.Sprintf("cloudProviderInsecure %q", st.CloudProviderInsecure), nil
	})
}

// readAddress is the address of an externalgrpc --cloud-config file.
func readAddress(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "address: "); ok {
			return v
		}
	}
	t.Fatalf("no address in %s", path)
	return ""
}

// lastLines is the end of a process's output.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
