package wire

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
)

// Upstream's proto dropped some fields in cluster autoscaler 1.35 (their
// numbers are reserved in ours); servers and clients built on 1.34 or
// older still use them. They are read from and written to a message's
// unknown fields, so both generations interoperate:
//
//   - NodeGroupTemplateNodeInfoResponse nodeInfo = 1: a v1.Node message,
//     the same bytes as nodeBytes.
//   - NodeGroupAutoscalingOptions scaleDownUnneededTime = 3,
//     scaleDownUnreadyTime = 4, MaxNodeProvisionTime = 5: metav1.Duration
//     messages ({duration = 1: int64 nanoseconds}).
//   - PricingNodePriceRequest startTime = 2, endTime = 3 and
//     PricingPodPriceRequest pod = 1, startTime = 2, endTime = 3: metav1.Time
//     messages ({seconds = 1, nanos = 2}, the shape of a Timestamp) and a
//     v1.Pod message (the same bytes as pod_bytes).
const (
	legacyTemplateNode     = 1
	legacyUnneeded         = 3
	legacyUnready          = 4
	legacyMaxProvision     = 5
	legacyPod              = 1
	legacyStart, legacyEnd = 2, 3
	metaDurationNanos      = 1
	metaTimeSeconds        = 1
	metaTimeNanos          = 2
)

// unknownBytes returns the last length-delimited unknown field num of m.
func unknownBytes(m proto.Message, num protowire.Number) ([]byte, bool) {
	b := m.ProtoReflect().GetUnknown()
	var out []byte
	found := false
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, false
			}
			out, found = v, true
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
	}
	return out, found
}

// TemplateNodeBytes is the template's Node: nodeBytes, or a 1.34 server's
// nodeInfo.
func TemplateNodeBytes(r *pb.NodeGroupTemplateNodeInfoResponse) []byte {
	if len(r.GetNodeBytes()) > 0 {
		return r.GetNodeBytes()
	}
	b, _ := unknownBytes(r, legacyTemplateNode)
	return b
}

// AddLegacyTemplateNode writes the Node as nodeInfo too, for clients of
// 1.34 and older.
func AddLegacyTemplateNode(r *pb.NodeGroupTemplateNodeInfoResponse) {
	if len(r.GetNodeBytes()) == 0 {
		return
	}
	appendUnknown(r, legacyTemplateNode, r.GetNodeBytes())
}

func appendUnknown(m proto.Message, num protowire.Number, v []byte) {
	u := m.ProtoReflect().GetUnknown()
	u = protowire.AppendTag(u, num, protowire.BytesType)
	u = protowire.AppendBytes(u, v)
	m.ProtoReflect().SetUnknown(u)
}

func metaDuration(b []byte) (time.Duration, bool) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
		if n == metaDurationNanos && typ == protowire.VarintType {
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return 0, false
			}
			return time.Duration(int64(v)), true
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
	}
	return 0, true // an empty message is a zero duration
}

// OptionsFromLegacy fills the durations a 1.34 server sends in the old
// fields, where the new ones are unset.
func OptionsFromLegacy(o *pb.NodeGroupAutoscalingOptions, out *cloudprovider.NodeGroupAutoscalingOptions) {
	if o == nil || out == nil {
		return
	}
	if o.GetScaleDownUnneededDuration() == nil {
		if b, ok := unknownBytes(o, legacyUnneeded); ok {
			if d, ok := metaDuration(b); ok {
				out.ScaleDownUnneededTime = d
			}
		}
	}
	if o.GetMaxNodeProvisionDuration() == nil {
		if b, ok := unknownBytes(o, legacyMaxProvision); ok {
			if d, ok := metaDuration(b); ok {
				out.MaxNodeProvisionTime = d
			}
		}
	}
}

// AddLegacyOptions writes the durations in the old fields too.
func AddLegacyOptions(o *pb.NodeGroupAutoscalingOptions) {
	if o == nil {
		return
	}
	for num, d := range map[protowire.Number]time.Duration{
		legacyUnneeded: o.GetScaleDownUnneededDuration().AsDuration(), legacyUnready: o.GetScaleDownUnreadyDuration().AsDuration(),
		legacyMaxProvision: o.GetMaxNodeProvisionDuration().AsDuration(),
	} {
		var v []byte
		v = protowire.AppendTag(v, metaDurationNanos, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(int64(d)))
		appendUnknown(o, num, v)
	}
}

func metaTime(t time.Time) []byte {
	var v []byte
	if t.IsZero() {
		return v
	}
	v = protowire.AppendTag(v, metaTimeSeconds, protowire.VarintType)
	v = protowire.AppendVarint(v, uint64(t.Unix()))
	if ns := t.Nanosecond(); ns != 0 {
		v = protowire.AppendTag(v, metaTimeNanos, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(ns))
	}
	return v
}

// AddLegacyPricing writes the period (and, for a pod request, the pod)
// in the old fields too, for servers of 1.34 and older.
func AddLegacyPricing(m proto.Message, start, end time.Time) {
	appendUnknown(m, legacyStart, metaTime(start))
	appendUnknown(m, legacyEnd, metaTime(end))
	if r, ok := m.(*pb.PricingPodPriceRequest); ok {
		appendUnknown(r, legacyPod, r.GetPodBytes())
	}
}

func metaTimeFrom(b []byte) time.Time {
	var sec, ns int64
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return time.Time{}
		}
		b = b[l:]
		if typ == protowire.VarintType && (n == metaTimeSeconds || n == metaTimeNanos) {
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return time.Time{}
			}
			if n == metaTimeSeconds {
				sec = int64(v)
			} else {
				ns = int64(v)
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return time.Time{}
		}
		b = b[l:]
	}
	if sec == 0 && ns == 0 {
		return time.Time{}
	}
	return time.Unix(sec, ns).UTC()
}

// LegacyPricingPeriod reads the period a 1.34 client sends in the old
// fields (zero times when absent).
func LegacyPricingPeriod(m proto.Message) (start, end time.Time) {
	if b, ok := unknownBytes(m, legacyStart); ok {
		start = metaTimeFrom(b)
	}
	if b, ok := unknownBytes(m, legacyEnd); ok {
		end = metaTimeFrom(b)
	}
	return start, end
}

// PodBytes is the pod of a pricing request: pod_bytes, or a 1.34
// client's pod.
func PodBytes(r *pb.PricingPodPriceRequest) []byte {
	if len(r.GetPodBytes()) > 0 {
		return r.GetPodBytes()
	}
	b, _ := unknownBytes(r, legacyPod)
	return b
}
