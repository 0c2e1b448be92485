package e2e

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The Kueue tests run the real Kueue manager (framework.Kueue) and are
// serial, as the ProvisioningRequest tests are: every autoscaler serves
// every request in the cluster.

// provisioningController is the controllerName of Kueue's
// ProvisioningRequest admission check.
const provisioningController = "kueue.x-k8s.io/provisioning-request"

// queueNameLabel puts a Job in a LocalQueue.
const queueNameLabel = "kueue.x-k8s.io/queue-name"

type kueueScenario struct {
	*provScenario
	k *framework.Kueue
}

func newKueueScenario(t *testing.T) *kueueScenario {
	s := newProvScenario(t)
	k := s.c.Kueue(t)
	k.ManageNamespace(s.ctx, t, s.ns)
	return &kueueScenario{provScenario: s, k: k}
}

// queueOpts shape a test's queue.
type queueOpts struct {
	class string
	// retries is the ProvisioningRequestConfig's backoffLimitCount (0: 1);
	// the backoff itself is 1s, Kueue's minimum, to keep the tests short.
	retries int32
	// extraChecks are admission checks of the test's own controller (see
	// framework.Kueue.SetActive), listed after the provisioning check.
	extraChecks []string
	// gpus is the ClusterQueue's quota of framework.KueueGPUResource.
	gpus int
}

// queue creates the objects a user applies to wire Kueue to the
// autoscaler (docs/kueue.md shows them): a ResourceFlavor, a
// ProvisioningRequestConfig for the class, an AdmissionCheck naming it, a
// ClusterQueue with the check for the test's namespace, and a LocalQueue
// in it. It returns the LocalQueue's and the check's names.
func (s *kueueScenario) queue(t *testing.T, o queueOpts) (localQueue, check string) {
	t.Helper()
	if o.retries == 0 {
		o.retries = 1
	}
	name := s.ns
	check = name + "-prov"
	resources := []any{
		map[string]any{"name": "cpu", "nominalQuota": "1000"},
		map[string]any{"name": "memory", "nominalQuota": "10Ti"},
	}
	covered := []any{"cpu", "memory"}
	if o.gpus > 0 {
		resources = append(resources, map[string]any{"name": framework.KueueGPUResource, "nominalQuota": fmt.Sprint(o.gpus)})
		covered = append(covered, framework.KueueGPUResource)
	}
	checks := []any{map[string]any{"name": check}}
	for _, c := range o.extraChecks {
		checks = append(checks, map[string]any{"name": c})
	}
	s.k.Create(s.ctx, t,
		framework.KueueObject("ResourceFlavor", "", name, map[string]any{}),
		framework.KueueObject("ProvisioningRequestConfig", "", name, map[string]any{
			"provisioningClassName": o.class,
			"retryStrategy":         map[string]any{"backoffLimitCount": o.retries, "backoffBaseSeconds": 1, "backoffMaxSeconds": 1},
		}),
		framework.KueueObject("AdmissionCheck", "", check, map[string]any{
			"controllerName": provisioningController,
			"parameters":     map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": name},
		}),
		framework.KueueObject("ClusterQueue", "", name, map[string]any{
			"namespaceSelector":       map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": s.ns}},
			"resourceGroups":          []any{map[string]any{"coveredResources": covered, "flavors": []any{map[string]any{"name": name, "resources": resources}}}},
			"admissionChecksStrategy": map[string]any{"admissionChecks": checks},
		}),
		framework.KueueObject("LocalQueue", s.ns, "main", map[string]any{"clusterQueue": name}),
	)
	return "main", check
}

// manualCheck is an AdmissionCheck whose controller is the test.
func (s *kueueScenario) manualCheck(t *testing.T) string {
	t.Helper()
	name := s.ns + "-manual"
	s.k.Create(s.ctx, t, framework.KueueObject("AdmissionCheck", "", name, map[string]any{"controllerName": "e2e.dra-autoscaler.io/manual"}))
	s.k.SetActive(s.ctx, t, name)
	return name
}

// job creates a Job of n pods like pod in the LocalQueue; Kueue's webhook
// suspends it until the Workload is admitted.
func (s *kueueScenario) job(t *testing.T, name, queue string, n int32, pod *corev1.Pod) {
	t.Helper()
	spec := pod.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	for i := range spec.Containers {
		if spec.Containers[i].Image == "" {
			spec.Containers[i].Image = "registry.k8s.io/pause:3.10"
		}
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{queueNameLabel: queue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(n), Completions: ptr.To(n),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}}, Spec: spec},
		},
	}
	got, err := s.c.Client.BatchV1().Jobs(s.ns).Create(s.ctx, j, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Job %s: %v", name, err)
	}
	if !ptr.Deref(got.Spec.Suspend, false) {
		t.Fatalf("Job %s was not suspended by Kueue's webhook", name)
	}
}

