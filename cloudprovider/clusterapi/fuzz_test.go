package clusterapi

import (
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// FuzzAnnotations: upstream's size, capacity and option annotations and
// the discovery flag, as anyone may write them, give an error or a value
// that keeps its invariants (min <= max, no negative capacity); never a
// panic.
func FuzzAnnotations(f *testing.F) {
	k := newKeys(DefaultGroup)
	f.Add("1", "3", "8", "64Gi", "110", "nvidia.com/gpu", "2", "key=value:NoSchedule", "clusterapi:namespace=ns,clusterName=c,a=b")
	f.Add("-1", "x", "1e309", "-5Gi", "9223372036854775808", "", "-1", "::", "clusterapi:namespace")
	f.Add("3", "1", "", "", "", "nvidia.com/gpu", "", "=:", "aws:foo=bar")
	f.Fuzz(func(t *testing.T, min, max, cpu, memory, pods, gpuType, gpuCount, taint, discovery string) {
		ann := map[string]string{k.minSize: min, k.maxSize: max,
			capacityPrefix + "cpu": cpu, capacityPrefix + "memory": memory, capacityPrefix + "maxPods": pods,
			capacityPrefix + "gpu-type": gpuType, capacityPrefix + "gpu-count": gpuCount, capacityPrefix + "taints": taint}
		if lo, hi, ok, err := k.bounds(ann); err == nil && ok && (lo < 0 || hi < lo) {
			t.Fatalf("bounds %q..%q accepted as %d..%d", min, max, lo, hi)
		}
		if res, err := annotationCapacity(ann); err == nil {
			for name, q := range res {
				if q.Sign() < 0 {
					t.Fatalf("negative capacity %s=%s accepted", name, q.String())
				}
			}
		}
		_, _, _ = k.options(ann, cloudprovider.NodeGroupAutoscalingOptions{})
		_, _ = parseTaint(taint)
		_, _ = parseDiscoverySpecs([]string{discovery})
	})
}
