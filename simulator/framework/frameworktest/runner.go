// Package frameworktest builds framework runners for tests that need a
// scheduler configuration of their own or cluster objects the plugins
// read through informers.
package frameworktest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Runner returns a runner of config (a KubeSchedulerConfiguration in
// kube-scheduler's --config format; "" is the default one) whose
// plugins read cluster (Services and ReplicaSets, which the default
// spread selectors come from; volumes; namespaces) through informers of
// a fake clientset, synced. The informers stop with the test.
func Runner(tb testing.TB, ctx context.Context, config string, cluster ...runtime.Object) *framework.Runner {
	tb.Helper()
	opts := framework.Options{Informers: informers.NewSharedInformerFactory(fake.NewClientset(cluster...), 0)}
	if config != "" {
		opts.ConfigFile = filepath.Join(tb.TempDir(), "scheduler.yaml")
		if err := os.WriteFile(opts.ConfigFile, []byte(config), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	r, err := framework.New(ctx, opts)
	if err != nil {
		tb.Fatalf("framework.New: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	tb.Cleanup(func() {
		cancel()
		r.ShutdownInformers()
	})
	if err := r.StartInformers(ctx, 30*time.Second); err != nil {
		tb.Fatal(err)
	}
	return r
}
