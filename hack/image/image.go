package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultPlatforms are the platforms of a release image.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

const (
	// Entrypoint is where the binary is in the image.
	Entrypoint = "/dra-autoscaler"
	// User is the image's user: the distroless "nonroot" ids, which
	// deploy/base's securityContext asks for too.
	User = "65532:65532"
	// CACertsPath is where Go's crypto/x509 looks first on Linux.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	versionPkg  = "github.com/dra-autoscaler/dra-autoscaler/pkg/version.Version"
)

// Options say what to build.
type Options struct {
	Root      string   // the autoscaler module's root
	Version   string   // empty: the root's VERSION file
	Out       string   // empty: <root>/_out/image/dra-autoscaler-<version>.oci.tar
	CACerts   string   // the CA bundle to copy in
	Platforms []string // os/arch
}

// Build builds the image and returns the path of the archive written.
func Build(o Options) (string, error) {
	if o.Version == "" {
		v, err := os.ReadFile(filepath.Join(o.Root, "VERSION"))
		if err != nil {
			return "", fmt.Errorf("version: %w", err)
		}
		o.Version = strings.TrimSpace(string(v))
	}
	if o.Version == "" || strings.ContainsAny(o.Version, " \t\n/:") {
		return "", fmt.Errorf("version %q: want a release version such as 0.1.0", o.Version)
	}
	if o.Out == "" {
		o.Out = filepath.Join(o.Root, "_out", "image", "dra-autoscaler-"+o.Version+".oci.tar")
	}
	if len(o.Platforms) == 0 {
		return "", errors.New("no platform to build")
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return "", fmt.Errorf("CA certificates: %w", err)
	}
	work, err := os.MkdirTemp("", "dra-autoscaler-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	idx := v1.ImageIndex(empty.Index)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" || goarch == "" {
			return "", fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		bin := filepath.Join(work, "dra-autoscaler-"+goarch)
		if err := buildBinary(o.Root, goarch, o.Version, bin); err != nil {
			return "", err
		}
		img, err := platformImage(bin, certs, goarch, o.Version)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
	}
	dir := filepath.Join(work, "layout")
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	// The index under the version's name, as `oci-archive:<file>:<version>`
	// refers to it.
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.Version})); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return "", err
	}
	if err := tarDir(dir, o.Out); err != nil {
		return "", err
	}
	return o.Out, nil
}

// buildBinary builds the static binary for linux/goarch: -trimpath and
// the same compile flags for every platform, so `make image` and the
// test beside this file share Go's build cache (only the link differs
// with the version).
func buildBinary(root, goarch, version, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X "+versionPkg+"="+version, "-o", out, "./cmd/dra-autoscaler")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build linux/%s: %v\n%s", goarch, err, b)
	}
	return nil
}

// platformImage is one platform's image: a single layer on nothing.
func platformImage(bin string, certs []byte, goarch, version string) (v1.Image, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs([]file{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/ssl/", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(CACertsPath, "/"), mode: 0o644, data: certs},
		{path: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: exe},
		// klog and Go's os.TempDir want a writable /tmp; deploy/base
		// mounts an emptyDir there on its read-only root.
		{path: "tmp/", mode: 0o1777, dir: true},
	})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goarch
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.User = User
	cf.Config.Env = []string{"SSL_CERT_FILE=" + CACertsPath}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "dra-autoscaler",
		"org.opencontainers.image.version": version,
	}
	// No build time in the image: the same sources give the same digest.
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	return mutate.ConfigFile(img, cf)
}

type file struct {
	path string
	mode int64
	dir  bool
	data []byte
}

// rootfs is the layer's tar: root-owned files with a fixed time, so the
// layer's digest depends on the contents only.
func rootfs(files []file) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// tarDir archives the OCI layout in dir as out (written beside, then
// renamed, so a failed run leaves no half archive).
func tarDir(dir, out string) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), time.Unix(0, 0), 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp.Name(), out)
}
