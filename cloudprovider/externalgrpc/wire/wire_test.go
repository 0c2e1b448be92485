package wire

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// upstreamShapes is upstream's externalgrpc.proto (cluster autoscaler
// 1.35): every message's fields as "name:number". Our file must match it
// exactly, or servers built against upstream's break.
var upstreamShapes = map[string]string{
	"NodeGroup":                           "id:1 minSize:2 maxSize:3 debug:4",
	"ExternalGrpcNode":                    "providerID:1 name:2 labels:3 annotations:4",
	"NodeGroupsRequest":                   "",
	"NodeGroupsResponse":                  "nodeGroups:1",
	"NodeGroupForNodeRequest":             "node:1",
	"NodeGroupForNodeResponse":            "nodeGroup:1",
	"PricingNodePriceRequest":             "node:1 startTimestamp:4 endTimestamp:5",
	"PricingNodePriceResponse":            "price:1",
	"PricingPodPriceRequest":              "pod_bytes:4 startTimestamp:5 endTimestamp:6",
	"PricingPodPriceResponse":             "price:1",
	"GPULabelRequest":                     "",
	"GPULabelResponse":                    "label:1",
	"GetAvailableGPUTypesRequest":         "",
	"GetAvailableGPUTypesResponse":        "gpuTypes:1",
	"CleanupRequest":                      "",
	"CleanupResponse":                     "",
	"RefreshRequest":                      "",
	"RefreshResponse":                     "",
	"NodeGroupTargetSizeRequest":          "id:1",
	"NodeGroupTargetSizeResponse":         "targetSize:1",
	"NodeGroupIncreaseSizeRequest":        "delta:1 id:2",
	"NodeGroupIncreaseSizeResponse":       "",
	"NodeGroupDeleteNodesRequest":         "nodes:1 id:2",
	"NodeGroupDeleteNodesResponse":        "",
	"NodeGroupDecreaseTargetSizeRequest":  "delta:1 id:2",
	"NodeGroupDecreaseTargetSizeResponse": "",
	"NodeGroupNodesRequest":               "id:1",
	"NodeGroupNodesResponse":              "instances:1",
	"Instance":                            "id:1 status:2",
	"InstanceStatus":                      "instanceState:1 errorInfo:2",
	"InstanceErrorInfo":                   "errorCode:1 errorMessage:2 instanceErrorClass:3",
	"NodeGroupTemplateNodeInfoRequest":    "id:1",
	// resourceSliceBytes: kubernetes/autoscaler PR #10303 (open).
	"NodeGroupTemplateNodeInfoResponse": "nodeBytes:2 resourceSliceBytes:3",
	"NodeGroupAutoscalingOptions": "scaleDownUtilizationThreshold:1 scaleDownGpuUtilizationThreshold:2 zeroOrMaxNodeScaling:6 " +
		"ignoreDaemonSetsUtilization:7 scaleDownUnneededDuration:8 scaleDownUnreadyDuration:9 MaxNodeProvisionDuration:10",
	"NodeGroupAutoscalingOptionsRequest":  "id:1 defaults:2",
	"NodeGroupAutoscalingOptionsResponse": "nodeGroupAutoscalingOptions:1",
}

var upstreamRPCs = map[string]string{
	"NodeGroups": "NodeGroupsRequest", "NodeGroupForNode": "NodeGroupForNodeRequest", "PricingNodePrice": "PricingNodePriceRequest",
	"PricingPodPrice": "PricingPodPriceRequest", "GPULabel": "GPULabelRequest", "GetAvailableGPUTypes": "GetAvailableGPUTypesRequest",
	"Cleanup": "CleanupRequest", "Refresh": "RefreshRequest", "NodeGroupTargetSize": "NodeGroupTargetSizeRequest",
	"NodeGroupIncreaseSize": "NodeGroupIncreaseSizeRequest", "NodeGroupDeleteNodes": "NodeGroupDeleteNodesRequest",
	"NodeGroupDecreaseTargetSize": "NodeGroupDecreaseTargetSizeRequest", "NodeGroupNodes": "NodeGroupNodesRequest",
	"NodeGroupTemplateNodeInfo": "NodeGroupTemplateNodeInfoRequest", "NodeGroupGetOptions": "NodeGroupAutoscalingOptionsRequest",
}

