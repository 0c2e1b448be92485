package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The modules under hack/ build with the root's version of every module
// they share with it (toolModule): one that drifts (the root's Kubernetes
// bumped, a tool's go.mod tidied on its own) makes a cold `make test`
// compile those packages twice. Two are left out: hack/kueue (Kueue does
// not compile against the root's Kubernetes, see its tools.go) and
// hack/genproto (the code it generates names its protoc-gen-go's version,
// a release, and the root pins a protobuf commit). Also: kwok's pin is the one KwokVersion names
// (its stage configs are read from that module version), and each tool
// module requires its tool.
func TestToolVersions(t *testing.T) {
	root, err := ModuleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rootVersions := effectiveVersions(t, filepath.Join(root, "go.mod"))
	mods, err := filepath.Glob(filepath.Join(root, "hack", "*", "go.mod"))
	if err != nil || len(mods) == 0 {
		t.Fatalf("no hack/*/go.mod: %v", err)
	}
	for _, path := range mods {
		dir := filepath.Base(filepath.Dir(path))
		if dir == "genproto" || dir == "kueue" {
			continue
		}
		t.Run(dir, func(t *testing.T) {
			versions := effectiveVersions(t, path)
			var drift []string
			for mod, v := range versions {
				if want, ok := rootVersions[mod]; ok && want != v {
					drift = append(drift, fmt.Sprintf("%s@%s (has %s)", mod, want, v))
				}
			}
			sort.Strings(drift)
			if len(drift) > 0 {
				t.Errorf("%s: modules at other versions than the root's go.mod; in hack/%s run "+
					"GOFLAGS= go mod edit -require=<each> (or -replace=<mod>=<mod>@<version> to go lower), then go mod tidy:\n  %s",
					path, dir, strings.Join(drift, "\n  "))
			}
		})
	}
	for _, c := range []struct {
		tool    toolModule
		version string
	}{{kwokTool, KwokVersion}, {capiTool, CAPIVersion}, {kueueTool, KueueVersion}} {
		if v := effectiveVersions(t, filepath.Join(root, "hack", c.tool.dir, "go.mod"))[c.tool.module]; v != c.version {
			t.Errorf("hack/%s/go.mod requires %s %q, the constant says %s", c.tool.dir, c.tool.module, v, c.version)
		}
	}
	if v := rootVersions["k8s.io/kubernetes"]; v != KubernetesVersion {
		t.Errorf("go.mod requires k8s.io/kubernetes %s, KubernetesVersion is %s", v, KubernetesVersion)
	}
}

// effectiveVersions reads a go.mod: each required module's version, or
// its replacement's where a replace directive names one of the same path.
func effectiveVersions(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if _, ok := out[r.Old.Path]; ok && r.New.Path == r.Old.Path && r.New.Version != "" {
			out[r.Old.Path] = r.New.Version
		}
	}
	return out
}
