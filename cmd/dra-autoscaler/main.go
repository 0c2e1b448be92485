// Command dra-autoscaler is the cluster autoscaler for accelerator
// clusters. It parses its flags, wires the loop's stages together, serves
// /metrics and /health-check, and runs the loop while it holds the leader
// lease.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "explain" {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := explainMain(ctx, os.Args[2:], os.Stdout)
		cancel()
		klog.Flush()
		if err != nil {
			fmt.Fprintf(os.Stderr, "dra-autoscaler explain: %v\n", err)
			os.Exit(1)
		}
		return
	}
	opts, err := config.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "dra-autoscaler: %v\n", err)
		os.Exit(2)
	}
	if opts.Version {
		printVersion(os.Stdout)
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if err := run(ctx, opts); err != nil {
		klog.Flush()
		// Plain text: start-up errors are read by people, not log parsers.
		fmt.Fprintf(os.Stderr, "dra-autoscaler: %v\n", err)
		os.Exit(1)
	}
	klog.Flush()
}

// printVersion writes the version stamped at build time (pkg/version), one
// line, for `dra-autoscaler --version`.
func printVersion(w io.Writer) { fmt.Fprintf(w, "dra-autoscaler %s\n", version.Version) }