func TestUpstreamWireShape(t *testing.T) {
	fd := pb.File_cloudprovider_externalgrpc_protos_externalgrpc_proto
	if fd.Package() != "clusterautoscaler.cloudprovider.v1.externalgrpc" || fd.Path() != "cloudprovider/externalgrpc/protos/externalgrpc.proto" {
		t.Fatalf("package %s path %s", fd.Package(), fd.Path())
	}
	msgs := fd.Messages()
	if msgs.Len() != len(upstreamShapes) {
		t.Errorf("%d messages, upstream has %d", msgs.Len(), len(upstreamShapes))
	}
	for i := 0; i < msgs.Len(); i++ {
		m := msgs.Get(i)
		want, ok := upstreamShapes[string(m.Name())]
		if !ok {
			t.Errorf("message %s is not upstream's", m.Name())
			continue
		}
		if got := shape(m); got != want {
			t.Errorf("%s: fields %q, upstream's %q", m.Name(), got, want)
		}
	}
	state := fd.Messages().ByName("InstanceStatus").Enums().ByName("InstanceState")
	for name, num := range map[string]int32{"unspecified": 0, "instanceRunning": 1, "instanceCreating": 2, "instanceDeleting": 3} {
		if v := state.Values().ByName(protoreflect.Name(name)); v == nil || int32(v.Number()) != num {
			t.Errorf("InstanceState %s: want %d", name, num)
		}
	}
	svc := fd.Services().ByName("CloudProvider")
	if svc.Methods().Len() != len(upstreamRPCs) {
		t.Errorf("%d RPCs, upstream has %d", svc.Methods().Len(), len(upstreamRPCs))
	}
	for rpc, in := range upstreamRPCs {
		m := svc.Methods().ByName(protoreflect.Name(rpc))
		if m == nil || string(m.Input().Name()) != in {
			t.Errorf("RPC %s: want input %s", rpc, in)
		}
	}
}

func shape(m protoreflect.MessageDescriptor) string {
	var parts []string
	for i := 0; i < m.Fields().Len(); i++ {
		f := m.Fields().Get(i)
		parts = append(parts, fmt.Sprintf("%s:%d", f.Name(), f.Number()))
	}
	return strings.Join(parts, " ")
}

// TestDecodesUpstreamBytes: bytes written field by field with upstream's
// numbers (as a server built on upstream's generated code sends them)
// decode into our types, and class 99 is our OtherErrorClass.
func TestDecodesUpstreamBytes(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType) // instances
	var inst []byte
	inst = protowire.AppendTag(inst, 1, protowire.BytesType)
	inst = protowire.AppendString(inst, "aws:///i-1")
	var st []byte
	st = protowire.AppendTag(st, 1, protowire.VarintType)
	st = protowire.AppendVarint(st, 2) // instanceCreating
	var ei []byte
	ei = protowire.AppendTag(ei, 1, protowire.BytesType)
	ei = protowire.AppendString(ei, "QuotaExceeded")
	ei = protowire.AppendTag(ei, 3, protowire.VarintType)
	ei = protowire.AppendVarint(ei, 99)
	st = protowire.AppendTag(st, 2, protowire.BytesType)
	st = protowire.AppendBytes(st, ei)
	inst = protowire.AppendTag(inst, 2, protowire.BytesType)
	inst = protowire.AppendBytes(inst, st)
	b = protowire.AppendBytes(b, inst)

	var resp pb.NodeGroupNodesResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	got := StatusFrom(resp.GetInstances()[0].GetStatus())
	if resp.GetInstances()[0].GetId() != "aws:///i-1" || got.State != cloudprovider.InstanceCreating ||
		got.ErrorInfo.ErrorClass != cloudprovider.OtherErrorClass || got.ErrorInfo.ErrorCode != "QuotaExceeded" {
		t.Fatalf("decoded %+v %+v", resp.GetInstances()[0], got)
	}

	// The template: nodeBytes is field 2.
	node := builder.Node("tmpl").Obj()
	nb, _ := node.Marshal()
	var tb []byte
	tb = protowire.AppendTag(tb, 2, protowire.BytesType)
	tb = protowire.AppendBytes(tb, nb)
	var tr pb.NodeGroupTemplateNodeInfoResponse
	if err := proto.Unmarshal(tb, &tr); err != nil {
		t.Fatal(err)
	}
	back := &corev1.Node{}
	if err := back.Unmarshal(tr.GetNodeBytes()); err != nil || back.Name != "tmpl" {
		t.Fatalf("node %v, %v", back.Name, err)
	}
}

func TestErrorClassTable(t *testing.T) {
	for _, tc := range []struct {
		ours     cloudprovider.InstanceErrorClass
		upstream int32
	}{{cloudprovider.OutOfResourcesErrorClass, 1}, {cloudprovider.OtherErrorClass, 99}} {
		if got := UpstreamErrorClass(tc.ours); got != tc.upstream {
			t.Errorf("UpstreamErrorClass(%d) = %d, want %d", tc.ours, got, tc.upstream)
		}
		if got := ErrorClass(tc.upstream); got != tc.ours {
			t.Errorf("ErrorClass(%d) = %d, want %d", tc.upstream, got, tc.ours)
		}
	}
	if ErrorClass(2) != cloudprovider.OtherErrorClass || ErrorClass(0) != cloudprovider.OtherErrorClass {
		t.Error("an unknown upstream class must be Other")
	}
}

