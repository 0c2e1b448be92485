package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/dynamic"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// badInput is one entry of the catalogue of malformed input: what is
// wrong, where it must be named, and the words that must name it.
type badInput struct {
	name string
	// want must appear in what is seen: the exit output, the API
	// server's refusal, or one "Reason: message" of the events.
	want string
	// Exactly one of:
	// args: flags the binary must refuse at start (exit non-zero).
	args []string
	// reject: an object the API server must refuse; it returns the
	// create error.
	reject func(k *catalogue) error
	// apply: objects the running autoscaler must name; it returns where
	// to look.
	apply func(t *testing.T, k *catalogue) seenIn
}

// seenIn lists what was said about an input so far.
type seenIn struct {
	where string
	list  func(ctx context.Context) ([]string, error)
}

// catalogue is the one autoscaler every entry is given to, and its world.
type catalogue struct {
	*scenario
	t *testing.T
	a *framework.Autoscaler
	// cpu serves the valid pods; small only pods that ask for it; gpus
	// has one device, for selectors to be evaluated on.
	cpu, small, gpus kwok.NodeGroupConfig
	good             string // a valid kwok config, for the exit entries
	crs              dynamic.NamespaceableResourceInterface
	prov             *provScenario
	static           bool     // the node without a group for drivers' slices exists
	valid            []string // the valid pods bound so far
}

// TestBadInputCatalogue gives the autoscaler one malformed input after
// another (flags and configs it must refuse at start, objects the API
// server must refuse, objects it must name in an event) beside a valid
// group. After each object it reads it must still scale up for a valid
// pod, and all the while it must not delete, evict or cordon anything.
func TestBadInputCatalogue(t *testing.T) {
	t.Parallel()
	s := newScenarioWithin(t, 15*time.Minute)
	k := &catalogue{scenario: s, t: t, cpu: s.cpuGroup("cpu", 60), small: s.cpuGroup("small", 3),
		gpus: s.gpuGroup("gpu", 2, 1), crs: reservationsClient(t, s.c)}
	// Only pods that ask for the small group get its nodes.
	k.small.Template.Labels[smallRole] = "small"
	k.small.Template.Labels[testLabel] = "small-" + s.ns
	k.good = t.TempDir() + "/good.yaml"
	writeFile(t, k.good, "nodeGroups:\n- name: g\n  maxSize: 1\n  template:\n    capacity: {cpu: \"1\", memory: 1Gi}\n")
	// ProvisioningRequests are served when the autoscaler starts with
	// their CRD there (the serial tests have installed it already in a
	// whole run, and no parallel test makes requests).
	s.c.InstallCRD(s.ctx, t, provreqCRD)
	prov, err := versioned.NewForConfig(s.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	k.prov = &provScenario{scenario: s, requests: prov.AutoscalingV1().ProvisioningRequests(s.ns)}
	lost := k.watchLosses(t)
	k.a = s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{k.cpu, k.small, k.gpus}},
		append([]string{"--namespace=" + s.ns, "--expander=priority,least-waste"}, fastScaleDown...)...)

	entries := slices.Concat(exitInputs(t, k), rejectedInputs(), objectInputs())
	if len(entries) < 40 {
		t.Fatalf("the catalogue has %d entries, want at least 40", len(entries))
	}
	rows := make([][3]string, 0, len(entries))
	for i, e := range entries {
		// The loop still works: after each object it reads, a valid pod
		// gets a node of its own. (Made at once: some inputs, such as the
		// priority expander's config, are read only for a scale-up.)
		valid := fmt.Sprintf("valid-%02d", i)
		where, msg, ok := k.give(t, e, func() { s.c.Create(s.ctx, t, s.pod(valid).CPU("3").Obj()) })
		if !ok {
			t.Errorf("%02d %s: want %q in %s, saw: %s", i, e.name, e.want, where, msg)
		}
		if e.apply != nil {
			k.waitBound(t, valid)
			k.valid = append(k.valid, valid)
		}
		rows = append(rows, [3]string{e.name, where, excerpt(msg, e.want, 150)})
	}
	if a := k.a; a.Exited() {
		t.Fatalf("the autoscaler exited:\n%s", a.Log())
	}
	if l := lost(); len(l) > 0 {
		t.Errorf("deleted, evicted or cordoned: %s", strings.Join(l, "; "))
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "#\tinput\tseen in\tmessage\n")
	for i, r := range rows {
		fmt.Fprintf(w, "%02d\t%s\t%s\t%s\n", i, r[0], r[1], r[2])
	}
	_ = w.Flush()
	table := fmt.Sprintf("%d malformed inputs, %d valid pods scaled up after them:\n%s", len(entries), len(k.valid), b.String())
	t.Log(table)
	// go test shows a passing test's log only with -v: the table is kept
	// in _out/e2e too, for make test.
	out := filepath.Join(filepath.Dir(filepath.Dir(s.c.BinDir)), "_out", "e2e", "bad-input-catalogue.txt")
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("writing the table: %v", err)
	}
}

