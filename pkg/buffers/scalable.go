package buffers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// Scales resolves a scalableRef of any kind served with a scale
// subresource, as upstream's buffer controller does: the kind is mapped
// to its resource through discovery, the replicas and the pods' selector
// are read from /scale. The pod shape is the object's spec.template when
// it has one that is a pod template (a ReplicationController's, most
// custom workloads'), else the newest pod the selector matches (upstream's
// only way: the buffer waits for the workload's first pod). Each
// resolution is two or three reads from the API server; only buffers
// naming kinds the informers do not cover take this path.
type Scales struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// Client lists the pods of a workload without a spec.template.
	Client kubernetes.Interface
	// Context bounds every call (the watcher's); nil: Background.
	Context context.Context

	mu        sync.Mutex
	lastReset time.Time
}

// scaleTimeout bounds one resolution.
const scaleTimeout = 10 * time.Second

// remapEvery is how often an unknown kind makes the mapper forget what
// discovery said (a CRD may be installed after the autoscaler starts).
const remapEvery = time.Minute

// NoPodsError is a scalableRef whose shape can only come from its pods,
// and it has none yet.
type NoPodsError struct {
	Ref      v1beta1.ScalableRef
	Selector string
}

func (e *NoPodsError) Error() string {
	return fmt.Sprintf("%s %s has no spec.template and no pod matches its scale selector %q yet: its pods' shape is the buffer's",
		e.Ref.Kind, e.Ref.Name, e.Selector)
}

// coreGroup maps "core", which upstream's resolvers use for the core
// group, to the empty name the API uses.
func coreGroup(g string) string {
	if g == "core" {
		return ""
	}
	return g
}

// Workload resolves ref in namespace through the scale subresource.
func (s *Scales) Workload(namespace string, ref v1beta1.ScalableRef) (*Workload, error) {
	parent := s.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, scaleTimeout)
	defer cancel()
	mapping, err := s.mapping(schema.GroupKind{Group: coreGroup(ref.APIGroup), Kind: ref.Kind})
	if meta.IsNoMatchError(err) {
		return nil, &UnsupportedKindError{Ref: ref, Why: "the API server serves no such kind"}
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s of API group %q to a resource: %w", ref.Kind, ref.APIGroup, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, &UnsupportedKindError{Ref: ref, Why: "it is not namespaced"}
	}
	res := s.Dynamic.Resource(mapping.Resource).Namespace(namespace)
	obj, err := res.Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err // NotFound and Forbidden are the caller's to tell apart
	}
	scale, err := res.Get(ctx, ref.Name, metav1.GetOptions{}, "scale")
	if apierrors.IsNotFound(err) {
		// The object exists: the subresource does not.
		return nil, &UnsupportedKindError{Ref: ref, Why: "it has no scale subresource"}
	}
	if err != nil {
		return nil, err
	}
	replicas, _, err := unstructured.NestedInt64(scale.Object, "status", "replicas")
	if err != nil {
		return nil, fmt.Errorf("the scale subresource of %s %s: status.replicas: %w", ref.Kind, ref.Name, err)
	}
	wl := &Workload{Replicas: int32(max(0, min(replicas, math.MaxInt32))), Generation: obj.GetGeneration(),
		Version: fmt.Sprintf("%s/%s/%d", mapping.Resource.Resource, obj.GetUID(), obj.GetGeneration())}
	if t := podTemplateOf(obj); t != nil {
		wl.Template = t
		return wl, nil
	}
	selector, _, _ := unstructured.NestedString(scale.Object, "status", "selector")
	if selector == "" {
		return nil, &UnsupportedKindError{Ref: ref, Why: "it has no spec.template and its scale subresource gives no selector"}
	}
	pod, err := s.newestPod(ctx, namespace, selector)
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s %s: %w", ref.Kind, ref.Name, err)
	}
	if pod == nil {
		return nil, &NoPodsError{Ref: ref, Selector: selector}
	}
	wl.Template = &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}, Spec: *pod.Spec.DeepCopy()}
	// A new pod may bring a new shape; its own generation says nothing.
	wl.Version += "/pod/" + string(pod.UID)
	return wl, nil
}

// mapping maps gk to its resource; an unknown kind makes the mapper
// forget what discovery told it, once a minute at most, and is asked
// again.
func (s *Scales) mapping(gk schema.GroupKind) (*meta.RESTMapping, error) {
	m, err := s.Mapper.RESTMapping(gk)
	if !meta.IsNoMatchError(err) {
		return m, err
	}
	r, ok := s.Mapper.(meta.ResettableRESTMapper)
	if !ok {
		return m, err
	}
	s.mu.Lock()
	stale := time.Since(s.lastReset) >= remapEvery
	if stale {
		s.lastReset = time.Now()
	}
	s.mu.Unlock()
	if !stale {
		return m, err
	}
	r.Reset()
	return s.Mapper.RESTMapping(gk)
}

// newestPod is the most recently created pod of the selector that is not
// going away (nil when there is none), as upstream takes it.
func (s *Scales) newestPod(ctx context.Context, namespace, selector string) (*corev1.Pod, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", selector, err)
	}
	if s.Client == nil {
		return nil, errors.New("no client to list pods with")
	}
	// From the watch cache: resourceVersion 0.
	list, err := s.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String(), ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return nil, nil
	}
	sort.Slice(pods, func(i, j int) bool {
		ti, tj := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return pods[i].Name < pods[j].Name
	})
	return pods[0], nil
}

// podTemplateOf is the object's spec.template when it reads as a pod
// template with containers; nil when it has none or it is something else.
func podTemplateOf(obj *unstructured.Unstructured) (t *corev1.PodTemplateSpec) {
	raw, ok, err := unstructured.NestedMap(obj.Object, "spec", "template")
	if !ok || err != nil {
		return nil
	}
	// The converter panics on some shapes of bad input; a custom
	// resource's template is someone else's schema.
	defer func() {
		if recover() != nil {
			t = nil
		}
	}()
	out := &corev1.PodTemplateSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, out); err != nil || len(out.Spec.Containers) == 0 {
		return nil
	}
	return out
}
