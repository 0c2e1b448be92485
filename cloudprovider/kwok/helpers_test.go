package kwok

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// cpuGroup is a plain CPU group.
func cpuGroup(name string, minSize, maxSize int) NodeGroupConfig {
	return NodeGroupConfig{
		Name: name, MinSize: minSize, MaxSize: maxSize,
		Template: TemplateConfig{Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
		}},
	}
}

// gpuGroup has 8 GPUs and 8 NICs, GPU i and NIC i on PCIe root pci<i>.
func gpuGroup(name string, minSize, maxSize int) NodeGroupConfig {
	g := cpuGroup(name, minSize, maxSize)
	g.Template.Labels = map[string]string{"node.kubernetes.io/instance-type": "gpu-8x"}
	g.Template.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	gpus := DriverConfig{Driver: "gpu.example.com"}
	nics := DriverConfig{Driver: "nic.example.com"}
	for i := range 8 {
		root := fmt.Sprintf("pci%d", i)
		gpus.Devices = append(gpus.Devices, builder.Device(fmt.Sprintf("gpu-%d", i)).
			Attr("resource.kubernetes.io/pcieRoot", root).Capacity("memory", "80Gi").Obj())
		nics.Devices = append(nics.Devices, builder.Device(fmt.Sprintf("nic-%d", i)).
			Attr("resource.kubernetes.io/pcieRoot", root).Obj())
	}
	g.Template.Drivers = []DriverConfig{gpus, nics}
	return g
}

// partitionableGroup has one GPU that splits into 7 slices through shared
// counters, or is taken whole.
func partitionableGroup(name string) NodeGroupConfig {
	g := cpuGroup(name, 0, 4)
	d := DriverConfig{
		Driver:         "gpu.example.com",
		SharedCounters: []resourceapi.CounterSet{builder.CounterSet("gpu-0").Counter("memory", "80Gi").Counter("slices", "7").Obj()},
	}
	for i := range 7 {
		d.Devices = append(d.Devices, builder.Device(fmt.Sprintf("gpu-0-mig-1g-%d", i)).
			Attr("profile", "1g.10gb").
			ConsumesCounters("gpu-0", map[string]string{"memory": "10Gi", "slices": "1"}).Obj())
	}
	d.Devices = append(d.Devices, builder.Device("gpu-0").Attr("profile", "full").
		ConsumesCounters("gpu-0", map[string]string{"memory": "80Gi", "slices": "7"}).Obj())
	g.Template.Drivers = []DriverConfig{d}
	return g
}

type env struct {
	p      *Provider
	cfg    *Config
	client *fake.Clientset
	clock  *testclock.FakeClock
	hooks  *reactions
}

// reactions are the reactors a test adds while the provider runs: the
// fake clientset's chain must not change once the provider's node watch
// calls into it (a data race), so one reactor, installed before the
// provider starts, hands each action to them, the newest first.
type reactions struct {
	mu   sync.Mutex
	list []reaction
}

type reaction struct {
	verb, resource string
	fn             k8stesting.ReactionFunc
}

func (r *reactions) dispatch(a k8stesting.Action) (bool, runtime.Object, error) {
	r.mu.Lock()
	list := slices.Clone(r.list)
	r.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		h := list[i]
		if (h.verb == "*" || h.verb == a.GetVerb()) && (h.resource == "*" || h.resource == a.GetResource().Resource) {
			if handled, obj, err := h.fn(a); handled {
				return true, obj, err
			}
		}
	}
	return false, nil, nil
}

// react adds a reactor for verb on resource ("*": any), consulted before
// the earlier ones, as PrependReactor's would be.
func (e *env) react(verb, resource string, fn k8stesting.ReactionFunc) {
	e.hooks.mu.Lock()
	defer e.hooks.mu.Unlock()
	e.hooks.list = append(e.hooks.list, reaction{verb: verb, resource: resource, fn: fn})
}

// newEnv starts a provider over a fake clientset holding objs; the
// provider is cleaned up when the test ends.
func newEnv(t *testing.T, cfg *Config, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{cfg: cfg, client: fake.NewClientset(objs...), clock: testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), hooks: &reactions{}}
	e.client.PrependReactor("*", "*", e.hooks.dispatch)
	e.start(t)
	return e
}

func (e *env) start(t *testing.T) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	p, err := New(e.client, e.cfg, WithClock(e.clock), WithLogger(logger))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Cleanup() })
	e.p = p
}

// restart stops the provider, as a stopped autoscaler process would, and
// returns a new one over the same API server and clock.
func (e *env) restart(t *testing.T) *env {
	t.Helper()
	if err := e.p.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	next := *e
	next.start(t)
	return &next
}

func (e *env) group(t *testing.T, name string) *nodeGroup {
	t.Helper()
	g := e.p.group(name)
	if g == nil {
		t.Fatalf("no node group %s", name)
	}
	return g
}

// eventually polls cond in real time: boot goroutines run concurrently.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func (e *env) nodes(t *testing.T) []corev1.Node {
	t.Helper()
	list, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	sort.Slice(list.Items, func(a, b int) bool { return list.Items[a].Name < list.Items[b].Name })
	return list.Items
}

func (e *env) slices(t *testing.T, node string) []resourceapi.ResourceSlice {
	t.Helper()
	list, err := e.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing slices: %v", err)
	}
	var out []resourceapi.ResourceSlice
	for _, s := range list.Items {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// states counts a group's instances: registered, booting, failed.
func states(t *testing.T, g cloudprovider.NodeGroup) (running, creating, failed int) {
	t.Helper()
	instances, err := g.Nodes()
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	for _, inst := range instances {
		switch {
		case inst.Status.State == cloudprovider.InstanceRunning:
			running++
		case inst.Status.ErrorInfo != nil:
			failed++
		default:
			creating++
		}
	}
	return running, creating, failed
}

func targetSize(t *testing.T, g cloudprovider.NodeGroup) int {
	t.Helper()
	n, err := g.TargetSize()
	if err != nil {
		t.Fatalf("TargetSize: %v", err)
	}
	return n
}
