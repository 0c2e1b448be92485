// Command render prints the dra-autoscaler chart rendered as an install
// would render it (CRDs, then the templates), for `make chart-render` and
// the end-to-end tests:
//
//	go run ./cmd/render [--chart dir] [--name n] [--namespace ns] [--set k=v]...
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dra-autoscaler/dra-autoscaler/hack/helm"
)

type sets []string

func (s *sets) String() string     { return fmt.Sprint(*s) }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	chart := flag.String("chart", "../../deploy/charts/dra-autoscaler", "the chart's directory")
	name := flag.String("name", helm.DefaultRelease.Name, "release name")
	namespace := flag.String("namespace", helm.DefaultRelease.Namespace, "release namespace")
	var set sets
	flag.Var(&set, "set", "a value, as helm's --set (repeatable)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "render: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	vals, err := helm.Values(set...)
	if err == nil {
		var out []byte
		if out, err = helm.Render(*chart, helm.Release{Name: *name, Namespace: *namespace}, vals); err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "render: %v\n", err)
		os.Exit(1)
	}
}
