package autoscaler_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	provv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	provclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const gpuDriver = "gpu.example.com"

// pendingPod is a pod the scheduler found unschedulable a minute ago.
func pendingPod(b *builder.PodBuilder) *corev1.Pod {
	pod := b.Obj()
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
	return pod
}

func gpuSlice(name, node string, devices ...string) *resourceapi.ResourceSlice {
	b := builder.ResourceSlice(name, node, gpuDriver, node)
	for _, d := range devices {
		b = b.Devices(builder.Device(d))
	}
	return b.Obj()
}

// explain and the loop decide alike where they could differ: DRA claims
// on an existing GPU node, a ProvisioningRequest's booking of that
// node's CPUs (which turns one claim's fit into a scale-up) and its
// consumer (left alone), and a CapacityBuffer planned after the real
// pods. explain is wired as the binary wires it (read-only mode, the
// provider's read-only view) over the same cluster as the loop; for
// every pending pod, what explain says (a node it fits, the groups that
// scale up) is what the loop then does.
func TestExplainDecidesAsTheLoopWithClaimsBookingsAndBuffers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	gpuNode := builder.Node(template.PlaceholderNodeName).CPU("8").Memory("32Gi").Label("group", "gpu").Obj()
	gpu := fakeprovider.NewGroup("gpu", 0, 5).WithTemplate(&cloudprovider.NodeTemplate{Node: gpuNode,
		ResourceSlices: []*resourceapi.ResourceSlice{gpuSlice("t-gpus", template.PlaceholderNodeName, "gpu-0", "gpu-1")}}, nil)
	cpu := cpuGroup("cpu", "4")
	provider := fakeprovider.New(gpu, cpu)

	withClaim := func(name, cpus, claim string) *corev1.Pod {
		return pendingPod(builder.Pod("ns", name).CPU(cpus).Memory("1Gi").Claim("gpu", claim))
	}
	consumer := pendingPod(builder.Pod("ns", "held-0").CPU("6").Memory("1Gi"))
	consumer.Annotations = map[string]string{provv1.ProvisioningRequestPodAnnotationKey: "held-check-1"}
	pods := []*corev1.Pod{
		withClaim("trainer-a", "4", "ca"),                           // n1's GPUs are free, its CPUs booked
		withClaim("trainer-b", "1", "cb"),                           // fits what the booking leaves of n1
		pendingPod(builder.Pod("ns", "web").CPU("2").Memory("1Gi")), // no claim
		pendingPod(builder.Pod("ns", "huge").CPU("64")),             // nothing helps
		consumer, // the request provides for it
	}
	kube := fake.NewClientset()
	create := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := kube.CoreV1().Nodes().Create(ctx, builder.Node("n1").CPU("8").Memory("32Gi").Label("group", "gpu").Obj(), metav1.CreateOptions{})
	create(err)
	_, err = kube.ResourceV1().ResourceSlices().Create(ctx, gpuSlice("n1-gpus", "n1", "gpu-0", "gpu-1"), metav1.CreateOptions{})
	create(err)
	_, err = kube.ResourceV1().DeviceClasses().Create(ctx, builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), metav1.CreateOptions{})
	create(err)
	for _, c := range []string{"ca", "cb"} {
		_, err = kube.ResourceV1().ResourceClaims("ns").Create(ctx, builder.Claim("ns", c).Request(builder.Request("gpu", "gpu")).Obj(), metav1.CreateOptions{})
		create(err)
	}
	for _, p := range pods {
		_, err = kube.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{})
		create(err)
	}
	held := builder.Pod("ns", "x").CPU("6").Memory("1Gi").Obj()
	_, err = kube.CoreV1().PodTemplates("ns").Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ppt-held"},
		Template: corev1.PodTemplateSpec{Spec: held.Spec}}, metav1.CreateOptions{})
	create(err)
	kube.Resources = append(kube.Resources, &metav1.APIResourceList{GroupVersion: provv1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "provisioningrequests", Namespaced: true, Kind: "ProvisioningRequest"}}})
	// Provisioned a minute ago: within the booking window, its capacity
	// (6 of n1's 8 CPUs) is held for its consumer.
	request := &provv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "held-check-1", UID: "uid-held",
		Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: provv1.ProvisioningRequestSpec{ProvisioningClassName: provv1.ProvisioningClassCheckCapacity,
			PodSets: []provv1.PodSet{{PodTemplateRef: provv1.Reference{Name: "ppt-held"}, Count: 1}}},
		Status: provv1.ProvisioningRequestStatus{Conditions: []metav1.Condition{{Type: provv1.Provisioned, Status: metav1.ConditionTrue,
			Reason: provreq.ReasonCapacityIsProvisioned, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}}}}
	requests, writes := provisioningRequestServer(t, request)

	groups, sizes, err := nodegroups.Restrict(provider.NodeGroups(), nil)
	create(err)
	wire := func(mode autoscaler.Mode, provider cloudprovider.CloudProvider, recorder record.EventRecorder) *autoscaler.Autoscaler {
		env := autoscaler.Env{Mode: mode, Client: kube, ProvisioningRequests: requests, Provider: provider, Recorder: recorder,
			Clock: testclock.NewFakeClock(t0), Groups: groups, Sizes: sizes, BufferSource: bufferSource(t, 1, "3")}
		opts := config.Default()
		// The fake clientset ignores dry runs: the buffer's admission
		// check would create its pod.
		opts.CapacityBuffers.PodDryRun = false
		a, err := autoscaler.New(ctx, opts, env)
		create(err)
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(a.Shutdown)
		t.Cleanup(cancel)
		create(a.Start(ctx))
		return a
	}
	explainer := wire(autoscaler.Explaining, cloudprovider.ReadOnly(provider), record.NewFakeRecorder(100))
	explained := map[string]string{}
	for _, p := range pods {
		r, err := explainer.Explain(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		create(err)
		switch {
		case r.State == "Ignored":
			explained[p.Name] = ""
		case r.Node != "":
			explained[p.Name] = "fits " + r.Node
		default:
			explained[p.Name] = scaledGroups(r)
		}
	}
	if calls := append(gpu.Calls(), cpu.Calls()...); len(calls) != 0 {
		t.Fatalf("explain called the provider: %+v", calls)
	}
	if w := writes(); len(w) != 0 {
		t.Fatalf("explain wrote ProvisioningRequests: %v", w)
	}

	l := wire(autoscaler.Running, provider, record.NewFakeRecorder(100))
	st, err := l.RunOnce(ctx)
	create(err)
	decided := map[string]string{}
	for _, p := range pods {
		decided[p.Name] = ""
	}
	for p, node := range pass.Get(st, fitexisting.Fits) {
		decided[p.Name] = "fits " + node
	}
	bufferScaledUp := false
	for _, r := range pass.Get(st, act.Results) {
		if r.Err != nil {
			t.Errorf("scale-up of %s failed: %v", r.Group.Id, r.Err)
		}
		if len(r.Pods) == 0 {
			bufferScaledUp = true
		}
		for _, p := range r.Pods {
			decided[p.Name] = r.Group.Id
		}
	}
	// What makes the comparison worth doing: the booking moved
	// trainer-a off n1, trainer-b still fits there, the consumer and the
	// huge pod get nothing, and the buffer got its own node.
	if decided["trainer-a"] != "gpu" || decided["trainer-b"] != "fits n1" || decided["held-0"] != "" || decided["huge"] != "" || !bufferScaledUp {
		t.Fatalf("the loop decided %v (buffer scaled up: %v): not the cluster this test means to check", decided, bufferScaledUp)
	}
	if diff := cmp.Diff(decided, explained); diff != "" {
		t.Errorf("explain (+) and the loop (-) decided differently:\n%s", diff)
	}
}

