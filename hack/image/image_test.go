package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// platforms are the platforms TestImageArchive builds: the host's alone
// in `make test` (Kubernetes without cgo, about 15 minutes the first time
// on 2 cores, then a minute from Go's build cache), the release's both in
// `make test-image` (a cross-build: its own target, as long runs are).
var platforms = flag.String("platforms", "linux/"+runtime.GOARCH, "comma-separated os/arch list of the image under test")

// The release image, built as `make image` builds it and read back from
// its archive: one index with every platform asked for under the
// version's name, each an image of one layer with only the binary, the CA
// bundle and /tmp, run as 65532 with the binary as entrypoint; and the
// host's binary, taken out of the image, prints the version from VERSION.
func TestImageArchive(t *testing.T) {
	raw, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	out := filepath.Join(t.TempDir(), "image.oci.tar")
	want := strings.Split(*platforms, ",")
	got, err := Build(Options{Root: "../..", Out: out, CACerts: "/etc/ssl/certs/ca-certificates.crt", Platforms: want})
	if err != nil {
		t.Fatal(err)
	}
	if got != out {
		t.Fatalf("Build wrote %s, want %s", got, out)
	}
	dir := untar(t, out)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("layout index %+v: want one index named %s", topManifest.Manifests, version)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs, wantArchs []string
	for _, p := range want {
		wantArchs = append(wantArchs, strings.TrimPrefix(p, "linux/"))
	}
	ranHost := false
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %+v", d.Digest, d.Platform)
		}
		archs = append(archs, d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("%s: config says %s/%s", d.Platform.Architecture, cf.OS, cf.Architecture)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/dra-autoscaler"}) || cf.Config.User != "65532:65532" {
			t.Errorf("%s: entrypoint %q, user %q; want [/dra-autoscaler], 65532:65532", d.Platform.Architecture, cf.Config.Entrypoint, cf.Config.User)
		}
		files := layerFiles(t, img)
		if names := slices.Sorted(maps.Keys(files)); !slices.Equal(names, []string{"dra-autoscaler", "etc/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "tmp/"}) {
			t.Errorf("%s: files %q; want the binary, the CA bundle and /tmp only (no shell)", d.Platform.Architecture, names)
		}
		if !strings.Contains(string(files["etc/ssl/certs/ca-certificates.crt"]), "BEGIN CERTIFICATE") {
			t.Errorf("%s: no certificate in the CA bundle", d.Platform.Architecture)
		}
		if d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		ranHost = true
		bin := filepath.Join(t.TempDir(), "dra-autoscaler")
		if err := os.WriteFile(bin, files["dra-autoscaler"], 0o755); err != nil {
			t.Fatal(err)
		}
		// Run with no environment; a cgo binary would run here too but
		// not on the empty base, hence the ELF check.
		cmd := exec.Command(bin, "--version")
		cmd.Env = []string{}
		printed, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, printed)
		}
		if want := "dra-autoscaler " + version + "\n"; string(printed) != want {
			t.Errorf("--version printed %q, want %q", printed, want)
		}
		if interp := elfInterp(t, bin); interp != "" {
			t.Errorf("the binary is dynamically linked (interpreter %s): it cannot run on an empty base", interp)
		}
	}
	slices.Sort(archs)
	if slices.Sort(wantArchs); !slices.Equal(archs, wantArchs) {
		t.Errorf("architectures %v, want %v", archs, wantArchs)
	}
	if !ranHost {
		t.Errorf("the host's binary (%s) was not in the image: nothing was run", runtime.GOARCH)
	}
}

// Bad options are errors before anything is built.
func TestBuildRefuses(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"version with a slash", Options{Root: "../..", Version: "a/b", Platforms: DefaultPlatforms}, `version "a/b"`},
		{"no platform", Options{Root: "../..", Version: "1.0.0"}, "no platform"},
		{"no VERSION file", Options{Root: t.TempDir(), Platforms: DefaultPlatforms}, "VERSION"},
		{"no CA bundle", Options{Root: "../..", Version: "1.0.0", CACerts: "/nonexistent.crt", Platforms: DefaultPlatforms}, "/nonexistent.crt"},
		{"not linux", Options{Root: "../..", Version: "1.0.0", CACerts: "/etc/ssl/certs/ca-certificates.crt", Platforms: []string{"darwin/arm64"}, Out: filepath.Join(t.TempDir(), "x.tar")}, `platform "darwin/arm64"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func untar(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// layerFiles reads the image's one layer: file names to contents.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// elfInterp is the dynamic loader the ELF binary asks for, "" if static.
func elfInterp(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}
