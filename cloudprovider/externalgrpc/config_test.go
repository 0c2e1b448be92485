package externalgrpc

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
	"github.com/dra-autoscaler/dra-autoscaler/test/certs"
)

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       Config
		err        string
	}{
		{name: "upstream's file with mTLS", yaml: "address: 127.0.0.1:8086\ngrpc_timeout: 30s\ncert: c.pem\nkey: k.pem\ncacert: ca.pem\n",
			want: Config{Address: "127.0.0.1:8086", GRPCTimeout: dur(30 * time.Second), Extension: ExtensionAuto, Cert: "c.pem", Key: "k.pem", CACert: "ca.pem"}},
		{name: "server TLS only", yaml: "address: h:1\ncacert: ca.pem\n",
			want: Config{Address: "h:1", GRPCTimeout: dur(DefaultTimeout), Extension: ExtensionAuto, CACert: "ca.pem"}},
		{name: "plaintext asked for", yaml: "address: h:1\ninsecure: true\n",
			want: Config{Address: "h:1", GRPCTimeout: dur(DefaultTimeout), Extension: ExtensionAuto, Insecure: true}},
		{name: "defaults, unknown keys ignored as upstream does", yaml: "address: '[::1]:1'\nsomething: else\ninsecure: true\n",
			want: Config{Address: "[::1]:1", GRPCTimeout: dur(DefaultTimeout), Extension: ExtensionAuto, Insecure: true}},
		{name: "extension off", yaml: "address: h:1\nextension: \"off\"\ninsecure: true\n",
			want: Config{Address: "h:1", GRPCTimeout: dur(DefaultTimeout), Extension: ExtensionOff, Insecure: true}},
		{name: "no TLS and no insecure: upstream's silent plaintext refused", yaml: "address: 127.0.0.1:8086\ngrpc_timeout: 30s\n", err: "no TLS: set cacert"},
		{name: "insecure: false is no TLS either", yaml: "address: h:1\ninsecure: false\n", err: "or set insecure: true"},
		{name: "insecure and TLS files", yaml: "address: h:1\ninsecure: true\ncacert: ca.pem\n", err: "insecure: true and TLS files"},
		{name: "no address", yaml: "grpc_timeout: 1s\n", err: "address is required"},
		{name: "no port", yaml: "address: localhost\n", err: "missing port"},
		{name: "bad timeout", yaml: "address: h:1\ngrpc_timeout: soon\n", err: "soon"},
		{name: "negative timeout", yaml: "address: h:1\ngrpc_timeout: -1s\n", err: "negative"},
		{name: "bad extension", yaml: "address: h:1\nextension: maybe\n", err: "maybe"},
		{name: "cert without cacert", yaml: "address: h:1\ncert: c.pem\nkey: k.pem\n", err: "cacert is required"},
		{name: "cert without key", yaml: "address: h:1\ncert: c.pem\ncacert: ca.pem\n", err: "cert and key go together"},
		{name: "key without cert", yaml: "address: h:1\nkey: k.pem\ncacert: ca.pem\n", err: "cert and key go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadConfig(path)
			if tc.err != "" {
				// The error names the file, so the user knows what to fix.
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.err)
				}
				return
			}
			if err != nil || *got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestMutualTLS: the client presents its certificate and verifies the
// server's, as upstream's config describes; without one the server refuses.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	files := certs.Write(t, dir)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(certs.ServerTLS(t, files))))
	cp := &fakeCP{}
	cp.add("gpu", 0, 2)
	server.New(cp).Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())

	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"mTLS", Config{Address: "localhost:" + port, Cert: files.ClientCert, Key: files.ClientKey, CACert: files.CA}, true},
		{"no client certificate (server TLS only)", Config{Address: "localhost:" + port, CACert: files.CA}, false},
		{"plaintext to a TLS server", Config{Address: "localhost:" + port, Insecure: true}, false},
		{"wrong server name", Config{Address: "127.0.0.1:" + port, Cert: files.ClientCert, Key: files.ClientKey, CACert: files.CA}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.GRPCTimeout = dur(2 * time.Second)
			p, err := New(&tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.conn.Close()
			err = p.Refresh(context.Background())
			if tc.ok != (err == nil) {
				t.Fatalf("Refresh = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && len(p.NodeGroups()) != 1 {
				t.Fatal("no groups over mTLS")
			}
		})
	}
}

func dur(d time.Duration) (out metav1.Duration) { out.Duration = d; return out }

func TestExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("../../deploy/examples/externalgrpc-cloud-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Address != "externalgrpc-kwok.kube-system.svc:8086" || cfg.GRPCTimeout.Duration != 30*time.Second || cfg.Cert == "" || cfg.Extension != ExtensionAuto {
		t.Fatalf("example config read as %+v", cfg)
	}
}
