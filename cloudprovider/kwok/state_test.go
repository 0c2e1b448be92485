package kwok

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// recorded returns the instance names in a group's state ConfigMap, nil
// when there is none.
func recorded(t *testing.T, e *env, ns, group string) []string {
	t.Helper()
	// From the tracker: reactors injecting errors stay out of the way.
	obj, err := e.client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, ns, stateName(group))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading state: %v", err)
	}
	cm := obj.(*corev1.ConfigMap)
	var records []instanceRecord
	if err := json.Unmarshal([]byte(cm.Data[stateKey]), &records); err != nil {
		t.Fatalf("decoding state %q: %v", cm.Data[stateKey], err)
	}
	names := []string{}
	for _, r := range records {
		names = append(names, r.Name)
	}
	return names
}

func refresh(t *testing.T, e *env) {
	t.Helper()
	if err := e.p.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

func nodesOf(t *testing.T, ng cloudprovider.NodeGroup) []cloudprovider.Instance {
	t.Helper()
	instances, err := ng.Nodes()
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	return instances
}

// failOn makes the fake API server refuse verb on resource while the
// returned flag is set.
func failOn(e *env, verb, resource string) *atomic.Bool {
	fail := &atomic.Bool{}
	fail.Store(true)
	e.react(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("injected by the test"))
		}
		return false, nil, nil
	})
	return fail
}

// A restarted provider knows the instances the old one requested that
// never registered, and failed ones, with their ids and creation times;
// it can give them up, which removes their records.
func TestRestartRestoresUnregisteredInstances(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.Faults = FaultsConfig{NeverRegister: true, OutOfResourcesAfter: ptr.To(2)}
	a := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	if _, err := a.group(t, "gpu").IncreaseSize(t.Context(), 3); !errors.Is(err, ErrOutOfResources) {
		t.Fatalf("IncreaseSize: %v, want 2 created and 1 out of resources", err)
	}
	before := nodesOf(t, a.group(t, "gpu"))
	a.clock.Step(time.Hour)

	b := a.restart(t)
	ng := b.group(t, "gpu")
	if n := len(nodesOf(t, ng)); n != 0 {
		t.Fatalf("%d instances before Refresh: New makes no API call", n)
	}
	refresh(t, b)
	after := nodesOf(t, ng)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("instances after restart differ (-before +after):\n%s", diff)
	}
	if got := targetSize(t, ng); got != 2 {
		t.Errorf("target after restart = %d, want 2", got)
	}

	if err := ng.DecreaseTargetSize(t.Context(), -1); err != nil {
		t.Fatalf("DecreaseTargetSize: %v", err)
	}
	var victims []*corev1.Node
	for _, inst := range nodesOf(t, ng) {
		victims = append(victims, fakeNode(inst.Id))
	}
	if len(victims) != 2 {
		t.Fatalf("%d instances left, want 1 pending and 1 failed", len(victims))
	}
	if err := ng.ForceDeleteNodes(t.Context(), victims); err != nil {
		t.Fatalf("ForceDeleteNodes: %v", err)
	}
	if got := targetSize(t, ng); got != 0 {
		t.Errorf("target = %d, want 0", got)
	}
	if names := recorded(t, b, DefaultStateNamespace, "gpu"); len(names) != 0 {
		t.Errorf("records %v left after giving every instance up", names)
	}
	c := b.restart(t)
	refresh(t, c)
	if n := len(nodesOf(t, c.group(t, "gpu"))); n != 0 {
		t.Errorf("a third process restored %d given-up instances", n)
	}
}

