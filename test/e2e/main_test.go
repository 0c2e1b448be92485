// Package e2e holds the end-to-end tests: they run against a real local
// control plane (etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler built from k8s.io/kubernetes, plus kwok), one per test
// binary, a namespace per test.
package e2e

import (
	"os"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }
