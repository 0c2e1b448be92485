package wire

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// FuzzTemplateFrom: whatever bytes a server answers TemplateNodeInfo
// with, the template is refused with an error or accepted with a node and
// slices that name it; never a panic.
func FuzzTemplateFrom(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x03, 'a', 'b', 'c'})
	node := builder.Node("g-template").CPU("8").Obj()
	slice := builder.ResourceSlice("g-template-gpu", "g-template", "gpu.example.com", "g-template").Devices(builder.Device("gpu-0")).Obj()
	if r, err := Template(&cloudprovider.NodeTemplate{Node: node, ResourceSlices: []*resourceapi.ResourceSlice{slice}}); err == nil {
		if b, err := proto.Marshal(r); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r ext.NodeGroupTemplateResponse
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		tmpl, err := TemplateFrom(&r)
		if err != nil || tmpl == nil {
			return
		}
		if tmpl.Node == nil {
			t.Fatal("a template accepted without a node")
		}
		for _, s := range tmpl.ResourceSlices {
			if s.Spec.NodeName == nil || *s.Spec.NodeName != tmpl.Node.Name {
				t.Fatalf("slice %s of an accepted template does not name node %s", s.Name, tmpl.Node.Name)
			}
		}
	})
}

// FuzzReservationFrom: a reservation is refused, or has a count and a
// window that make sense.
func FuzzReservationFrom(f *testing.F) {
	f.Add([]byte{})
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []cloudprovider.ReservedCapacity{
		{ID: "r", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"g"}, Count: 4, Start: start, End: start.Add(time.Hour)},
		{ID: "r", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"g"}, Count: -4, Start: start, End: start.Add(-time.Hour)},
	} {
		if b, err := proto.Marshal(Reservation(r)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r ext.Reservation
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		res, err := ReservationFrom(&r)
		if err != nil {
			return
		}
		if res.Count < 0 {
			t.Fatalf("negative count accepted: %+v", res)
		}
		if !res.Start.IsZero() && !res.End.IsZero() && res.End.Before(res.Start) {
			t.Fatalf("end before start accepted: %+v", res)
		}
	})
}

// FuzzLegacy: upstream's messages with unknown fields (its serialized
// Node, options and pricing periods as upstream's servers send them).
func FuzzLegacy(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, tmpl, opts []byte) {
		var r pb.NodeGroupTemplateNodeInfoResponse
		if proto.Unmarshal(tmpl, &r) == nil {
			_ = TemplateNodeBytes(&r)
		}
		var o pb.NodeGroupAutoscalingOptions
		if proto.Unmarshal(opts, &o) == nil {
			_ = OptionsFrom(&o)
		}
	})
}