// give hands one input over and reports where its message was seen and
// what it said; after an object, thenValid makes the valid pod.
func (k *catalogue) give(t *testing.T, e badInput, thenValid func()) (where, msg string, ok bool) {
	t.Helper()
	switch {
	case e.args != nil:
		base := []string{"--kubeconfig=" + k.c.Kubeconf, "--leader-elect=false", "--address=127.0.0.1:0"}
		code, out := k.c.RunAutoscaler(t, time.Minute, append(base, e.args...)...)
		line := grepLines(out, e.want)
		if line == "" {
			line = shorten(out, 300)
		}
		return fmt.Sprintf("exit %d", code), line, code != 0 && strings.Contains(out, e.want) && !strings.Contains(out, "panic")
	case e.reject != nil:
		err := e.reject(k)
		if err == nil {
			return "API server", "accepted", false
		}
		return "API server", err.Error(), strings.Contains(err.Error(), e.want)
	}
	in := e.apply(t, k)
	thenValid()
	var seen []string
	err := framework.WaitFor(k.ctx, 45*time.Second, e.name, func(ctx context.Context) (bool, string, error) {
		var err error
		if seen, err = in.list(ctx); err != nil {
			return false, "", err
		}
		return slices.ContainsFunc(seen, func(m string) bool { return strings.Contains(m, e.want) }), "", nil
	})
	if err != nil {
		return in.where, strings.Join(seen, " | "), false
	}
	for _, m := range seen {
		if strings.Contains(m, e.want) {
			return in.where, m, true
		}
	}
	return in.where, "", false
}

// eventsOn is every event about the object, as "Reason: message".
func (k *catalogue) eventsOn(namespace, name string) seenIn {
	where := "event on " + name
	if namespace == metav1.NamespaceDefault {
		where = "event on " + name + " (cluster-scoped)"
	}
	return seenIn{where: where, list: func(ctx context.Context) ([]string, error) {
		list, err := k.c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range list.Items {
			out = append(out, e.Reason+": "+e.Message)
		}
		return out, nil
	}}
}

// requestSaid is what a ProvisioningRequest was told: its events and
// conditions.
func (k *catalogue) requestSaid(name string) seenIn {
	events := k.eventsOn(k.ns, name)
	return seenIn{where: "ProvisioningRequest " + name, list: func(ctx context.Context) ([]string, error) {
		out, err := events.list(ctx)
		if err != nil {
			return nil, err
		}
		pr, err := k.prov.requests.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for _, c := range pr.Status.Conditions {
			out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
		return out, nil
	}}
}

// podEvents are the events on a pod of the test.
func (k *catalogue) podEvents(name string) seenIn { return k.eventsOn(k.ns, name) }

// clusterEvents are the events on a cluster-scoped object.
func (k *catalogue) clusterEvents(name string) seenIn {
	return k.eventsOn(metav1.NamespaceDefault, name)
}

// waitBound waits until the pod is bound to a node.
func (k *catalogue) waitBound(t *testing.T, name string) {
	t.Helper()
	framework.Eventually(k.ctx, t, 90*time.Second, name+" bound", func(ctx context.Context) (bool, string, error) {
		p, err := k.c.Client.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName != "", describePod(p), nil
	})
}

// watchLosses records, from before the autoscaler starts, every node of
// the test's groups that is deleted, cordoned or tainted for deletion and
// every pod of the test that is deleted or evicted. It returns what it saw.
func (k *catalogue) watchLosses(t *testing.T) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(k.ctx)
	t.Cleanup(cancel)
	nodes, err := k.c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s in (%s,%s,%s)", kwok.LabelNodeGroup, k.cpu.Name, k.small.Name, k.gpus.Name)})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := k.c.Client.CoreV1().Pods(k.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lost []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(lost, s) {
			lost = append(lost, s)
		}
	}
	go func() {
		for ev := range nodes.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			switch {
			case ev.Type == watch.Deleted:
				note("node " + n.Name + " deleted")
			case n.Spec.Unschedulable:
				note("node " + n.Name + " cordoned")
			case slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == drain.ToBeDeletedTaint }):
				note("node " + n.Name + " tainted " + drain.ToBeDeletedTaint)
			}
		}
	}()
	go func() {
		for ev := range pods.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				note("pod " + p.Name + " deleted")
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lost)
	}
}

// create creates the object (deleted with the test) and returns the API
// server's answer.
func (k *catalogue) create(obj runtime.Object) error { return k.c.TryCreate(k.ctx, k.t, obj) }

// createReservation creates a CapacityReservation (deleted with the test).
func (k *catalogue) createReservation(name string, spec map[string]any) error {
	if _, err := k.crs.Create(k.ctx, reservation(name, spec), metav1.CreateOptions{}); err != nil {
		return err
	}
	k.t.Cleanup(func() { _ = k.crs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return nil
}

// priorities writes the priority expander's ConfigMap.
func (k *catalogue) priorities(t *testing.T, doc string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: priorityConfigMap}, Data: map[string]string{"priorities": doc}}
	cms := k.c.Client.CoreV1().ConfigMaps(k.ns)
	if _, err := cms.Update(k.ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(k.ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// boundNode is the node a pod of the test is bound to.
func (k *catalogue) boundNode(t *testing.T, pod string) string {
	t.Helper()
	p, err := k.c.Client.CoreV1().Pods(k.ns).Get(k.ctx, pod, metav1.GetOptions{})
	if err != nil || p.Spec.NodeName == "" {
		t.Fatalf("pod %s has no node (%v)", pod, err)
	}
	return p.Spec.NodeName
}

func (k *catalogue) annotateNode(t *testing.T, node, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := k.c.Client.CoreV1().Nodes().Patch(k.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// staticNode is a node of no group that the drivers' slices of the
// catalogue are published for; no pod of any test selects it.
func (k *catalogue) staticNode(t *testing.T) {
	t.Helper()
	if k.static {
		return
	}
	k.static = true
	k.c.Create(k.ctx, t, framework.Kwok(builder.Node(k.ns+"-static").CPU("4").Memory("16Gi").Obj()))
}

// excerpt is msg cut to about n characters around want, so that the
// table shows the words that matched.
func excerpt(msg, want string, n int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) <= n {
		return msg
	}
	i := strings.Index(msg, want)
	if i < 0 || i+len(want) <= n {
		return shorten(msg, n)
	}
	start := max(0, i+len(want)+n/4-n)
	end := min(len(msg), start+n)
	return "..." + msg[start:end] + "..."
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
