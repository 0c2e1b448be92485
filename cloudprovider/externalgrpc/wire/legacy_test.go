package wire

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// field appends one length-delimited field, as a 1.34 peer writes it.
func field(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func metaDur(d time.Duration) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(d))
}

// roundTrip marshals m and unmarshals into a fresh message of its type,
// as the peer would receive it.
func roundTrip[T proto.Message](t *testing.T, m T, fresh T) T {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, fresh); err != nil {
		t.Fatal(err)
	}
	return fresh
}

func TestLegacyTemplateNodeInfo(t *testing.T) {
	nb, _ := builder.Node("old").Obj().Marshal()
	var old pb.NodeGroupTemplateNodeInfoResponse
	if err := proto.Unmarshal(field(nil, 1, nb), &old); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(TemplateNodeBytes(&old), nb) {
		t.Fatal("a 1.34 server's nodeInfo (field 1) is not read")
	}
	r := &pb.NodeGroupTemplateNodeInfoResponse{NodeBytes: nb}
	AddLegacyTemplateNode(r)
	if got, ok := unknownBytes(roundTrip(t, r, &pb.NodeGroupTemplateNodeInfoResponse{}), 1); !ok || !bytes.Equal(got, nb) {
		t.Fatal("nodeInfo (field 1) not written for 1.34 clients")
	}
}

func TestLegacyOptions(t *testing.T) {
	var old pb.NodeGroupAutoscalingOptions
	b := field(field(nil, 3, metaDur(time.Minute)), 5, metaDur(15*time.Minute))
	if err := proto.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	out := OptionsFrom(&old)
	OptionsFromLegacy(&old, out)
	if out.ScaleDownUnneededTime != time.Minute || out.MaxNodeProvisionTime != 15*time.Minute {
		t.Fatalf("legacy options read as %+v", out)
	}
	// The new fields win when both are there.
	both := &pb.NodeGroupAutoscalingOptions{ScaleDownUnneededDuration: durationpb.New(2 * time.Minute)}
	both.ProtoReflect().SetUnknown(b)
	out = OptionsFrom(both)
	OptionsFromLegacy(both, out)
	if out.ScaleDownUnneededTime != 2*time.Minute || out.MaxNodeProvisionTime != 15*time.Minute {
		t.Fatalf("mixed options read as %+v", out)
	}

	o := Options(&cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUnneededTime: 3 * time.Minute, MaxNodeProvisionTime: time.Hour})
	AddLegacyOptions(o)
	got := roundTrip(t, o, &pb.NodeGroupAutoscalingOptions{})
	for num, want := range map[protowire.Number]time.Duration{3: 3 * time.Minute, 4: 0, 5: time.Hour} {
		v, ok := unknownBytes(got, num)
		d, dok := metaDuration(v)
		if !ok || !dok || d != want {
			t.Errorf("legacy field %d = %v (%v %v), want %v", num, d, ok, dok, want)
		}
	}
}

func TestLegacyPricing(t *testing.T) {
	start, end := time.Date(2026, 5, 1, 10, 0, 0, 500, time.UTC), time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC)
	nodeReq := &pb.PricingNodePriceRequest{StartTimestamp: Timestamp(start), EndTimestamp: Timestamp(end)}
	AddLegacyPricing(nodeReq, start, end)
	s, e := LegacyPricingPeriod(roundTrip(t, nodeReq, &pb.PricingNodePriceRequest{}))
	if !s.Equal(start) || !e.Equal(end) {
		t.Fatalf("legacy startTime/endTime (2/3) = %v %v", s, e)
	}
	podBytes, _ := builder.Pod("ns", "p").Obj().Marshal()
	podReq := &pb.PricingPodPriceRequest{PodBytes: podBytes}
	AddLegacyPricing(podReq, start, end)
	got := roundTrip(t, podReq, &pb.PricingPodPriceRequest{})
	if b, ok := unknownBytes(got, 1); !ok || !bytes.Equal(b, podBytes) {
		t.Fatal("legacy pod (field 1) not written")
	}
	// A 1.34 client's request: pod in field 1 only.
	var old pb.PricingPodPriceRequest
	if err := proto.Unmarshal(field(nil, 1, podBytes), &old); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(PodBytes(&old), podBytes) {
		t.Fatal("a 1.34 client's pod (field 1) is not read")
	}
}

// Every option crosses the wire and back, zeroOrMaxNodeScaling (6)
// included.
func TestOptionsRoundTrip(t *testing.T) {
	in := cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.4, ScaleDownGpuUtilizationThreshold: 0.3,
		ScaleDownUnneededTime: time.Minute, ScaleDownUnreadyTime: 2 * time.Minute, MaxNodeProvisionTime: time.Hour, ZeroOrMaxNodeScaling: true}
	got := roundTrip(t, Options(&in), &pb.NodeGroupAutoscalingOptions{})
	if out := OptionsFrom(got); out == nil || *out != in {
		t.Errorf("options %+v, want %+v", out, in)
	}
}
