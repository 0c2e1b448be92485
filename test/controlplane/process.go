package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane component running as a child process, its
// output in a log file under the state directory.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // exit status, valid once done is closed
}

func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(logFile, "==== %s starting at %s: %s %s\n", name, time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so Stop reaches anything the component forks; and
	// killed with its parent, so a crashed test binary leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: starting %s: %w", name, bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls check until it succeeds. It fails early when the process
// exits, and in every failure names the component and shows its log tail.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.failure(fmt.Sprintf("exited before it was ready (%v)", p.err))
		case <-ctx.Done():
			return p.failure(fmt.Sprintf("not ready after %s: %v", timeout, last))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (p *process) failure(what string) error {
	return componentError(p.name, what, p.logPath)
}

// componentError is the one shape of a start-up failure: the component, what
// went wrong, and the last lines it logged.
func componentError(name, what, logPath string) error {
	return fmt.Errorf("%s %s\n--- last lines of %s:\n%s", name, what, logPath, fileTail(logPath, 25))
}

// stop asks the component to exit and kills it if it has not within grace.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return tail(string(data), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var errNotReady = errors.New("not ready")

func httpBodyOK(body []byte) error {
	if !bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
		return fmt.Errorf("%w: %q", errNotReady, tail(string(body), 5))
	}
	return nil
}
