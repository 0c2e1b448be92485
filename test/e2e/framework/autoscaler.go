package framework

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/shadow"
)

// AutoscalerBinary builds cmd/dra-autoscaler (once per test binary) and
// returns its path: the e2e tests drive the real binary, flags and all.
func (c *Cluster) AutoscalerBinary(t testing.TB) string { return autoscalerBin.build(t, c) }

// goBinary is a main package of this module, built once per test binary
// into the cluster's bin directory.
type goBinary struct {
	pkg, name string
	once      sync.Once
	path      string
	err       error
}

var autoscalerBin = &goBinary{pkg: "./cmd/dra-autoscaler", name: "dra-autoscaler"}

func (b *goBinary) build(t testing.TB, c *Cluster) string {
	t.Helper()
	b.once.Do(func() {
		path := filepath.Join(c.BinDir, b.name)
		cmd := exec.Command("go", "build", "-o", path, b.pkg)
		cmd.Dir = filepath.Dir(filepath.Dir(c.BinDir)) // _out/bin -> module root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", b.name, err, out)
			return
		}
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Autoscaler is a running dra-autoscaler process.
type Autoscaler struct {
	cmd     *exec.Cmd
	log     *lockedBuffer
	Address string // host:port of /metrics and /health-check
	done    chan struct{}
}

// StartAutoscaler runs the binary against this cluster with the kwok
// provider configured by kwokConfig (marshalled to YAML), on a free port,
// with args appended (they override the defaults given here). It is
// stopped when the test ends, and its log is printed if the test failed.
func (c *Cluster) StartAutoscaler(t testing.TB, kwokConfig any, args ...string) *Autoscaler {
	t.Helper()
	bin := c.AutoscalerBinary(t)
	cfgPath := WriteKwokConfig(t, kwokConfig)
	addr := freeAddr(t)
	all := append([]string{
		"--kubeconfig=" + c.Kubeconf,
		"--cloud-provider=kwok",
		"--cloud-config=" + cfgPath,
		"--scan-interval=1s",
		"--address=" + addr,
		"--leader-elect=false",
		// The lease names the autoscaler, and so the owner of its NodeGroup
		// objects: autoscalers of parallel tests must not take each
		// other's for their own, while a test's restarted autoscaler is
		// the same one (a test leading with a lease of its own names it
		// after this).
		"--leader-elect-resource-name=" + leaseName(t),
		// The tests share one control plane, and some take nodes down on
		// purpose (outages, faults): an autoscaler judges the cluster
		// unhealthy only when its own test sets the thresholds.
		"--ok-total-unready-count=1000",
		// Every simulation decision is checked against the plain
		// framework; the test fails on a difference (below).
		"--simulation-verify",
		// The simulated scheduler runs with the cluster scheduler's gates
		// (Workload API, gangs, topology, PodGroup claims), as a user is
		// told to run it.
		"--feature-gates=" + *featureGates,
		"--v=2",
	}, args...)
	a := &Autoscaler{cmd: exec.Command(bin, all...), log: &lockedBuffer{}, Address: addr, done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.Stop()
		if m := mismatches(a.Log()); len(m) > 0 {
			t.Errorf("the autoscaler's simulation shortcuts answered differently from the plain framework (--simulation-verify):\n%s", strings.Join(m, "\n"))
		}
		if t.Failed() {
			t.Logf("dra-autoscaler log (%s):\n%s", strings.Join(all, " "), tail(a.Log(), 80))
		}
	})
	return a
}

// mismatches are the log's lines that report a mismatch.
func mismatches(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, shadow.Message) {
			out = append(out, line)
		}
	}
	return out
}

// Stop ends the process (SIGTERM, then SIGKILL).
func (a *Autoscaler) Stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// Kill ends the process with SIGKILL at once, as a crash or a lost node
// would, leaving whatever it was doing half done.
func (a *Autoscaler) Kill() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

// Exited tells whether the process has ended.
func (a *Autoscaler) Exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// PeakRSS is the process's peak resident set so far, in bytes (VmHWM of
// /proc/<pid>/status; Linux only).
func (a *Autoscaler) PeakRSS() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", a.cmd.Process.Pid)
}

// Log is everything the process printed so far.
func (a *Autoscaler) Log() string { return a.log.String() }

// Metrics fetches /metrics.
func (a *Autoscaler) Metrics(ctx context.Context) (string, error) {
	return HTTPGet(ctx, "http://"+a.Address+"/metrics")
}

// HTTPGet returns the body of a GET.
func HTTPGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// RunAutoscaler runs the binary to completion with exactly args and returns
// its exit code and output, for start-up failures.
func (c *Cluster) RunAutoscaler(t testing.TB, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.AutoscalerBinary(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("dra-autoscaler %v still running after %s:\n%s", args, timeout, out)
	}
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// leaseName is the lease name of a test's autoscaler.
func leaseName(t testing.TB) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(t.Name()))
	return fmt.Sprintf("e2e-%016x", h.Sum64())
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
