package estimator

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// countNamespace holds the probe pods and claims of DeviceCounter; they
// live only in a fork of the snapshot and are always reverted.
const countNamespace = "dra-autoscaler-device-count"

// probeTimeout bounds one probe. A count that fits is granted in well
// under a millisecond, but proving that one does not fit makes the
// allocator try every combination of the devices, which with partitions
// sharing counters takes about a second per probe (8 GPUs offered whole
// or as halves: 5^8 sets). A probe cut short counts as not fitting, so a
// count is never more than the allocator would grant. deviceBound keeps
// most templates from needing such a probe at all.
const probeTimeout = 50 * time.Millisecond

// maxMemo bounds the memo: templates are few and change rarely, so past
// this many contents the memo starts again.
const maxMemo = 256

// recountAfter is how long counts that a cut probe decided stand. A probe
// that fits is cut only on a machine stalled for probeTimeout, which would
// undercount until the template changed; counting such templates again
// now and then (a tenth of a second each) heals that.
const recountAfter = 10 * time.Minute

// DeviceCounter says how many devices of each DeviceClass one request can
// get on a new node of a group: the largest exact count the real
// scheduler framework (the DynamicResources plugin and its allocator, with
// the class's own selectors) grants a probe pod on a fresh instance of
// the template, whose daemon pods have taken their devices first. Counts
// are memoised per template content (groups whose templates differ only
// in names share them), the snapshot's DeviceTaintRules (which taint the
// instance's devices as they do the cluster's) and class version, so a
// template that does not change costs nothing after its first pass, and
// a new class costs only its own probes.
type DeviceCounter struct {
	runner *framework.Runner
	mu     sync.Mutex
	// memo holds, per template content and taint rules, the counts by
	// class name and version.
	memo map[string]*deviceMemo
	// rules is the taint rules' key at a shared generation of the
	// snapshot (rules change only with it), so it is made once a pass.
	rules rulesKey
	seq   int
	// Calls counts probes run through the framework (memo misses);
	// TimedOut those that the probe timeout cut short.
	Calls, TimedOut int
	// now and timeout are time.Now and probeTimeout but for tests.
	now     func() time.Time
	timeout time.Duration
}

// deviceMemo is one template content's counts; until, when set, is when
// counts that a cut probe decided are made again.
type deviceMemo struct {
	counts map[string]int
	until  time.Time
}

type rulesKey struct {
	shared uint64
	key    string
	ok     bool
}

// NewDeviceCounter returns a counter on runner's snapshot, which must
// hold the cluster's DeviceClasses.
func NewDeviceCounter(runner *framework.Runner) *DeviceCounter {
	return &DeviceCounter{runner: runner, memo: map[string]*deviceMemo{}, now: time.Now, timeout: probeTimeout}
}