// A booting instance goes on booting in the new process, its delays
// counted from its original request.
func TestRestartResumesBoot(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.BootDelay = metav1.Duration{Duration: 10 * time.Second}
	g.DriverDelay = metav1.Duration{Duration: 5 * time.Second}
	a := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	requested := a.clock.Now()
	ids, err := a.group(t, "gpu").IncreaseSize(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	a.clock.Step(4 * time.Second)

	b := a.restart(t)
	ng := b.group(t, "gpu")
	refresh(t, b)
	b.clock.Step(5 * time.Second)
	if n := len(b.nodes(t)); n != 0 {
		t.Fatalf("%d nodes 9s after the request, boot delay is 10s", n)
	}
	b.clock.Step(time.Second)
	eventually(t, "restored instance registered", func() bool { r, _, _ := states(t, ng); return r == 1 })
	instances := nodesOf(t, ng)
	if instances[0].Id != ids[0] || !instances[0].CreatedAt.Equal(requested) {
		t.Errorf("instance %s created at %s, want %s created at %s", instances[0].Id, instances[0].CreatedAt, ids[0], requested)
	}
	b.clock.Step(5 * time.Second)
	eventually(t, "slices", func() bool { return len(b.slices(t, b.nodes(t)[0].Name)) == 2 })
}

// The old process created the Node but stopped before recording it: the
// restored instance finds its Node instead of failing to create it.
func TestRestoredInstanceFindsItsNode(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.BootDelay = metav1.Duration{Duration: 10 * time.Second}
	a := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	if _, err := a.group(t, "gpu").IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	name := recorded(t, a, DefaultStateNamespace, "gpu")[0]
	b := a.restart(t)
	if _, err := b.client.CoreV1().Nodes().Create(t.Context(), g.buildNode(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.clock.Step(10 * time.Second)
	refresh(t, b)
	ng := b.group(t, "gpu")
	settled(t, b, ng)
	if r, c, f := states(t, ng); r != 1 || c != 0 || f != 0 {
		t.Errorf("running %d creating %d failed %d, want 1 0 0", r, c, f)
	}
	if n := len(b.slices(t, name)); n != 2 {
		t.Errorf("%d slices, want 2", n)
	}
}

// Registered instances keep their creation time and their faults: a node
// whose drivers never publish does not get slices from the new process.
func TestRestartKeepsRecordedRegisteredInstances(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.Faults.DriversNeverPublish = true
	a := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	requested := a.clock.Now()
	if _, err := a.group(t, "gpu").IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "registered", func() bool { r, _, _ := states(t, a.group(t, "gpu")); return r == 1 })
	settled(t, a, a.group(t, "gpu")) // and recorded as such
	a.clock.Step(time.Hour)

	b := a.restart(t)
	var writes atomic.Int32
	b.react("*", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() != "get" {
			writes.Add(1)
		}
		return false, nil, nil
	})
	ng := b.group(t, "gpu")
	refresh(t, b)
	settled(t, b, ng)
	if n := writes.Load(); n != 0 {
		t.Errorf("%d writes by a process that learnt nothing new (an explain run must not race the autoscaler)", n)
	}
	instances := nodesOf(t, ng)
	if len(instances) != 1 || instances[0].Status.State != cloudprovider.InstanceRunning || !instances[0].CreatedAt.Equal(requested) {
		t.Fatalf("instances %+v, want one running, created at %s", instances, requested)
	}
	if n := len(b.slices(t, b.nodes(t)[0].Name)); n != 0 {
		t.Errorf("%d slices republished for a node whose drivers never publish", n)
	}
}

// A failed write loses nothing: memory stays the truth and the next
// Refresh writes it.
func TestStateWriteErrorsAreRetried(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.Faults.NeverRegister = true
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	update, create := failOn(e, "update", "configmaps"), failOn(e, "create", "configmaps")
	ng := e.group(t, "gpu")
	if ids, err := ng.IncreaseSize(t.Context(), 1); err != nil || len(ids) != 1 {
		t.Fatalf("IncreaseSize = %v, %v; a failed write must not fail it", ids, err)
	}
	if names := recorded(t, e, DefaultStateNamespace, "gpu"); names != nil {
		t.Fatalf("records %v written despite the failure", names)
	}
	refresh(t, e) // still failing
	update.Store(false)
	create.Store(false)
	refresh(t, e)
	if names := recorded(t, e, DefaultStateNamespace, "gpu"); len(names) != 1 {
		t.Fatalf("records %v after the retry, want 1", names)
	}
	next := e.restart(t)
	refresh(t, next)
	if got := targetSize(t, next.group(t, "gpu")); got != 1 {
		t.Errorf("target after a restart = %d, want the 1 instance written on retry", got)
	}
}

// Until the records can be read, a new process neither restores nor
// overwrites them.
func TestStateReadErrorDefersRestore(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.Faults.NeverRegister = true
	a := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	if _, err := a.group(t, "gpu").IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	b := a.restart(t)
	get := failOn(b, "get", "configmaps")
	refresh(t, b)
	ng := b.group(t, "gpu")
	if _, err := ng.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize: %v", err)
	}
	if names := recorded(t, b, DefaultStateNamespace, "gpu"); len(names) != 1 {
		t.Fatalf("records %v, want the old process's one untouched", names)
	}
	get.Store(false)
	refresh(t, b)
	if got := targetSize(t, ng); got != 2 {
		t.Errorf("target %d, want 2: the restored instance and the new one", got)
	}
	if names := recorded(t, b, DefaultStateNamespace, "gpu"); len(names) != 2 {
		t.Errorf("records %v, want 2", names)
	}
}

// The state namespace is created when it does not exist.
func TestStateNamespaceCreatedLazily(t *testing.T) {
	g := cpuGroup("cpu", 0, 10)
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}, StateNamespace: "kwok-state"})
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	e.react("create", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		// As a real API server: no objects in a namespace that does
		// not exist. The tracker, not the client: reactors run under
		// the fake clientset's lock.
		if _, err := e.client.Tracker().Get(namespaces, "", action.GetNamespace()); err != nil {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, action.GetNamespace())
		}
		return false, nil, nil
	})
	if _, err := e.group(t, "cpu").IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Namespaces().Get(t.Context(), "kwok-state", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace: %v", err)
	}
	if names := recorded(t, e, "kwok-state", "cpu"); len(names) != 1 {
		t.Errorf("records in kwok-state %v, want 1", names)
	}
	if names := recorded(t, e, DefaultStateNamespace, "cpu"); names != nil {
		t.Errorf("records in %s %v, want none", DefaultStateNamespace, names)
	}
}

// An instance the new process gives up before it has read the records
// (by providerID, as upstream cleans up) is not restored from them.
func TestGivenUpBeforeRefreshIsNotRestored(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.Faults.NeverRegister = true
	a := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ids, err := a.group(t, "gpu").IncreaseSize(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	b := a.restart(t)
	ng := b.group(t, "gpu")
	if err := ng.ForceDeleteNodes(t.Context(), []*corev1.Node{fakeNode(ids[0])}); err != nil {
		t.Fatalf("ForceDeleteNodes: %v", err)
	}
	refresh(t, b)
	instances := nodesOf(t, ng)
	if len(instances) != 1 || instances[0].Id != ids[1] {
		t.Errorf("instances %+v, want only %s", instances, ids[1])
	}
	if names := recorded(t, b, DefaultStateNamespace, "gpu"); len(names) != 1 {
		t.Errorf("records %v, want 1", names)
	}
}
