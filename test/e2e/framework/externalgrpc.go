package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
	"github.com/dra-autoscaler/dra-autoscaler/test/certs"
)

// GRPCServerBinary builds cmd/externalgrpc-kwok (once per test binary):
// the example externalgrpc server, serving the kwok provider.
func (c *Cluster) GRPCServerBinary(t testing.TB) string { return grpcServerBin.build(t, c) }

var grpcServerBin = &goBinary{pkg: "./cmd/externalgrpc-kwok", name: "externalgrpc-kwok"}

// GRPCServer is a running externalgrpc-kwok process with mTLS.
type GRPCServer struct {
	cmd     *exec.Cmd
	log     *lockedBuffer
	done    chan struct{}
	args    []string
	bin     string
	Address string // localhost:port (the certificate's name)
	// ClientConfig is an externalgrpc --cloud-config file for this server,
	// in upstream's format, with the client's certificate.
	ClientConfig string
}

// StartGRPCServer serves the kwok provider configured by kwokConfig over
// gRPC, with certificates made for the test; extra args are appended
// (e.g. --upstream-only). It is stopped when the test ends.
func (c *Cluster) StartGRPCServer(t testing.TB, kwokConfig any, args ...string) *GRPCServer {
	t.Helper()
	dir := t.TempDir()
	files := certs.Write(t, dir)
	kwokPath := WriteKwokConfig(t, kwokConfig)
	port := freeAddr(t)[len("127.0.0.1:"):]
	s := &GRPCServer{bin: c.GRPCServerBinary(t), log: &lockedBuffer{}, Address: "localhost:" + port}
	s.args = append([]string{
		"--kubeconfig=" + c.Kubeconf, "--cloud-config=" + kwokPath, "--address=127.0.0.1:" + port,
		"--cert=" + files.ServerCert, "--key-cert=" + files.ServerKey, "--ca-cert=" + files.CA, "--v=2",
	}, args...)
	s.ClientConfig = writeClientConfig(t, dir, s.Address, files)
	s.Start(t)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("externalgrpc-kwok log (%s):\n%s", strings.Join(s.args, " "), tail(s.Log(), 60))
		}
	})
	return s
}

// Start (re)starts the process with the same flags, on the same port.
func (s *GRPCServer) Start(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := s.done
	go func() { _ = s.cmd.Wait(); close(done) }()
}

// Kill ends the process with SIGKILL, as a crash would.
func (s *GRPCServer) Kill() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Stop ends the process (SIGTERM, then SIGKILL).
func (s *GRPCServer) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Log is everything the process printed so far (over all its starts).
func (s *GRPCServer) Log() string { return s.log.String() }

// writeClientConfig writes an externalgrpc --cloud-config file, in
// upstream's format, for the server at address with the client's
// certificate.
func writeClientConfig(t testing.TB, dir, address string, files certs.Files) string {
	t.Helper()
	client := fmt.Sprintf("address: %s\ncert: %s\nkey: %s\ncacert: %s\ngrpc_timeout: 10s\n", address, files.ClientCert, files.ClientKey, files.CA)
	path := filepath.Join(dir, "externalgrpc.yaml")
	if err := os.WriteFile(path, []byte(client), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ServeGRPC serves cp from the test process, over both services with
// mTLS as the server binary does, until the test ends; it returns the
// autoscaler's --cloud-config for it. It is for providers whose answers
// a test shapes (bad input, say), so that the production server binary
// needs no test knobs.
func ServeGRPC(t testing.TB, cp cloudprovider.CloudProvider) (clientConfig string) {
	clientConfig, _ = ServeGRPCWith(t, cp, GRPCServeOptions{})
	return clientConfig
}

// GRPCServeOptions shape a server ServeGRPCWith runs.
type GRPCServeOptions struct {
	// Insecure serves in plaintext; the client config says insecure: true.
	Insecure bool
	// TearDownOnCleanup behaves as upstream's example server: after a
	// Cleanup call every call fails (UNAVAILABLE), for every client.
	TearDownOnCleanup bool
}

// ServeGRPCWith is ServeGRPC shaped by opts, and returns the recorder of
// every call the server receives.
func ServeGRPCWith(t testing.TB, cp cloudprovider.CloudProvider, opts GRPCServeOptions) (clientConfig string, rec *RPCRecorder) {
	t.Helper()
	dir := t.TempDir()
	rec = &RPCRecorder{tearDown: opts.TearDownOnCleanup}
	sopts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(rec.intercept)}
	var files certs.Files
	if !opts.Insecure {
		files = certs.Write(t, dir)
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(certs.ServerTLS(t, files))))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(sopts...)
	server.New(cp).Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	if opts.Insecure {
		return WriteFile(t, dir, "externalgrpc.yaml", fmt.Sprintf("address: 127.0.0.1:%s\ninsecure: true\ngrpc_timeout: 10s\n", port)), rec
	}
	return writeClientConfig(t, dir, "localhost:"+port, files), rec
}

// WriteFile writes content to name in dir and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// RPC is one call a test server received.
type RPC struct {
	// Method is the full method name, /<service>/<method>.
	Method string
	// UserAgent is the client's (dra-autoscaler's calls say which kind of
	// client made them: externalgrpc.UserAgent, ReadOnlyUserAgent).
	UserAgent string
}

// Name is the method's short name (NodeGroupIncreaseSize).
func (r RPC) Name() string { return r.Method[strings.LastIndex(r.Method, "/")+1:] }

// RPCRecorder records every call a test server receives, in order.
type RPCRecorder struct {
	mu       sync.Mutex
	calls    []RPC
	tearDown bool
	down     bool
}

// Calls are the calls received so far.
func (r *RPCRecorder) Calls() []RPC {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RPC(nil), r.calls...)
}

func (r *RPCRecorder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, RPC{Method: info.FullMethod, UserAgent: strings.Join(md.Get("user-agent"), " ")})
	down := r.down
	if r.tearDown && strings.HasSuffix(info.FullMethod, "/Cleanup") {
		r.down = true
	}
	r.mu.Unlock()
	if down {
		return nil, status.Error(codes.Unavailable, "provider torn down by a client's Cleanup, as upstream's example server does")
	}
	return h(ctx, req)
}