// provisioningRequestServer serves objs as the API server would, to the
// real typed client (the module's generated fake does not build against
// our client-go): lists, watches that stay open, and status updates,
// which it records (writes lists them).
func provisioningRequestServer(t *testing.T, objs ...*provv1.ProvisioningRequest) (provclient.Interface, func() []string) {
	var mu sync.Mutex
	var written []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
			// A streaming list (client-go's WatchList) gets the objects,
			// then the bookmark that ends the initial events.
			enc := json.NewEncoder(w)
			if r.URL.Query().Get("sendInitialEvents") == "true" {
				for _, o := range objs {
					_ = enc.Encode(map[string]any{"type": "ADDED", "object": o})
				}
				end := &provv1.ProvisioningRequest{TypeMeta: metav1.TypeMeta{APIVersion: provv1.SchemeGroupVersion.String(), Kind: "ProvisioningRequest"},
					ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
				_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": end})
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodGet:
			list := provv1.ProvisioningRequestList{TypeMeta: metav1.TypeMeta{APIVersion: provv1.SchemeGroupVersion.String(), Kind: "ProvisioningRequestList"},
				ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
			for _, o := range objs {
				list.Items = append(list.Items, *o)
			}
			_ = json.NewEncoder(w).Encode(list)
		default:
			mu.Lock()
			written = append(written, r.Method+" "+r.URL.Path)
			mu.Unlock()
			body, _ := io.ReadAll(r.Body)
			_, _ = w.Write(body)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := provclient.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), written...)
	}
}
