package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

// autoscaler is the dra-autoscaler the demo runs. It outlives the demo
// (own session, its pid in the state directory), so that the status,
// /metrics and explain can be looked at afterwards; make down stops it.
type autoscaler struct {
	pid      int
	address  string
	stateDir string
}

func startAutoscaler(ctx context.Context, o options, prov provider, progress *controlplane.Printer) (*autoscaler, error) {
	done := controlplane.Progress(progress.Report).Begin("start dra-autoscaler")
	a, err := launch(ctx, o, prov)
	done(err)
	return a, err
}

func launch(ctx context.Context, o options, prov provider) (*autoscaler, error) {
	logFile, err := os.Create(o.logFile)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	args := append([]string{"--kubeconfig=" + o.kubeconfig}, prov.args()...)
	args = append(args,
		"--scan-interval="+o.scanInterval.String(),
		"--leader-elect=false",
		"--address="+o.address,
		"--feature-gates="+o.featureGates,
		// Short clocks so that scale-down shows within the demo.
		"--scale-down-unneeded-time="+o.unneededTime.String(),
		"--scale-down-delay-after-add=0s",
		"--max-graceful-termination-sec=5",
		"--v=2")
	cmd := exec.Command(o.autoscaler, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the demo
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.autoscaler, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	a := &autoscaler{pid: cmd.Process.Pid, address: o.address, stateDir: o.stateDir}
	if err := controlplane.RecordAutoscaler(o.stateDir, a.pid); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	// Healthy once its first loops pass: informers synced, groups read.
	var dead error
	err = poll.Until(ctx, time.Minute, "dra-autoscaler healthy at "+o.address, func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-exited:
			dead = fmt.Errorf("dra-autoscaler exited (%v); the end of its log %s:\n%s", err, o.logFile, fileTail(o.logFile, 20))
			return true, "", nil
		default:
		}
		body, err := a.get(ctx, "/health-check")
		return err == nil, body, nil
	})
	if err == nil {
		err = dead
	}
	if err != nil {
		return nil, errors.Join(err, a.stop())
	}
	return a, nil
}

// metrics returns the /metrics exposition.
func (a *autoscaler) metrics(ctx context.Context) (string, error) { return a.get(ctx, "/metrics") }

func (a *autoscaler) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.address+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return string(body), err
}

func (a *autoscaler) stop() error {
	_, err := controlplane.StopAutoscaler(a.stateDir)
	return err
}

func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return fileTailOf(string(data), n)
}
