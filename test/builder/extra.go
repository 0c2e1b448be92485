package builder

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DaemonSetBuilder builds an apps/v1 DaemonSet whose pod template has one
// container named "main", like the pods of Pod.
type DaemonSetBuilder struct {
	ds  appsv1.DaemonSet
	pod *PodBuilder
}

// DaemonSet starts a DaemonSet in namespace ns selecting its pods by the
// label app=<name>.
func DaemonSet(ns, name string) *DaemonSetBuilder {
	labels := map[string]string{"app": name}
	return &DaemonSetBuilder{
		ds: appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidFor("DaemonSet", ns, name)},
			Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
		},
		pod: Pod(ns, "").Label("app", name),
	}
}

// CPU sets the pod template's CPU request.
func (b *DaemonSetBuilder) CPU(q string) *DaemonSetBuilder {
	b.pod.CPU(q)
	return b
}

// NodeSelector adds a node selector term key=value to the pod template.
func (b *DaemonSetBuilder) NodeSelector(key, value string) *DaemonSetBuilder {
	b.pod.NodeSelector(key, value)
	return b
}

// Toleration adds a toleration to the pod template; an empty value means
// operator Exists.
func (b *DaemonSetBuilder) Toleration(key, value string, effect corev1.TaintEffect) *DaemonSetBuilder {
	b.pod.Toleration(key, value, effect)
	return b
}

// Obj returns a copy of the DaemonSet.
func (b *DaemonSetBuilder) Obj() *appsv1.DaemonSet {
	ds := b.ds.DeepCopy()
	pod := b.pod.Obj()
	ds.Spec.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels},
		Spec:       pod.Spec,
	}
	return ds
}

// PodFromDaemonSet returns a running pod of the DaemonSet bound to
// nodeName, as the DaemonSet controller would create it (generateName
// "<ds>-" and controller reference included).
func PodFromDaemonSet(ds *appsv1.DaemonSet, name, nodeName string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ds.Namespace, Name: name, GenerateName: ds.Name + "-", UID: uidFor("pod", ds.Namespace, name),
			Labels:          ds.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec:   *ds.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	pod.Spec.NodeName = nodeName
	return pod
}
