package builder

import (
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CompositePodGroupBuilder builds a scheduling.k8s.io/v1alpha3
// CompositePodGroup, a group of groups. A new one has the basic policy
// and mode Single.
type CompositePodGroupBuilder struct {
	c schedulingv1alpha3.CompositePodGroup
}

// CompositePodGroup starts a CompositePodGroup in namespace ns.
func CompositePodGroup(ns, name string) *CompositePodGroupBuilder {
	return &CompositePodGroupBuilder{c: schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidFor("compositepodgroup", ns, name)},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Basic: &schedulingv1alpha3.CompositeBasicSchedulingPolicy{}},
			DisruptionMode:   &schedulingv1alpha3.CompositeDisruptionMode{Single: &schedulingv1alpha3.SingleCompositeDisruptionMode{}},
		},
	}}
}

// MinGroupCount switches it to the gang policy over its child groups.
func (b *CompositePodGroupBuilder) MinGroupCount(n int32) *CompositePodGroupBuilder {
	b.c.Spec.SchedulingPolicy = schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
		Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: n},
	}
	return b
}

// DisruptAll sets mode All: its children are disrupted only together.
func (b *CompositePodGroupBuilder) DisruptAll() *CompositePodGroupBuilder {
	b.c.Spec.DisruptionMode = &schedulingv1alpha3.CompositeDisruptionMode{All: &schedulingv1alpha3.AllCompositeDisruptionMode{}}
	return b
}

// TopologyKey asks that all its child groups land in one domain of the
// node label key (the scheduler reads one constraint per level).
func (b *CompositePodGroupBuilder) TopologyKey(key string) *CompositePodGroupBuilder {
	if b.c.Spec.SchedulingConstraints == nil {
		b.c.Spec.SchedulingConstraints = &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{}
	}
	b.c.Spec.SchedulingConstraints.Topology = append(b.c.Spec.SchedulingConstraints.Topology,
		schedulingv1alpha3.TopologyConstraint{Key: key})
	return b
}

// Workload records which Workload template it was made from (the API
// requires one).
func (b *CompositePodGroupBuilder) Workload(workloadName, templateName string) *CompositePodGroupBuilder {
	b.c.Spec.WorkloadRef = &schedulingv1alpha3.WorkloadReference{WorkloadName: workloadName, TemplateName: templateName}
	return b
}

// Parent places it under another CompositePodGroup.
func (b *CompositePodGroupBuilder) Parent(name string) *CompositePodGroupBuilder {
	b.c.Spec.ParentCompositePodGroupName = ptr.To(name)
	return b
}

// Obj returns a copy.
func (b *CompositePodGroupBuilder) Obj() *schedulingv1alpha3.CompositePodGroup {
	return b.c.DeepCopy()
}
