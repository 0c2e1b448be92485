package estimator

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// countNamespace holds the probe pods and claims of DeviceCounter; they
// live only in a fork of the snapshot and are always reverted.
const countNamespace = "dra-autoscaler-device-count"

// DeviceCounter says how many devices of each DeviceClass one request can
// get on a new node of a group: the largest exact count the real
// scheduler framework (the DynamicResources plugin and its allocator, with
// the class's own selectors) grants a probe pod on a fresh instance of
// the template, whose daemon pods have taken their devices first. Counts
// are memoised per group, template content and class version, so a
// template that does not change costs nothing after its first pass, and a
// new class costs only its own probes.
type DeviceCounter struct {
	runner *framework.Runner
	mu     sync.Mutex
	memo   map[string]deviceMemo
	seq    int
	// Calls counts probes run through the framework (memo misses).
	Calls int
}

// deviceMemo is one group's counts for one template content, by class
// name and version.
type deviceMemo struct {
	key    string
	counts map[string]int
}

// NewDeviceCounter returns a counter on runner's snapshot, which must
// hold the cluster's DeviceClasses.
func NewDeviceCounter(runner *framework.Runner) *DeviceCounter {
	return &DeviceCounter{runner: runner, memo: map[string]deviceMemo{}}
}

// Count returns, by class name, the devices of each of classes that one
// request gets on a new node of tmpl; classes with none are left out. The
// snapshot is left as it was.
func (d *DeviceCounter) Count(ctx context.Context, group string, tmpl *cloudprovider.NodeTemplate, classes []*resourceapi.DeviceClass) (map[string]int, error) {
	if tmpl == nil || tmpl.Node == nil {
		return nil, fmt.Errorf("count devices of group %s: no template", group)
	}
	bound := 0
	for _, s := range tmpl.ResourceSlices {
		bound += len(s.Spec.Devices)
	}
	if bound == 0 || len(classes) == 0 {
		return map[string]int{}, nil
	}
	key, err := templateKey(tmpl)
	if err != nil {
		return nil, fmt.Errorf("count devices of group %s: %w", group, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.memo[group]
	if !ok || m.key != key {
		m = deviceMemo{key: key, counts: map[string]int{}}
	}
	var todo []*resourceapi.DeviceClass
	for _, c := range classes {
		if _, ok := m.counts[classKey(c)]; !ok {
			todo = append(todo, c)
		}
	}
	if len(todo) > 0 {
		counted, err := d.count(ctx, group, tmpl, todo, bound)
		if err != nil {
			return nil, fmt.Errorf("count devices of group %s: %w", group, err)
		}
		for _, c := range todo {
			m.counts[classKey(c)] = counted[c.Name]
		}
	}
	out := map[string]int{}
	current := make(map[string]int, len(classes))
	for _, c := range classes {
		n := m.counts[classKey(c)]
		current[classKey(c)] = n
		if n > 0 {
			out[c.Name] = n
		}
	}
	// Versions of classes no longer listed go.
	d.memo[group] = deviceMemo{key: key, counts: current}
	return out, nil
}

func classKey(c *resourceapi.DeviceClass) string {
	return c.Name + "@" + c.ResourceVersion + "@" + string(c.UID)
}

func (d *DeviceCounter) count(ctx context.Context, group string, tmpl *cloudprovider.NodeTemplate, classes []*resourceapi.DeviceClass, bound int) (_ map[string]int, err error) {
	snap := d.runner.Snapshot()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("revert snapshot: %w", rerr)
		}
	}()
	name := group + "-devices"
	for i := 0; snap.HasNode(name); i++ {
		name = fmt.Sprintf("%s-devices-%d", group, i)
	}
	if err := template.AddInstance(ctx, d.runner, tmpl, name); err != nil {
		return nil, err
	}
	snap.ScopeSlices([]string{name})
	defer snap.ScopeSlices(nil)
	out := map[string]int{}
	for _, c := range classes {
		fits := func(n int64) (bool, error) { return d.probe(ctx, c.Name, int(n), name) }
		ok, err := fits(1)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		// The bound is tried first: most classes get every device they
		// match.
		n, err := framework.LargestFitting(1, int64(bound), fits)
		if err != nil {
			return nil, err
		}
		out[c.Name] = int(n)
	}
	return out, nil
}

// probe tells whether a pod whose one claim asks n devices of class fits
// node. The probe tolerates every taint and asks for nothing else.
func (d *DeviceCounter) probe(ctx context.Context, class string, n int, node string) (bool, error) {
	d.seq++
	d.Calls++
	id := "count-" + strconv.Itoa(d.seq)
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: countNamespace, Name: id, UID: types.UID(id + "-claim")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "devices", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(n)},
		}}}},
	}
	snap := d.runner.Snapshot()
	if err := snap.SetResourceClaim(claim); err != nil {
		return false, err
	}
	defer func() { _ = snap.RemoveResourceClaim(countNamespace, id) }()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: countNamespace, Name: id, UID: types.UID(id)},
		Spec: v1.PodSpec{
			Containers:     []v1.Container{{Name: "probe"}},
			Tolerations:    []v1.Toleration{{Operator: v1.TolerationOpExists}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "devices", ResourceClaimName: ptr.To(id)}},
		},
	}
	res, err := d.runner.RunFilters(ctx, pod, []string{node})
	if err != nil {
		return false, fmt.Errorf("probe %d device(s) of class %s: %w", n, class, err)
	}
	return res[0].Fits, nil
}

// templateKey is what the counts depend on besides the classes: the
// template's slices and its pods' claims (daemon pods may hold devices).
func templateKey(t *cloudprovider.NodeTemplate) (string, error) {
	type shape struct {
		Slices []any
		Pods   []any
	}
	var sh shape
	for _, sl := range t.ResourceSlices {
		spec := sl.Spec.DeepCopy()
		spec.NodeName = nil
		sh.Slices = append(sh.Slices, spec)
	}
	for _, p := range t.Pods {
		sh.Pods = append(sh.Pods, p.Spec.ResourceClaims)
	}
	b, err := json.Marshal(sh)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(b)), nil
}
