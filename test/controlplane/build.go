package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the k8s.io/kubernetes version in go.mod; the binaries
// are stamped with it because clients that parse the server version refuse
// the unstamped "v0.0.0-master".
const KubernetesVersion = "v1.37.2"

// KwokVersion is the kwok controller built from hack/kwok, a module context
// of its own, so its dependencies never touch our go.mod. It must match
// hack/kwok/go.mod (TestToolVersions).
const KwokVersion = "v0.8.0"

var controlPlaneCommands = []string{
	"k8s.io/kubernetes/cmd/kube-apiserver",
	"k8s.io/kubernetes/cmd/kube-controller-manager",
	"k8s.io/kubernetes/cmd/kube-scheduler",
}

// EnsureBinaries builds the control-plane binaries from this module and
// installs kwok into binDir. Go's build cache makes a repeated call cheap.
func EnsureBinaries(ctx context.Context, binDir string) error {
	return BuildBinaries(ctx, binDir, nil)
}

// BuildBinaries is EnsureBinaries telling progress about each binary. They
// are built one at a time, so that each can be reported done: in one go
// build they would finish together at the end (one go build of all three
// is ~2s faster warm, and about as fast cold, as the shared packages are
// compiled once either way).
func BuildBinaries(ctx context.Context, binDir string, progress Progress) error {
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	root, err := ModuleRoot(ctx)
	if err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-X k8s.io/component-base/version.gitVersion=%s "+
		"-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 "+
		"-X k8s.io/component-base/version.gitTreeState=clean", KubernetesVersion)
	for _, pkg := range controlPlaneCommands {
		done := progress.Begin("build " + filepath.Base(pkg))
		_, err := goCmd(ctx, root, nil, "build", "-ldflags", ldflags, "-o", binDir+"/", pkg)
		if done(err); err != nil {
			return fmt.Errorf("building the control plane: %w", err)
		}
	}
	return buildKwok(ctx, binDir, progress)
}

// buildKwok builds kwok into binDir (absolute) from hack/kwok.
func buildKwok(ctx context.Context, binDir string, progress Progress) error {
	done := progress.Begin("build kwok " + KwokVersion)
	err := kwokTool.build(ctx, binDir, "/cmd/kwok", "kwok", "kwok controller")
	done(err)
	return err
}

// EnsureAll builds everything the e2e tests run: the Kueue manager, the
// Cluster API manager, kwok and the control plane. The Kueue manager goes
// first: it shares no compiled package with this module (hack/kueue keeps
// Kueue's pins), while the others mostly reuse what this module's build
// compiles anyway. A cold `make test` runs this at low priority beside its
// linters and unit tests (Makefile): the later a build that shares starts,
// the more of the shared packages they have compiled for it.
func EnsureAll(ctx context.Context, binDir string) error {
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	if err := EnsureKueueManager(ctx, binDir); err != nil {
		return err
	}
	if err := EnsureCAPIManager(ctx, binDir); err != nil {
		return err
	}
	return EnsureBinaries(ctx, binDir)
}

// KwokStageDir returns the folder of stage configs shipped in the kwok module
// (node/fast, node/heartbeat-with-lease, pod/fast); EnsureBinaries has put the
// module into the module cache.
func KwokStageDir(ctx context.Context) (string, error) {
	cache, err := goCmd(ctx, "", nil, "env", "GOMODCACHE")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(strings.TrimSpace(cache), "sigs.k8s.io", "kwok@"+KwokVersion, "kustomize", "stage")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("kwok stage configs: %w (run EnsureBinaries first)", err)
	}
	return dir, nil
}

// ModuleRoot is the folder of this repository's go.mod.
func ModuleRoot(ctx context.Context) (string, error) {
	gomod, err := goCmd(ctx, "", nil, "env", "GOMOD")
	if err != nil {
		return "", err
	}
	gomod = strings.TrimSpace(gomod)
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the dra-autoscaler module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(errOut.String(), 20))
	}
	return out.String(), nil
}
