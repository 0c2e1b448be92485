// Command localcluster runs the local control plane of test/controlplane as a
// background service for development and the demo:
//
//	localcluster up      build what is missing, start (or find running), wait until ready
//	localcluster down    stop it; no process or listening port is left behind
//	localcluster status  say whether it runs and where its kubeconfig is
//	localcluster build   only build: the control-plane binaries, kwok, and the Cluster API and Kueue managers the e2e tests run
//
// `up` starts `localcluster serve` detached: that process hosts etcd in
// process and supervises the other components.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

type options struct {
	stateDir, binDir, featureGates, runtimeConfig string
	portBase                                      int
	capi                                          bool
	readyTimeout                                  time.Duration
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var o options
	fs := flag.NewFlagSet(os.Args[1], flag.ContinueOnError)
	fs.StringVar(&o.stateDir, "state-dir", "_out/cluster", "where state, logs and the kubeconfig live")
	fs.StringVar(&o.binDir, "bin-dir", "_out/bin", "where the control-plane binaries are built")
	fs.IntVar(&o.portBase, "port-base", controlplane.DefaultPortBase, "first of six consecutive loopback ports")
	fs.StringVar(&o.featureGates, "feature-gates", controlplane.DefaultFeatureGates, "feature gates of every component")
	fs.StringVar(&o.runtimeConfig, "runtime-config", controlplane.DefaultRuntimeConfig, "kube-apiserver --runtime-config")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for each component")
	fs.BoolVar(&o.capi, "capi", false, "also run Cluster API: its core manager and the dev infrastructure provider of test/capi/infra")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	var err error
	switch os.Args[1] {
	case "build":
		// The e2e tests run the Cluster API and Kueue managers too; built
		// here so the test binaries that start them do not build them side
		// by side.
		err = controlplane.EnsureAll(context.Background(), o.binDir)
	case "up":
		err = up(o)
	case "down":
		err = down(o)
	case "status":
		err = status(o)
	case "serve":
		err = serve(o)
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster up|down|status|build [--state-dir DIR] [--bin-dir DIR] [--port-base N] [--feature-gates G] [--ready-timeout D] [--capi]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
	os.Exit(1)
}

func (o options) file(name string) string { return filepath.Join(o.stateDir, name) }

func up(o options) error {
	if pid, ok := running(o); ok {
		if exists(o.file("ready")) {
			fmt.Printf("already running (pid %d)\nexport KUBECONFIG=%s\n", pid, abs(o.file("kubeconfig")))
			return nil
		}
		return fmt.Errorf("a control plane (pid %d) is starting or stuck in %s; see %s or run down", pid, o.stateDir, o.file("localcluster.log"))
	}
	ctx := context.Background()
	progress := controlplane.NewPrinter(os.Stdout)
	fmt.Println("building the control plane (the first build takes ~15 minutes, later ones seconds)...")
	if err := controlplane.BuildBinaries(ctx, o.binDir, progress.Report); err != nil {
		return err
	}
	if o.capi {
		fmt.Println("building the Cluster API manager (the first build takes ~6 minutes)...")
		done := controlplane.Progress(progress.Report).Begin("build Cluster API manager " + controlplane.CAPIVersion)
		err := controlplane.EnsureCAPIManager(ctx, o.binDir)
		if done(err); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(o.file("ready"))
	// serve reports its steps in this file; up prints them as they come.
	if err := os.WriteFile(o.file(progressFile), nil, 0o644); err != nil {
		return err
	}
	follow := followSteps(o.file(progressFile), progress.Report)
	logFile, err := os.OpenFile(o.file("localcluster.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"serve"}, os.Args[2:]...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("starting (pid %d, logs in %s)...\n", cmd.Process.Pid, o.file("logs"))
	for !exists(o.file("ready")) {
		select {
		case err := <-exited:
			follow()
			data, _ := os.ReadFile(o.file("localcluster.log"))
			return fmt.Errorf("control plane failed to start (%v):\n%s", err, strings.TrimSpace(string(data)))
		case <-time.After(200 * time.Millisecond):
			follow()
		}
	}
	follow()
	fmt.Printf("ready in %.0f s\nexport KUBECONFIG=%s\n", progress.Elapsed().Seconds(), abs(o.file("kubeconfig")))
	return nil
}

// progressFile holds serve's steps, one JSON object a line.
const progressFile = "progress.jsonl"

// stepWriter is serve's Progress: it appends each step to the file up
// follows (serve's stdout is the log, which nobody watches).
func stepWriter(path string) controlplane.Progress {
	return func(s controlplane.Step) {
		data, err := json.Marshal(s)
		if err != nil {
			return
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.Write(append(data, '\n'))
	}
}

// followSteps returns a function that hands report the steps added to
// path since its last call; a line not yet complete waits for the next.
func followSteps(path string, report controlplane.Progress) func() {
	var offset int64
	return func() {
		data, err := os.ReadFile(path)
		if err != nil || int64(len(data)) <= offset {
			return
		}
		fresh := data[offset:]
		end := bytes.LastIndexByte(fresh, '\n')
		if end < 0 {
			return
		}
		offset += int64(end + 1)
		for _, line := range bytes.Split(fresh[:end], []byte("\n")) {
			var s controlplane.Step
			if json.Unmarshal(line, &s) == nil && s.Name != "" {
				report(s)
			}
		}
	}
}

// serve runs the control plane until SIGTERM/SIGINT or until a component dies.
func serve(o options) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	stageDir, err := controlplane.KwokStageDir(ctx)
	if err != nil {
		return err
	}
	cfg := controlplane.ClusterConfig{
		StateDir: o.stateDir, BinDir: abs(o.binDir), KwokStageDir: stageDir,
		Ports: controlplane.PortsFrom(o.portBase), FeatureGates: o.featureGates,
		RuntimeConfig: o.runtimeConfig, ReadyTimeout: o.readyTimeout,
		Progress: stepWriter(o.file(progressFile)),
	}
	if err := writeJSON(o.file("ports.json"), cfg.Ports); err != nil {
		return err
	}
	if err := os.WriteFile(o.file("pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer os.Remove(o.file("pid"))
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	stopCAPI := func() error { return nil }
	if o.capi {
		done := cfg.Progress.Begin("start Cluster API")
		stopCAPI, err = startCAPI(ctx, o, cp)
		if done(err); err != nil {
			return errors.Join(err, cp.Stop())
		}
	}
	defer os.Remove(o.file("ready"))
	if err := os.WriteFile(o.file("ready"), nil, 0o644); err != nil {
		return errors.Join(err, stopCAPI(), cp.Stop())
	}
	fmt.Println("control plane ready")
	dead := cp.Exited(ctx)
	stopErr := errors.Join(stopCAPI(), cp.Stop())
	fmt.Println("control plane stopped")
	return errors.Join(dead, stopErr)
}

func down(o options) error {
	if err := stopAutoscaler(o); err != nil {
		return err
	}
	pid, ok := running(o)
	if !ok {
		fmt.Println("not running")
		_ = os.Remove(o.file("pid"))
		_ = os.Remove(o.file("ready"))
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !waitFor(60*time.Second, func() bool { return !alive(pid) }) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitFor(5*time.Second, func() bool { return !alive(pid) })
	}
	var ports controlplane.Ports
	if err := readJSON(o.file("ports.json"), &ports); err == nil {
		var busy []string
		waitFor(10*time.Second, func() bool {
			busy = busy[:0]
			for _, p := range ports.All() {
				if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
					busy = append(busy, strconv.Itoa(p))
				} else {
					l.Close()
				}
			}
			return len(busy) == 0
		})
		if len(busy) > 0 {
			return fmt.Errorf("stopped pid %d but ports %s are still in use", pid, strings.Join(busy, ","))
		}
	}
	fmt.Println("stopped")
	return nil
}

// stopAutoscaler ends the dra-autoscaler the demo left running, so that
// it does not outlive the control plane it watches.
func stopAutoscaler(o options) error {
	pid, err := controlplane.StopAutoscaler(o.stateDir)
	if pid != 0 && err == nil {
		fmt.Printf("stopped dra-autoscaler (pid %d)\n", pid)
	}
	return err
}

func status(o options) error {
	pid, ok := running(o)
	switch {
	case !ok:
		fmt.Println("not running")
	case exists(o.file("ready")):
		fmt.Printf("running (pid %d)\nexport KUBECONFIG=%s\n", pid, abs(o.file("kubeconfig")))
	default:
		fmt.Printf("starting (pid %d)\n", pid)
	}
	return nil
}

// running reports the pid of this state directory's serve process, if alive.
func running(o options) (int, bool) {
	data, err := os.ReadFile(o.file("pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		return 0, false
	}
	// Guard against a recycled pid.
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return pid, strings.Contains(string(cmdline), "serve")
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// A zombie has exited; it only waits for its parent to reap it.
	return err != nil || !strings.Contains(string(stat), ") Z ")
}

func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func abs(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
