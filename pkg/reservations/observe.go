package reservations

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// observe sets the per-reservation gauges: capacity, used, available and
// idle nodes (registered on it, running no workload: paid for, unused).
func (s *Policy) observe(b *Book, pods []*corev1.Pod) {
	if s.metrics == nil {
		return
	}
	busy := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && isWorkload(p) {
			busy[p.Spec.NodeName] = true
		}
	}
	m := s.metrics
	m.Capacity.Reset()
	m.Used.Reset()
	m.Available.Reset()
	m.IdleNodes.Reset()
	for _, sl := range b.Slots() {
		labels := []string{sl.ID, string(sl.Origin), string(sl.Kind)}
		idle := 0
		for _, n := range sl.Nodes {
			if !busy[n.Name] {
				idle++
			}
		}
		m.Capacity.WithLabelValues(labels...).Set(float64(sl.Count))
		m.Used.WithLabelValues(labels...).Set(float64(sl.InUse))
		m.Available.WithLabelValues(labels...).Set(float64(b.Left(sl)))
		m.IdleNodes.WithLabelValues(labels...).Set(float64(idle))
	}
}

// isWorkload: a pod that makes its node busy (not a DaemonSet or static
// pod, not finished).
func isWorkload(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	ref := metav1.GetControllerOf(p)
	return ref == nil || ref.Kind != "DaemonSet"
}
