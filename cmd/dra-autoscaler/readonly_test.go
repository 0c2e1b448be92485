package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

// The read-only transport lets reads reach the API server and refuses
// every other verb before it is sent, through a real clientset.
func TestReadOnlyTransport(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(readOnlyConfig(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes := client.CoreV1().Nodes()
	if _, err := nodes.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("a read refused: %v", err)
	}
	writes := map[string]func() error{
		http.MethodPost: func() error {
			_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{})
			return err
		},
		http.MethodPut: func() error {
			_, err := nodes.Update(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.UpdateOptions{})
			return err
		},
		http.MethodPatch: func() error {
			_, err := nodes.Patch(ctx, "n", "application/merge-patch+json", []byte(`{}`), metav1.PatchOptions{})
			return err
		},
		http.MethodDelete: func() error { return nodes.Delete(ctx, "n", metav1.DeleteOptions{}) },
	}
	for verb, write := range writes {
		if err := write(); !errors.Is(err, cloudprovider.ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", verb, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []string{http.MethodGet}) {
		t.Errorf("the server saw %v, want the one GET", seen)
	}
}

// rpcLog records the methods a test server is called with.
type rpcLog struct {
	mu      sync.Mutex
	methods []string
}

func (l *rpcLog) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	l.mu.Lock()
	l.methods = append(l.methods, info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:])
	l.mu.Unlock()
	return h(ctx, req)
}

func (l *rpcLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.methods)
}

// serveKwokOverGRPC serves the example kwok groups over plaintext gRPC and
// returns an externalgrpc --cloud-config for it (insecure: true, said).
func serveKwokOverGRPC(t *testing.T) (string, *rpcLog) {
	t.Helper()
	cfg, err := kwok.LoadConfig("../../deploy/kwok/kwok-provider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := kwok.New(fake.NewClientset(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Cleanup() })
	log := &rpcLog{}
	g := grpc.NewServer(grpc.UnaryInterceptor(log.intercept))
	server.New(cp).Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	path := filepath.Join(t.TempDir(), "externalgrpc.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("address: %s\ninsecure: true\n", lis.Addr())), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, log
}

// explain's parts hold only the read-only view: every group refuses every
// write, and their cleanup never sends the server Cleanup, while the
// running autoscaler's parts do (which the server must be able to take).
func TestReadOnlyPartsNeverCleanUp(t *testing.T) {
	for _, tc := range []struct {
		name        string
		build       func(*config.Options, kubernetes.Interface) (cloudprovider.CloudProvider, error)
		readOnly    bool
		wantCleanup bool
	}{
		{"explain", newReadOnlyProvider, true, false},
		{"autoscaler", func(o *config.Options, c kubernetes.Interface) (cloudprovider.CloudProvider, error) {
			return newProvider(o, c, nil)
		}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cloudConfig, log := serveKwokOverGRPC(t)
			opts, err := config.Parse([]string{"--cloud-provider=externalgrpc", "--cloud-config=" + cloudConfig})
			if err != nil {
				t.Fatal(err)
			}
			client := fake.NewClientset()
			provider, err := tc.build(opts, client)
			if err != nil {
				t.Fatal(err)
			}
			// The one wiring holds the provider as given.
			a, err := autoscaler.New(context.Background(), opts, autoscaler.Env{Client: client, Provider: provider})
			if err != nil {
				t.Fatal(err)
			}
			cleanup := func() { a.Shutdown(); _ = provider.Cleanup() }
			groups := provider.NodeGroups()
			if len(groups) == 0 {
				t.Fatal("no node groups")
			}
			if tc.readOnly {
				ctx := context.Background()
				for _, g := range groups {
					_, err1 := g.IncreaseSize(ctx, 1)
					_, err2 := g.AtomicIncreaseSize(ctx, 1)
					err3 := g.DeleteNodes(ctx, []*corev1.Node{{}})
					err4 := g.ForceDeleteNodes(ctx, []*corev1.Node{{}})
					err5 := g.DecreaseTargetSize(ctx, -1)
					for i, err := range []error{err1, err2, err3, err4, err5} {
						if !errors.Is(err, cloudprovider.ErrReadOnly) {
							t.Errorf("group %s write %d: %v, want ErrReadOnly", g.Id(), i, err)
						}
					}
				}
			}
			cleanup()
			methods := log.get()
			if !slices.Contains(methods, "NodeGroups") {
				t.Fatalf("the server saw %v: no NodeGroups, so nothing was tested", methods)
			}
			if got := slices.Contains(methods, "Cleanup"); got != tc.wantCleanup {
				t.Errorf("Cleanup sent: %v, want %v (calls %v)", got, tc.wantCleanup, methods)
			}
			for _, m := range methods {
				if tc.readOnly && (strings.Contains(m, "Increase") || strings.Contains(m, "Delete") || strings.Contains(m, "Decrease")) {
					t.Errorf("explain's parts sent %s", m)
				}
			}
		})
	}
}

// explain's clients and its kwok provider write through the read-only
// transport: the provider's writes fail before they are sent.
func TestReadOnlyClients(t *testing.T) {
	var mu sync.Mutex
	var writes []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			mu.Lock()
			writes = append(writes, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
		http.Error(w, "not found", http.StatusNotFound)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := config.Parse([]string{"--kubeconfig=" + kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	_, client, err := readOnlyClients(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().ConfigMaps("ns").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !errors.Is(err, cloudprovider.ErrReadOnly) {
		t.Errorf("Create through explain's client: %v, want ErrReadOnly", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) > 0 {
		t.Errorf("writes reached the API server: %v", writes)
	}
}
