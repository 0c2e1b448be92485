// Command kustomize builds a kustomization with the kustomize Go library
// (what `kubectl apply -k` runs) and prints the manifests as YAML, for the
// end-to-end tests and `make deploy-build`: no kubectl needed.
//
// It is a module of its own: the kustomize library requires newer versions
// of modules the autoscaler shares with k8s.io/kubernetes (golang.org/x/sys,
// protobuf, yaml), and raising them in the main module would rebuild all
// of Kubernetes for a test tool.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize <dir>")
		os.Exit(2)
	}
	out, err := Build(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "kustomize: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// Build runs kustomize build on dir.
func Build(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", dir, err)
	}
	return res.AsYaml()
}