// Count returns, by class name, the devices of each of classes that one
// request gets on a new node of tmpl; classes with none are left out. The
// snapshot is left as it was.
func (d *DeviceCounter) Count(ctx context.Context, group string, tmpl *cloudprovider.NodeTemplate, classes []*resourceapi.DeviceClass) (map[string]int, error) {
	if tmpl == nil || tmpl.Node == nil {
		return nil, fmt.Errorf("count devices of group %s: no template", group)
	}
	bound := deviceBound(tmpl.ResourceSlices)
	if bound == 0 || len(classes) == 0 {
		return map[string]int{}, nil
	}
	key, err := templateKey(tmpl)
	if err != nil {
		return nil, fmt.Errorf("count devices of group %s: %w", group, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rules, err := d.taintRulesKey()
	if err != nil {
		return nil, fmt.Errorf("count devices of group %s: %w", group, err)
	}
	key += rules
	m, ok := d.memo[key]
	if ok && !m.until.IsZero() && !d.now().Before(m.until) {
		ok = false
	}
	if !ok {
		if len(d.memo) >= maxMemo {
			d.memo = map[string]*deviceMemo{}
		}
		m = &deviceMemo{counts: map[string]int{}}
		d.memo[key] = m
	}
	counts := m.counts
	var todo []*resourceapi.DeviceClass
	for _, c := range classes {
		if _, ok := counts[classKey(c)]; !ok {
			todo = append(todo, c)
		}
	}
	if len(todo) > 0 {
		cut := d.TimedOut
		counted, err := d.count(ctx, group, tmpl, todo, bound)
		if err != nil {
			return nil, fmt.Errorf("count devices of group %s: %w", group, err)
		}
		if d.TimedOut > cut && m.until.IsZero() {
			m.until = d.now().Add(recountAfter)
		}
		for _, c := range todo {
			counts[classKey(c)] = counted[c.Name]
		}
	}
	out := map[string]int{}
	current := make(map[string]int, len(classes))
	for _, c := range classes {
		n := counts[classKey(c)]
		current[classKey(c)] = n
		if n > 0 {
			out[c.Name] = n
		}
	}
	// Versions of classes no longer listed go.
	m.counts = current
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
		n, err := largestCount(bound, func(n int) (bool, error) { return d.probe(ctx, c.Name, n, name) })
		if err != nil {
			return nil, err
		}
		if n > 0 {
			out[c.Name] = n
		}
	}
	return out, nil
}

// largestCount is the largest n in [1, bound] that fits, 0 if none. A
// count that fits is cheap to prove and one that does not is dear (see
// probeTimeout), so it doubles while counts fit and then steps up one at a
// time: at most two probes that do not fit, where bisection takes about
// log2(bound).
func largestCount(bound int, fits func(int) (bool, error)) (int, error) {
	n, fails := 0, bound+1
	for step := 1; n < bound; step *= 2 {
		next := min(n+step, bound)
		ok, err := fits(next)
		if err != nil {
			return 0, err
		}
		if !ok {
			fails = next
			break
		}
		n = next
	}
	for n+1 < fails {
		ok, err := fits(n + 1)
		if err != nil || !ok {
			return n, err
		}
		n++
	}
	return n, nil
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
	pctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	res, err := d.runner.RunFilters(pctx, pod, []string{node})
	if ctx.Err() == nil && pctx.Err() != nil {
		d.TimedOut++
		klog.FromContext(ctx).V(2).Info("Device count probe timed out; counting it as not fitting", "class", class, "count", n, "timeout", d.timeout)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("probe %d device(s) of class %s: %w", n, class, err)
	}
	return res[0].Fits, nil
}

// taintRulesKey is what the counts depend on in the snapshot's
// DeviceTaintRules: their specs, in the order of their names; "" without
// rules. Made again only when the snapshot's shared generation moved
// (snapshot.Gen: rules are part of it, and Gens never repeat).
func (d *DeviceCounter) taintRulesKey() (string, error) {
	snap := d.runner.Snapshot()
	shared := snap.NodeGen("").Shared
	if d.rules.ok && d.rules.shared == shared {
		return d.rules.key, nil
	}
	rules := snap.DeviceTaintRules()
	key := ""
	if len(rules) > 0 {
		h := sha256.New()
		for _, r := range rules {
			b, err := r.Spec.Marshal()
			if err != nil {
				return "", fmt.Errorf("device taint rule %s: %w", r.Name, err)
			}
			h.Write(binary.AppendUvarint(nil, uint64(len(b))))
			h.Write(b)
		}
		key = fmt.Sprintf("/rules:%x", h.Sum(nil))
	}
	d.rules = rulesKey{shared: shared, key: key, ok: true}
	return key, nil
}

// templateKey is what the counts depend on besides the classes: the
// template's slices and its pods' claims (daemon pods may hold devices).
// Node and pool names, which differ per group, are left out: pools are
// numbered in the order they come.
func templateKey(t *cloudprovider.NodeTemplate) (string, error) {
	type shape struct {
		Slices [][sha256.Size]byte
		Pods   []any
	}
	var sh shape
	pools := map[string]string{}
	for _, sl := range t.ResourceSlices {
		spec := sl.Spec // a shallow copy: only top-level fields change
		spec.NodeName = nil
		pool := spec.Driver + "/" + spec.Pool.Name
		if _, ok := pools[pool]; !ok {
			pools[pool] = strconv.Itoa(len(pools))
		}
		spec.Pool.Name = pools[pool]
		sum, err := snapshot.SpecDigest(&spec)
		if err != nil {
			return "", err
		}
		sh.Slices = append(sh.Slices, sum)
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
