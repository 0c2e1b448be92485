package framework

import (
	"fmt"
	"runtime/debug"

	v1 "k8s.io/api/core/v1"
)

// PanicError is a panic of the scheduler framework (a plugin meeting an
// object it did not expect) turned into an error naming the pod and the
// node, so one malformed object fails one simulation, not the process.
type PanicError struct {
	// Pod is namespace/name; Node is empty for PreFilter.
	Pod, Node string
	Value     any
	Stack     []byte
}

func (e *PanicError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("scheduler framework panicked on pod %s: %v", e.Pod, e.Value)
	}
	return fmt.Sprintf("scheduler framework panicked on pod %s, node %s: %v", e.Pod, e.Node, e.Value)
}

// Panicked says the error is a recovered panic: pkg/loop counts an error
// with this method as a panic without importing the simulator.
func (e *PanicError) Panicked() bool { return true }

var _ interface{ Panicked() bool } = (*PanicError)(nil)

// recoverPlugin, deferred around a framework call, turns its panic into a
// PanicError in *err. Filter calls run on helper goroutines, whose panic
// no caller could recover: each one is guarded where it runs.
func recoverPlugin(pod *v1.Pod, node string, err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Pod: pod.Namespace + "/" + pod.Name, Node: node, Value: r, Stack: debug.Stack()}
	}
}
