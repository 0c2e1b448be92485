package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Service returns a ClusterIP Service selecting pods by selector (the
// scheduler's default spread constraints take their selector from it).
func Service(namespace, name string, selector map[string]string) *corev1.Service {
	sel := make(map[string]string, len(selector))
	for k, v := range selector {
		sel[k] = v
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uidFor("service", namespace, name)},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}},
	}
}
