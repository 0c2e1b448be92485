package builder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volume mounts the PersistentVolumeClaim claim as volume name in the
// pod's first container.
func (b *PodBuilder) Volume(name, claim string) *PodBuilder {
	b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, corev1.Volume{Name: name,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	c := &b.pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/mnt/" + name})
	return b
}

// RequiredAffinity adds a required pod-affinity term: the pod runs in the
// same topology domain (key) as pods labelled label=value in the
// namespaces namespaceSelector selects.
func (b *PodBuilder) RequiredAffinity(key, label, value string, namespaceSelector map[string]string) *PodBuilder {
	if b.pod.Spec.Affinity == nil {
		b.pod.Spec.Affinity = &corev1.Affinity{}
	}
	if b.pod.Spec.Affinity.PodAffinity == nil {
		b.pod.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
	}
	a := b.pod.Spec.Affinity.PodAffinity
	a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{label: value}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: namespaceSelector},
		TopologyKey:       key,
	})
	return b
}

// Nominated marks the pod as nominated by the scheduler for node
// (preemption under way).
func (b *PodBuilder) Nominated(node string) *PodBuilder {
	b.pod.Status.NominatedNodeName = node
	return b
}

// PVBuilder builds a PersistentVolume.
type PVBuilder struct{ pv *corev1.PersistentVolume }

// PV is a 10Gi ReadWriteMany NFS volume with no storage class.
func PV(name string) *PVBuilder {
	return &PVBuilder{pv: &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/" + name}},
			StorageClassName:              "",
		},
	}}
}

// BoundTo pre-binds the volume to the claim namespace/name.
func (b *PVBuilder) BoundTo(namespace, name string) *PVBuilder {
	b.pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name}
	return b
}

// InZone keeps the volume's consumers in zone (node affinity on
// topology.kubernetes.io/zone).
func (b *PVBuilder) InZone(zone string) *PVBuilder {
	b.pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
	}}}}
	return b
}

// CSI makes it a ReadWriteOnce volume of the CSI driver, attached to
// the node of its pod (and counted against the node's limit for driver).
func (b *PVBuilder) CSI(driver string) *PVBuilder {
	b.pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: b.pv.Name}}
	b.pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	return b
}

// Obj returns the volume.
func (b *PVBuilder) Obj() *corev1.PersistentVolume { return b.pv }

// PVC is a 10Gi ReadWriteMany claim of no storage class for the volume
// named volume ("" leaves it to the binder).
func PVC(namespace, name, volume string) *corev1.PersistentVolumeClaim {
	empty := ""
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			StorageClassName: &empty,
			VolumeName:       volume,
		},
	}
}
