// Package version holds the release version of the binaries, stamped at
// build time: `make build` (and `make image`) link them with
//
//	-ldflags "-X github.com/dra-autoscaler/dra-autoscaler/pkg/version.Version=$(cat VERSION)"
//
// so one file, VERSION at the repository root, names the release that the
// binary, the image tag, the chart and the kustomize base all carry.
package version

// Version is the release version; a build without the stamp (a plain
// `go build`) says so instead of claiming a release.
var Version = "dev"
