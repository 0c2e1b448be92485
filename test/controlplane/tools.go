package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// toolModule is a tool built in a module context of its own (hack/<dir>,
// GOWORK off), so that its pins never touch the root go.mod: kwok, the
// Cluster API manager, the Kueue manager. hack/kwok and hack/capi require
// (or replace to) the root's version of every module that both build
// from, so that with the same build flags (toolEnv) the packages they
// share, the Kubernetes libraries above all, are compiled once for the
// root and them (hack/kueue cannot: see its tools.go).
type toolModule struct {
	dir, module string
}

var (
	kwokTool  = toolModule{dir: "kwok", module: "sigs.k8s.io/kwok"}
	capiTool  = toolModule{dir: "capi", module: capiModule}
	kueueTool = toolModule{dir: "kueue", module: kueueModule}
)

// toolEnv is the environment of a go command in a tool's module context.
// GOFLAGS is cleared (this module's flags, such as -mod, mean nothing
// there) except for -trimpath, which is part of a compiled package's
// identity: the Makefile sets it, and a tool built without it would share
// no compiled package with this module's build. CGO_ENABLED passes
// through for the same reason.
func toolEnv() []string {
	flags := ""
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if f == "-trimpath" || f == "-trimpath=true" {
			flags = "-trimpath"
		}
	}
	return []string{"GOFLAGS=" + flags, "GOWORK=off"}
}

// build builds pkg of the tool's module into binDir/binary; what names it
// in the error.
func (m toolModule) build(ctx context.Context, binDir, pkg, binary, what string) error {
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	dir, err := m.toolsDir(ctx)
	if err != nil {
		return err
	}
	if _, err := goCmd(ctx, dir, toolEnv(), "build", "-o",
		filepath.Join(binDir, binary), m.module+pkg); err != nil {
		return fmt.Errorf("building the %s: %w", what, err)
	}
	return nil
}

// moduleDir is the tool's module in the module cache (build has
// downloaded it).
func (m toolModule) moduleDir(ctx context.Context) (string, error) {
	dir, err := m.toolsDir(ctx)
	if err != nil {
		return "", err
	}
	out, err := goCmd(ctx, dir, toolEnv(), "list", "-m", "-f", "{{.Dir}}", m.module)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

func (m toolModule) toolsDir(ctx context.Context) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "hack", m.dir), nil
}