func TestReservationFrom(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ok := &ext.Reservation{Id: "r", Kind: ext.ReservationKind_RESERVATION_KIND_OPEN, NodeGroups: []string{"g"}, Count: 2}
	for _, tc := range []struct {
		name string
		edit func(r *ext.Reservation)
		err  string
	}{
		{"valid", func(*ext.Reservation) {}, ""},
		{"no id", func(r *ext.Reservation) { r.Id = "" }, "without an id"},
		{"unknown kind", func(r *ext.Reservation) { r.Kind = 0 }, "unknown kind"},
		{"negative count", func(r *ext.Reservation) { r.Count = -1 }, "negative"},
		{"ends before start", func(r *ext.Reservation) { r.Start, r.End = Timestamp(t0), Timestamp(t0.Add(-time.Minute)) }, "before it starts"},
		{"no group", func(r *ext.Reservation) { r.NodeGroups = nil }, "names no node group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := proto.Clone(ok).(*ext.Reservation)
			tc.edit(r)
			_, err := ReservationFrom(r)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
	rc := cloudprovider.ReservedCapacity{ID: "b", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"g"}, Count: 3, InUse: 1, Start: t0, End: t0.Add(time.Hour), Price: 2}
	back, err := ReservationFrom(Reservation(rc))
	if err != nil || back.ID != rc.ID || back.Kind != rc.Kind || !back.End.Equal(rc.End) || back.Count != 3 || back.InUse != 1 || back.Price != 2 {
		t.Fatalf("round trip %+v, %v", back, err)
	}
}

func TestTemplateFromRejects(t *testing.T) {
	node := builder.Node("t").Obj()
	nb, _ := node.Marshal()
	slice := builder.ResourceSlice("s", "t", "d", "p").Obj()
	sb, _ := slice.Marshal()
	slices := func(ss ...*resourceapi.ResourceSlice) *ext.NodeGroupTemplateResponse {
		r := &ext.NodeGroupTemplateResponse{NodeBytes: nb, ResourceApiVersion: ResourceAPIVersion}
		for _, s := range ss {
			b, _ := s.Marshal()
			r.ResourceSliceBytes = append(r.ResourceSliceBytes, b)
		}
		return r
	}
	selecting := builder.ResourceSlice("s", "t", "d", "p").Obj()
	selecting.Spec.PerDeviceNodeSelection = ptr.To(true)
	for _, tc := range []struct {
		name string
		resp *ext.NodeGroupTemplateResponse
		err  string
	}{
		{"garbage node", &ext.NodeGroupTemplateResponse{NodeBytes: []byte{0xff, 0x01}}, "template node"},
		{"slices without node", &ext.NodeGroupTemplateResponse{ResourceSliceBytes: [][]byte{sb}}, "no node"},
		{"wrong version", &ext.NodeGroupTemplateResponse{NodeBytes: nb, ResourceSliceBytes: [][]byte{sb}, ResourceApiVersion: "resource.k8s.io/v1beta1"}, "want \"resource.k8s.io/v1\""},
		{"garbage slice", &ext.NodeGroupTemplateResponse{NodeBytes: nb, ResourceSliceBytes: [][]byte{{0xff}}, ResourceApiVersion: ResourceAPIVersion}, "resource slice 0"},
		{"slice of another node", slices(builder.ResourceSlice("s", "other", "d", "p").Obj()), `does not name the template node "t"`},
		{"slice for all nodes", slices(builder.ResourceSlice("s", "", "d", "p").Obj()), "does not name the template node"},
		{"slice with a node selector too", slices(selecting), "perDeviceNodeSelection"},
		{"pool short of slices", slices(builder.ResourceSlice("s", "t", "d", "p").Pool(1, 2).Obj()), `pool "p" of driver d: slice "s" says the pool has 2 slices, the template has 1`},
		{"pool of mixed generations", slices(builder.ResourceSlice("a", "t", "d", "p").Pool(1, 2).Obj(), builder.ResourceSlice("b", "t", "d", "p").Pool(2, 2).Obj()), "mixes generations 1 and 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TemplateFrom(tc.resp)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
	if tmpl, err := TemplateFrom(&ext.NodeGroupTemplateResponse{}); tmpl != nil || err != nil {
		t.Fatalf("empty template = %v, %v; want none", tmpl, err)
	}
	// A pool of two slices, whole, beside another driver's pool of one.
	whole := slices(builder.ResourceSlice("a", "t", "d", "p").Pool(3, 2).Obj(), builder.ResourceSlice("b", "t", "d", "p").Pool(3, 2).Obj(),
		builder.ResourceSlice("c", "t", "e", "p").Obj())
	if tmpl, err := TemplateFrom(whole); err != nil || len(tmpl.ResourceSlices) != 3 {
		t.Fatalf("whole pools: %v, %v", tmpl, err)
	}
}

// Upstream's template: the Node and its slices (PR #10303's field 3) as a
// server built on upstream's generated code writes them, checked as the
// extension's are; an unnamed Node takes the name the client gives.
func TestUpstreamTemplateFrom(t *testing.T) {
	raw := func(node *corev1.Node, slices ...*resourceapi.ResourceSlice) *pb.NodeGroupTemplateNodeInfoResponse {
		var b []byte
		nb, _ := node.Marshal()
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, nb)
		for _, s := range slices {
			sb, _ := s.Marshal()
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			b = protowire.AppendBytes(b, sb)
		}
		r := &pb.NodeGroupTemplateNodeInfoResponse{}
		if err := proto.Unmarshal(b, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	gpus := builder.ResourceSlice("t-gpu", "t", "gpu.example.com", "t").Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	for _, tc := range []struct {
		name   string
		resp   *pb.NodeGroupTemplateNodeInfoResponse
		node   string
		slices int
		err    string
	}{
		{name: "node and slices", resp: raw(builder.Node("t").Obj(), gpus), node: "t", slices: 1},
		{name: "node only (a server before the field)", resp: raw(builder.Node("t").Obj()), node: "t"},
		{name: "unnamed node named by the client", resp: raw(builder.Node("").Obj()), node: "g-template"},
		{name: "slices of an unnamed node", resp: raw(builder.Node("").Obj(), gpus), err: `does not name the template node "g-template"`},
		{name: "slice of another node", resp: raw(builder.Node("u").Obj(), gpus), err: `does not name the template node "u"`},
		{name: "pool short of slices", resp: raw(builder.Node("t").Obj(), builder.ResourceSlice("s", "t", "d", "p").Pool(1, 2).Obj()), err: "the template has 1"},
		{name: "garbage slice", resp: &pb.NodeGroupTemplateNodeInfoResponse{NodeBytes: raw(builder.Node("t").Obj()).NodeBytes, ResourceSliceBytes: [][]byte{{0xff}}}, err: "resource slice 0"},
		{name: "slices without node", resp: &pb.NodeGroupTemplateNodeInfoResponse{ResourceSliceBytes: raw(builder.Node("t").Obj(), gpus).ResourceSliceBytes}, err: "no node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := UpstreamTemplateFrom(tc.resp, "g-template")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || tmpl.Node.Name != tc.node || len(tmpl.ResourceSlices) != tc.slices || len(tmpl.Pods) != 0 {
				t.Fatalf("template %+v, %v; want node %s with %d slice(s)", tmpl, err, tc.node, tc.slices)
			}
		})
	}
	if tmpl, err := UpstreamTemplateFrom(&pb.NodeGroupTemplateNodeInfoResponse{}, "g"); tmpl != nil || err != nil {
		t.Fatalf("empty template = %v, %v; want none", tmpl, err)
	}
}

// The server side: slices unless the server is one from before the field;
// upstream's message carries no pods.
func TestUpstreamTemplate(t *testing.T) {
	tmpl := &cloudprovider.NodeTemplate{
		Node:           builder.Node("t").Obj(),
		ResourceSlices: []*resourceapi.ResourceSlice{builder.ResourceSlice("t-gpu", "t", "gpu.example.com", "t").Devices(builder.Device("gpu-0")).Obj()},
		Pods:           []*corev1.Pod{builder.Pod("kube-system", "agent").Node("t").Obj()},
	}
	for _, noSlices := range []bool{false, true} {
		r, err := UpstreamTemplate(tmpl, noSlices)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UpstreamTemplateFrom(r, "g")
		want := 1
		if noSlices {
			want = 0
		}
		if err != nil || back.Node.Name != "t" || len(back.ResourceSlices) != want || len(back.Pods) != 0 {
			t.Fatalf("noSlices=%v: round trip %+v, %v", noSlices, back, err)
		}
	}
	if r, err := UpstreamTemplate(nil, false); err != nil || len(r.GetNodeBytes()) != 0 {
		t.Fatalf("no template: %v, %v", r, err)
	}
}
