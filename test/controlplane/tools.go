package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// toolModule is a tool built in a module context of its own (hack/<dir>,
// GOFLAGS and GOWORK cleared), so that its pins never touch the root
// go.mod: the Cluster API manager, the Kueue manager.
type toolModule struct {
	dir, module string
}

var (
	capiTool  = toolModule{dir: "capi", module: capiModule}
	kueueTool = toolModule{dir: "kueue", module: kueueModule}
)

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
	if _, err := goCmd(ctx, dir, []string{"GOFLAGS=", "GOWORK=off"}, "build", "-o",
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
	out, err := goCmd(ctx, dir, []string{"GOFLAGS=", "GOWORK=off"}, "list", "-m", "-f", "{{.Dir}}", m.module)
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
