// Command image writes the autoscaler's container image without a
// container engine: `make image`. For each platform it builds the static
// binary (CGO_ENABLED=0) and lays it, with the CA certificates, on an
// empty base (no shell, no package manager, nothing else), runs it as
// 65532:65532, and writes the multi-platform index as an OCI image layout
// archived in one tar file (what `skopeo copy oci-archive:` and
// `crane push` read).
//
// It is a module of its own, like hack/kustomize: go-containerregistry
// requires newer versions of modules the autoscaler shares with
// k8s.io/kubernetes, and raising them in the main module would rebuild all
// of Kubernetes for a build tool.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o Options
	var platforms string
	flag.StringVar(&o.Root, "root", "../..", "the autoscaler module's root")
	flag.StringVar(&o.Version, "version", "", "release version, stamped into the binary and naming the image (default: the root's VERSION file)")
	flag.StringVar(&o.Out, "out", "", "the OCI archive to write (default <root>/_out/image/dra-autoscaler-<version>.oci.tar)")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put at /etc/ssl/certs/ca-certificates.crt")
	flag.StringVar(&platforms, "platforms", strings.Join(DefaultPlatforms, ","), "comma-separated os/arch list")
	flag.Parse()
	o.Platforms = strings.Split(platforms, ",")
	out, err := Build(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(out)
}
