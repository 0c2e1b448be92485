package cloudprovider

import (
	"fmt"
	"sort"
)

// Resource names used by ResourceLimiter beyond core ones (cpu, memory):
// device counts are keyed "device/<deviceClassName>".
const (
	ResourceNameCores  = "cpu"
	ResourceNameMemory = "memory"
)

// ResourceLimiter bounds the cluster-wide totals of resources, counting
// every node, booting ones included. A missing key means no limit.
type ResourceLimiter struct {
	minLimits map[string]int64
	maxLimits map[string]int64
}

// NewResourceLimiter copies the given limits.
func NewResourceLimiter(min, max map[string]int64) *ResourceLimiter {
	rl := &ResourceLimiter{minLimits: map[string]int64{}, maxLimits: map[string]int64{}}
	for k, v := range min {
		rl.minLimits[k] = v
	}
	for k, v := range max {
		rl.maxLimits[k] = v
	}
	return rl
}

// Max returns the upper limit of a resource and whether there is one.
func (r *ResourceLimiter) Max(resource string) (int64, bool) {
	if r == nil {
		return 0, false
	}
	v, ok := r.maxLimits[resource]
	return v, ok
}

// Min returns the lower limit of a resource (0 when none).
func (r *ResourceLimiter) Min(resource string) int64 {
	if r == nil {
		return 0
	}
	return r.minLimits[resource]
}

// Resources lists every resource with a limit, sorted.
func (r *ResourceLimiter) Resources() []string {
	if r == nil {
		return nil
	}
	seen := map[string]bool{}
	for k := range r.minLimits {
		seen[k] = true
	}
	for k := range r.maxLimits {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *ResourceLimiter) String() string {
	if r == nil {
		return "no limits"
	}
	s := ""
	for _, k := range r.Resources() {
		max, ok := r.Max(k)
		if !ok {
			s += fmt.Sprintf("%s:%d-inf ", k, r.Min(k))
			continue
		}
		s += fmt.Sprintf("%s:%d-%d ", k, r.Min(k), max)
	}
	return s
}