// workload is a Job's Workload as Kueue reports it.
type workload struct {
	name       string
	conditions []metav1.Condition
	checks     map[string]checkState
	active     bool
}

type checkState struct {
	State      string `json:"state"`
	Message    string `json:"message"`
	RetryCount int32  `json:"retryCount"`
}

func (w workload) String() string {
	var parts []string
	for _, c := range w.conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	for n, c := range w.checks {
		parts = append(parts, fmt.Sprintf("check %s %s retries %d %q", n, c.State, c.RetryCount, c.Message))
	}
	return w.name + ": " + strings.Join(parts, ", ")
}

func (w workload) is(typ string) bool { return apimeta.IsStatusConditionTrue(w.conditions, typ) }

// workloadOf finds the Workload Kueue made for the Job (it owns it).
func (s *kueueScenario) workloadOf(ctx context.Context, job string) (*workload, *unstructured.Unstructured, error) {
	items, err := s.k.Workloads(ctx, s.ns)
	if err != nil {
		return nil, nil, err
	}
	for i := range items {
		for _, ref := range items[i].GetOwnerReferences() {
			if ref.Kind != "Job" || ref.Name != job {
				continue
			}
			var st struct {
				Spec struct {
					Active *bool `json:"active"`
				} `json:"spec"`
				Status struct {
					Conditions      []metav1.Condition `json:"conditions"`
					AdmissionChecks []struct {
						Name       string `json:"name"`
						State      string `json:"state"`
						Message    string `json:"message"`
						RetryCount int32  `json:"retryCount"`
					} `json:"admissionChecks"`
				} `json:"status"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, &st); err != nil {
				return nil, nil, err
			}
			w := &workload{name: items[i].GetName(), conditions: st.Status.Conditions, checks: map[string]checkState{},
				active: ptr.Deref(st.Spec.Active, true)}
			for _, c := range st.Status.AdmissionChecks {
				w.checks[c.Name] = checkState{State: c.State, Message: c.Message, RetryCount: c.RetryCount}
			}
			return w, &items[i], nil
		}
	}
	return nil, nil, nil
}

// waitWorkload waits until the Job's Workload satisfies ok.
func (s *kueueScenario) waitWorkload(t *testing.T, job, what string, timeout time.Duration, ok func(workload) bool) workload {
	t.Helper()
	var got workload
	framework.Eventually(s.ctx, t, timeout, "Workload of "+job+" "+what, func(ctx context.Context) (bool, string, error) {
		w, _, err := s.workloadOf(ctx, job)
		if err != nil || w == nil {
			return false, "no Workload yet", err
		}
		got = *w
		return ok(got), got.String(), nil
	})
	return got
}

// requestName is the name Kueue gives attempt n of the Workload's
// ProvisioningRequest for check.
func requestName(wl, check string, attempt int) string {
	return fmt.Sprintf("%s-%s-%d", wl, check, attempt)
}

// jobPods lists the Job's pods.
func (s *kueueScenario) jobPods(ctx context.Context, job string) ([]corev1.Pod, error) {
	list, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "job=" + job})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitJobBound waits until the Job's n pods are bound and returns them.
func (s *kueueScenario) waitJobBound(t *testing.T, job string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("%d pods of Job %s bound", n, job), func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = s.jobPods(ctx, job); err != nil {
			return false, "", err
		}
		bound := 0
		var seen []string
		for i := range pods {
			if pods[i].Spec.NodeName != "" {
				bound++
			}
			seen = append(seen, describePod(&pods[i]))
		}
		return bound == n && len(pods) == n, strings.Join(seen, "; "), nil
	})
	return pods
}

// staticNode is a Ready kwok node of the test in no node group, with the
// GPUs of driver (none when gpus is 0).
func (s *kueueScenario) staticNode(t *testing.T, name, cpu string, driver string, gpus int) string {
	t.Helper()
	node := framework.Kwok(builder.Node(s.ns+"-"+name).CPU(cpu).Memory("64Gi").Label(testLabel, s.ns).Obj())
	objs := []runtime.Object{node}
	if gpus > 0 {
		var devs []*builder.DeviceBuilder
		for i := range gpus {
			devs = append(devs, builder.Device(fmt.Sprintf("gpu-%d", i)))
		}
		objs = append(objs, builder.ResourceSlice(node.Name+"-gpus", node.Name, driver, node.Name).Devices(devs...).Obj())
	}
	s.c.Create(s.ctx, t, objs...)
	return node.Name
}

// noGroupNodes holds while the group has no node.
func (s *kueueScenario) noGroupNodes(t *testing.T, group string, d time.Duration) {
	t.Helper()
	framework.Consistently(s.ctx, t, d, "no node added to "+group, func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, group)
		return err == nil && len(nodes) == 0, fmt.Sprintf("%d nodes", len(nodes)), err
	})
}

// consumes says whether Kueue gave the pod the annotations that make it a
// consumer of request (from the admission check's podSetUpdates).
func consumes(p *corev1.Pod, request, class string) bool {
	return p.Annotations[v1.ProvisioningRequestPodAnnotationKey] == request && p.Annotations[v1.ProvisioningClassPodAnnotationKey] == class
}

// requestLog records every condition the namespace's ProvisioningRequests
// ever had, from a watch: Kueue deletes a request once a later attempt
// replaces it, or once its Workload is evicted, so a poll of the requests
// can miss the state that made Kueue act.
type requestLog struct {
	mu   sync.Mutex
	seen map[string][]metav1.Condition // by request name, in the order seen
}

func (s *kueueScenario) watchRequests(t *testing.T) *requestLog {
	t.Helper()
	l := &requestLog{seen: map[string][]metav1.Condition{}}
	w, err := s.provScenario.requests.Watch(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching ProvisioningRequests: %v", err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			pr, ok := ev.Object.(*v1.ProvisioningRequest)
			if !ok {
				continue
			}
			l.mu.Lock()
			if _, known := l.seen[pr.Name]; !known {
				l.seen[pr.Name] = nil
			}
			for _, c := range pr.Status.Conditions {
				if last := apimeta.FindStatusCondition(l.seen[pr.Name], c.Type); last == nil || last.Status != c.Status || last.Reason != c.Reason {
					l.seen[pr.Name] = append(l.seen[pr.Name], c)
				}
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// had returns the last recorded condition typ=True of the request.
func (l *requestLog) had(name, typ string) (metav1.Condition, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got metav1.Condition
	found := false
	for _, c := range l.seen[name] {
		if c.Type == typ && c.Status == metav1.ConditionTrue {
			got, found = c, true
		}
	}
	return got, found
}

// names are the requests seen, sorted.
func (l *requestLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for n := range l.seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for n, cs := range l.seen {
		var conds []string
		for _, c := range cs {
			conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
		}
		parts = append(parts, n+" "+strings.Join(conds, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// waitHad waits until the request was seen with typ=True and returns it.
func (l *requestLog) waitHad(t *testing.T, ctx context.Context, name, typ string, timeout time.Duration) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	framework.Eventually(ctx, t, timeout, name+" "+typ+"=True", func(context.Context) (bool, string, error) {
		var ok bool
		got, ok = l.had(name, typ)
		return ok, l.String(), nil
	})
	return got
}

// approve sets the Workload's state of check (one of the test's own) to
// Ready, as that check's controller would.
func (s *kueueScenario) approve(t *testing.T, job, check string) {
	t.Helper()
	framework.Eventually(s.ctx, t, 30*time.Second, "check "+check+" of "+job+" set Ready", func(ctx context.Context) (bool, string, error) {
		_, obj, err := s.workloadOf(ctx, job)
		if err != nil || obj == nil {
			return false, "no Workload", err
		}
		checks, _, _ := unstructured.NestedSlice(obj.Object, "status", "admissionChecks")
		found := false
		for i := range checks {
			c := checks[i].(map[string]any)
			if c["name"] == check {
				c["state"], c["message"] = "Ready", "approved by the test"
				c["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
				found = true
			}
		}
		if !found {
			return false, fmt.Sprintf("no state of %s yet: %v", check, checks), nil
		}
		if err := unstructured.SetNestedSlice(obj.Object, checks, "status", "admissionChecks"); err != nil {
			return false, "", err
		}
		// A conflict (Kueue wrote the status meanwhile) is tried again.
		if err := s.k.UpdateWorkloadStatus(ctx, obj); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// watchAllocations records the device each claim of the namespace was
// allocated (driver/pool/device), from a watch: kwok completes a Job's
// pods at once, and the claims made from templates go with them.
func (s *kueueScenario) watchAllocations(t *testing.T) func() map[string][]string {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]string{}
	w, err := s.c.Client.ResourceV1().ResourceClaims(s.ns).Watch(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching ResourceClaims: %v", err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*resourceapi.ResourceClaim)
			if !ok || c.Status.Allocation == nil {
				continue
			}
			var devs []string
			for _, r := range c.Status.Allocation.Devices.Results {
				devs = append(devs, r.Driver+"/"+r.Pool+"/"+r.Device)
			}
			mu.Lock()
			got[c.Name] = devs
			mu.Unlock()
		}
	}()
	return func() map[string][]string {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
}
