package externalgrpc

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
)

// Every RPC of both services is either a read or refused by ReadOnly, and
// the list of reads names only RPCs that exist.
func TestReadRPCsExist(t *testing.T) {
	var all []string
	for _, d := range []grpc.ServiceDesc{pb.CloudProvider_ServiceDesc, ext.CloudProviderExtension_ServiceDesc} {
		for _, m := range d.Methods {
			all = append(all, "/"+d.ServiceName+"/"+m.MethodName)
		}
	}
	for _, r := range readRPCs {
		if !slices.Contains(all, r) {
			t.Errorf("read RPC %s is no RPC of either service", r)
		}
	}
	var writes []string
	for _, m := range all {
		if !slices.Contains(readRPCs, m) {
			writes = append(writes, m[strings.LastIndex(m, "/")+1:])
		}
	}
	slices.Sort(writes)
	want := []string{"Cleanup", "NodeGroupAtomicIncreaseSize", "NodeGroupDecreaseTargetSize", "NodeGroupDeleteNodes",
		"NodeGroupForceDeleteNodes", "NodeGroupIncreaseSize", "NodeGroupIncreaseSize"}
	if !slices.Equal(writes, want) {
		t.Errorf("RPCs a read-only provider refuses: %v, want %v", writes, want)
	}
}

// A read-only provider reads (Refresh, templates, sizes), and every write
// it is asked for, its own Cleanup included, fails with ErrReadOnly
// before it leaves the process: the server sees none.
func TestReadOnlyRefusesWriteRPCs(t *testing.T) {
	cp := &fakeCP{}
	g := cp.add("gpu", 0, 3)
	g.template = gpuTemplate("tmpl")
	cp.reservations = []cloudprovider.ReservedCapacity{{ID: "r", NodeGroups: []string{"gpu"}, Count: 1}}
	e := startWith(t, cp, Config{}, []ProviderOption{ReadOnly()})
	e.refresh(t)
	group := e.group(t, "gpu")
	if _, err := group.TemplateNodeInfo(); err != nil {
		t.Fatalf("a read refused: %v", err)
	}
	if _, err := group.TargetSize(); err != nil {
		t.Fatalf("a read refused: %v", err)
	}
	if _, err := e.p.Reservations(); err != nil {
		t.Fatalf("a read refused: %v", err)
	}
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: "fake://gpu/0"}}
	writes := []struct {
		rpc  string // as the server's interceptor counts it
		call func() error
	}{
		{"NodeGroupIncreaseSize", func() error { _, err := group.IncreaseSize(ctx, 1); return err }},
		{"Ext/NodeGroupAtomicIncreaseSize", func() error { _, err := group.AtomicIncreaseSize(ctx, 2); return err }},
		{"NodeGroupDeleteNodes", func() error { return group.DeleteNodes(ctx, []*corev1.Node{node}) }},
		{"Ext/NodeGroupForceDeleteNodes", func() error { return group.ForceDeleteNodes(ctx, []*corev1.Node{node}) }},
		{"NodeGroupDecreaseTargetSize", func() error { return group.DecreaseTargetSize(ctx, -1) }},
		// Last: it closes the connection too.
		{"Cleanup", e.p.Cleanup},
	}
	for _, w := range writes {
		err := w.call()
		if !errors.Is(err, cloudprovider.ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", w.rpc, err)
		}
		if n := e.faults.calls(w.rpc); n != 0 {
			t.Errorf("%s reached the server %d times", w.rpc, n)
		}
	}
	if e.faults.calls("Ext/NodeGroupIncreaseSize") != 0 || len(g.instances) != 0 {
		t.Errorf("the group changed: %d instances", len(g.instances))
	}
	for _, c := range g.calls {
		if c != "TargetSize" && c != "TemplateNodeInfo" {
			t.Errorf("the provider was called for %s", c)
		}
	}
}

// The interceptor alone, below any provider code: an RPC outside the list
// is refused with PERMISSION_DENIED and ErrReadOnly; a read goes through.
func TestRefuseWritesInterceptor(t *testing.T) {
	sent := 0
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		sent++
		return nil
	}
	for _, tc := range []struct {
		method string
		ok     bool
	}{
		{pb.CloudProvider_Cleanup_FullMethodName, false},
		{pb.CloudProvider_NodeGroupIncreaseSize_FullMethodName, false},
		{ext.CloudProviderExtension_NodeGroupIncreaseSize_FullMethodName, false},
		{"/some.future.Service/Anything", false},
		{pb.CloudProvider_NodeGroups_FullMethodName, true},
		{ext.CloudProviderExtension_NodeGroupTemplate_FullMethodName, true},
	} {
		sent = 0
		err := refuseWrites(context.Background(), tc.method, nil, nil, nil, invoker)
		if tc.ok != (err == nil) || tc.ok != (sent == 1) {
			t.Errorf("%s: err %v, sent %d; want ok=%v", tc.method, err, sent, tc.ok)
		}
		if !tc.ok && (!errors.Is(err, cloudprovider.ErrReadOnly) || status.Code(err) != codes.PermissionDenied) {
			t.Errorf("%s: %v (code %s), want ErrReadOnly and PermissionDenied", tc.method, err, status.Code(err))
		}
	}
	if _, err := refuseStreams(context.Background(), nil, nil, "/x/Stream", nil); !errors.Is(err, cloudprovider.ErrReadOnly) {
		t.Errorf("stream: %v, want ErrReadOnly", err)
	}
}

// Calls carry the user agent of their kind, so a server tells explain's
// calls from the autoscaler's.
func TestUserAgent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ProviderOption
		want string
	}{
		{"autoscaler", nil, UserAgent + " "},
		{"read-only", []ProviderOption{ReadOnly()}, ReadOnlyUserAgent + " "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var agents []string
			lis := bufconn.Listen(1 << 20)
			g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				md, _ := metadata.FromIncomingContext(ctx)
				mu.Lock()
				agents = append(agents, md.Get("user-agent")...)
				mu.Unlock()
				return h(ctx, req)
			}))
			cp := &fakeCP{}
			cp.add("gpu", 0, 1)
			server.New(cp).Register(g)
			go func() { _ = g.Serve(lis) }()
			t.Cleanup(g.Stop)
			cfg := Config{Address: "bufnet:1", Insecure: true, GRPCTimeout: metav1.Duration{Duration: 2 * time.Second}}
			p, err := New(&cfg, append(tc.opts, WithDialOptions(grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() })))...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(agents) == 0 {
				t.Fatal("no call seen")
			}
			for _, a := range agents {
				if !strings.HasPrefix(a, tc.want) {
					t.Errorf("user-agent %q, want %q...", a, tc.want)
				}
			}
		})
	}
}

// The insecure connection is said, and only when asked for.
func TestInsecureReason(t *testing.T) {
	secure := Config{Address: "h:1", CACert: "ca.pem"}
	plain := Config{Address: "h:1", Insecure: true}
	if secure.InsecureReason() != "" {
		t.Errorf("TLS config called insecure: %q", secure.InsecureReason())
	}
	if r := plain.InsecureReason(); !strings.Contains(r, "h:1") || !strings.Contains(r, "insecure: true") {
		t.Errorf("InsecureReason %q names neither the server nor the setting", r)
	}
}
