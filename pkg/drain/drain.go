package drain

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options are the drain's time limits.
type Options struct {
	// MaxGracefulTermination caps each pod's termination grace period
	// (--max-graceful-termination-sec).
	MaxGracefulTermination time.Duration
	// MaxPodEvictionTime is how long evicting one pod may be retried,
	// typically while a PodDisruptionBudget answers 429
	// (--max-pod-eviction-time).
	MaxPodEvictionTime time.Duration
	// RetryInterval is the wait between eviction attempts; 10s when 0.
	RetryInterval time.Duration
	// Headroom is added to the grace period when waiting for pods to go;
	// 30s when 0 (upstream's PodEvictionHeadroom).
	Headroom time.Duration
}

// Drainer evicts pods.
type Drainer struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.Clock
	opts     Options
	// OnEvicted, if set, is called once per pod the API server accepted
	// the eviction of (for metrics).
	OnEvicted func(*corev1.Pod)
}

// New returns a drainer.
func New(client kubernetes.Interface, recorder record.EventRecorder, c clock.Clock, opts Options) *Drainer {
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 10 * time.Second
	}
	if opts.Headroom <= 0 {
		opts.Headroom = 30 * time.Second
	}
	return &Drainer{client: client, recorder: recorder, clock: c, opts: opts}
}

// Drain evicts the pods of a node, all at once, and waits until each is
// gone from the node. Any pod not evicted within MaxPodEvictionTime, or
// not gone within its grace period plus the headroom, fails the drain.
func (d *Drainer) Drain(ctx context.Context, node string, pods []*corev1.Pod) error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.evict(ctx, node, pod)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drain node %s: %w", node, err)
	}
	errs = make([]error, len(pods))
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.waitGone(ctx, node, pod)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drain node %s: %w", node, err)
	}
	return nil
}

// gracePeriod is the pod's own termination grace period, capped.
func (d *Drainer) gracePeriod(pod *corev1.Pod) int64 {
	limit := int64(d.opts.MaxGracefulTermination / time.Second)
	if pod.Spec.TerminationGracePeriodSeconds != nil && *pod.Spec.TerminationGracePeriodSeconds < limit {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return limit
}

// evict asks for the pod's eviction until the API server accepts it or
// the pod is gone; refusals (429 from a PodDisruptionBudget, or any other
// error) are retried until MaxPodEvictionTime.
func (d *Drainer) evict(ctx context.Context, node string, pod *corev1.Pod) error {
	logger := klog.FromContext(ctx)
	grace := d.gracePeriod(pod)
	deadline := d.clock.Now().Add(d.opts.MaxPodEvictionTime)
	for attempt := 1; ; attempt++ {
		evicted, err := EvictOnce(ctx, d.client, pod, &grace)
		switch {
		case evicted:
			logger.Info("Evicted pod", "pod", klog.KObj(pod), "node", node)
			d.recorder.Eventf(pod, corev1.EventTypeNormal, "ScaleDown", "deleting pod for node scale down (node %s)", node)
			if d.OnEvicted != nil {
				d.OnEvicted(pod)
			}
			return nil
		case err == nil:
			return nil
		case apierrors.IsTooManyRequests(err):
			logger.V(2).Info("Eviction refused by a PodDisruptionBudget, retrying", "pod", klog.KObj(pod), "node", node, "attempt", attempt)
		default:
			logger.V(2).Info("Eviction failed, retrying", "pod", klog.KObj(pod), "node", node, "attempt", attempt, "err", err)
		}
		if !d.clock.Now().Add(d.opts.RetryInterval).Before(deadline) {
			d.recorder.Eventf(pod, corev1.EventTypeWarning, "ScaleDownFailed", "failed to evict pod for node scale down (node %s): %v", node, err)
			return fmt.Errorf("evict pod %s/%s: not evicted within %s: %w", pod.Namespace, pod.Name, d.opts.MaxPodEvictionTime, err)
		}
		if !d.sleep(ctx, d.opts.RetryInterval) {
			return fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, ctx.Err())
		}
	}
}

// EvictNow asks once for the pod's eviction with the drain's grace period
// cap, and counts it as the drain does; a refusal (a disruption budget)
// comes back for the caller to retry later. It is the drain for work that
// must not block the loop: the nodes of ending capacity blocks.
func (d *Drainer) EvictNow(ctx context.Context, pod *corev1.Pod) error {
	grace := d.gracePeriod(pod)
	evicted, err := EvictOnce(ctx, d.client, pod, &grace)
	if evicted {
		klog.FromContext(ctx).Info("Evicted pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		if d.OnEvicted != nil {
			d.OnEvicted(pod)
		}
	}
	return err
}

// EvictOnce asks once for the pod's eviction through the Eviction API
// (disruption budgets hold), for this very pod (UID precondition), with
// grace (nil: the pod's own). evicted is false with a nil error when the
// pod is gone already or was replaced by one of the same name.
func EvictOnce(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, grace *int64) (evicted bool, err error) {
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	err = client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, eviction)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	}
	return false, err
}

// waitGone waits until the pod no longer runs on the node: deleted, or
// replaced by a new pod of the same name (another UID).
func (d *Drainer) waitGone(ctx context.Context, node string, pod *corev1.Pod) error {
	limit := time.Duration(d.gracePeriod(pod))*time.Second + d.opts.Headroom
	deadline := d.clock.Now().Add(limit)
	for {
		cur, err := d.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil && (cur.UID != pod.UID || cur.Spec.NodeName != node):
			return nil
		}
		if !d.clock.Now().Before(deadline) {
			return fmt.Errorf("pod %s/%s still on node %s %s after its eviction", pod.Namespace, pod.Name, node, limit)
		}
		if !d.sleep(ctx, time.Second) {
			return fmt.Errorf("wait for pod %s/%s: %w", pod.Namespace, pod.Name, ctx.Err())
		}
	}
}

func (d *Drainer) sleep(ctx context.Context, dur time.Duration) bool {
	t := d.clock.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
