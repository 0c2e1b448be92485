// Command externalgrpc-kwok serves the kwok cloud provider over the
// externalgrpc protocol (upstream's service and dra-autoscaler's
// extension), with mTLS as upstream's example server configures it. It is
// the example a cloud team copies: replace kwok.New with your provider.
//
//	externalgrpc-kwok --kubeconfig kc --cloud-config kwok.yaml --address 127.0.0.1:8086 \
//	    --cert server.crt --key-cert server.key --ca-cert ca.crt
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
)

type options struct {
	address, cert, key, ca, cloudConfig, kubeconfig string
	upstreamOnly, noTemplateSlices, insecure        bool
}

func main() {
	klog.InitFlags(nil)
	var o options
	flag.StringVar(&o.address, "address", ":8086", "address to serve on")
	flag.StringVar(&o.cert, "cert", "", "server certificate (PEM); required unless --insecure")
	flag.StringVar(&o.key, "key-cert", "", "server key (PEM)")
	flag.StringVar(&o.ca, "ca-cert", "", "CA that signs the clients' certificates (PEM); every client must present one")
	flag.StringVar(&o.cloudConfig, "cloud-config", "", "the kwok provider's node groups file")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster the kwok nodes are created in (empty: in-cluster)")
	flag.BoolVar(&o.upstreamOnly, "upstream-only", false, "serve upstream's service only, as a server written for upstream's autoscaler would")
	flag.BoolVar(&o.noTemplateSlices, "no-template-slices", false, "leave resourceSliceBytes out of NodeGroupTemplateNodeInfo, as a server built against upstream's protocol before the field would")
	flag.BoolVar(&o.insecure, "insecure", false, "serve without TLS (plaintext, clients not authenticated): for a local demo only")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if err := run(ctx, o); err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "externalgrpc-kwok: %v\n", err)
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, o options) error {
	if o.cloudConfig == "" {
		return fmt.Errorf("--cloud-config (the node groups file) is required")
	}
	// Plaintext only when asked for, as the autoscaler's client does: a
	// forgotten certificate must not open the provider to the network.
	if o.cert == "" && !o.insecure {
		return fmt.Errorf("no TLS: set --cert, --key-cert and --ca-cert, or --insecure to serve in plaintext")
	}
	if o.cert != "" && o.insecure {
		return fmt.Errorf("--insecure and --cert both set: pick one")
	}
	cfg, err := kwok.LoadConfig(o.cloudConfig)
	if err != nil {
		return fmt.Errorf("--cloud-config: %w", err)
	}
	var rc *rest.Config
	if o.kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	cp, err := kwok.New(client, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Cleanup(); err != nil {
			klog.ErrorS(err, "Cleanup")
		}
	}()
	var opts []grpc.ServerOption
	if o.cert != "" {
		creds, err := serverTLS(o)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(logCalls))
	g := grpc.NewServer(opts...)
	var sopts []server.ServeOption
	if o.upstreamOnly {
		sopts = append(sopts, server.UpstreamOnly())
	}
	if o.noTemplateSlices {
		sopts = append(sopts, server.NoTemplateSlices())
	}
	server.New(cp, sopts...).Register(g)
	lis, err := net.Listen("tcp", o.address)
	if err != nil {
		return err
	}
	if o.insecure {
		klog.ErrorS(nil, "Serving without TLS (--insecure): any client that reaches the port can scale and delete nodes", "address", lis.Addr().String())
	}
	klog.InfoS("Serving", "address", lis.Addr().String(), "tls", o.cert != "", "upstreamOnly", o.upstreamOnly)
	go func() {
		<-ctx.Done()
		g.GracefulStop()
	}()
	return g.Serve(lis)
}

// serverTLS requires and verifies a client certificate, as upstream's
// example server does.
func serverTLS(o options) (credentials.TransportCredentials, error) {
	pair, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return nil, fmt.Errorf("--cert/--key-cert: %w", err)
	}
	if o.ca == "" {
		return nil, fmt.Errorf("--cert needs --ca-cert (clients are verified)")
	}
	ca, err := os.ReadFile(o.ca)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate", o.ca)
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}), nil
}

// logCalls logs every call at -v=4 and every failed one at -v=2, so a
// server's operator sees what the autoscaler asked.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		klog.V(2).InfoS("Call failed", "method", info.FullMethod, "code", status.Code(err).String(), "err", err)
	} else {
		klog.V(4).InfoS("Call", "method", info.FullMethod)
	}
	return resp, err
}
