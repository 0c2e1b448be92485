package builder

import (
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PodGroupBuilder builds a scheduling.k8s.io/v1beta1 PodGroup. A new group
// has the basic (non-gang) policy until MinCount is called.
type PodGroupBuilder struct {
	pg schedulingapi.PodGroup
}

// PodGroup starts a PodGroup in namespace ns.
func PodGroup(ns, name string) *PodGroupBuilder {
	return &PodGroupBuilder{pg: schedulingapi.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidFor("podgroup", ns, name)},
		Spec: schedulingapi.PodGroupSpec{
			SchedulingPolicy: schedulingapi.PodGroupSchedulingPolicy{Basic: &schedulingapi.BasicSchedulingPolicy{}},
		},
	}}
}

// MinCount switches the group to the gang policy: none of its pods is bound
// until minCount of them can be.
func (b *PodGroupBuilder) MinCount(minCount int32) *PodGroupBuilder {
	b.pg.Spec.SchedulingPolicy = schedulingapi.PodGroupSchedulingPolicy{
		Gang: &schedulingapi.GangSchedulingPolicy{MinCount: minCount},
	}
	return b
}

// TopologyKey requires all pods of the group on nodes sharing one value of
// the node label key (e.g. a rack or NVLink-domain label).
func (b *PodGroupBuilder) TopologyKey(key string) *PodGroupBuilder {
	if b.pg.Spec.SchedulingConstraints == nil {
		b.pg.Spec.SchedulingConstraints = &schedulingapi.PodGroupSchedulingConstraints{}
	}
	b.pg.Spec.SchedulingConstraints.Topology = append(b.pg.Spec.SchedulingConstraints.Topology,
		schedulingapi.TopologyConstraint{Key: key})
	return b
}

// Workload records which Workload template the group was made from.
func (b *PodGroupBuilder) Workload(workloadName, templateName string) *PodGroupBuilder {
	b.pg.Spec.WorkloadRef = &schedulingapi.WorkloadReference{WorkloadName: workloadName, TemplateName: templateName}
	return b
}

// Priority sets spec.priority.
func (b *PodGroupBuilder) Priority(p int32) *PodGroupBuilder {
	b.pg.Spec.Priority = ptr.To(p)
	return b
}

// Disruption sets spec.disruptionMode: All (members leave only together)
// or Single (one by one, above minCount).
func (b *PodGroupBuilder) Disruption(all bool) *PodGroupBuilder {
	if all {
		b.pg.Spec.DisruptionMode = &schedulingapi.DisruptionMode{All: &schedulingapi.AllDisruptionMode{}}
	} else {
		b.pg.Spec.DisruptionMode = &schedulingapi.DisruptionMode{Single: &schedulingapi.SingleDisruptionMode{}}
	}
	return b
}

// Parent places the group under a CompositePodGroup of its namespace.
func (b *PodGroupBuilder) Parent(composite string) *PodGroupBuilder {
	b.pg.Spec.ParentCompositePodGroupName = ptr.To(composite)
	return b
}

// Obj returns a copy of the group.
// ClaimFromTemplate adds a PodGroup claim (DRAWorkloadResourceClaims):
// members whose own claim podClaimName names templateName share one
// claim made for the group.
func (b *PodGroupBuilder) ClaimFromTemplate(podClaimName, templateName string) *PodGroupBuilder {
	b.pg.Spec.ResourceClaims = append(b.pg.Spec.ResourceClaims,
		schedulingapi.PodGroupResourceClaim{Name: podClaimName, ResourceClaimTemplateName: ptr.To(templateName)})
	return b
}

func (b *PodGroupBuilder) Obj() *schedulingapi.PodGroup {
	return b.pg.DeepCopy()
}

// WorkloadBuilder builds a scheduling.k8s.io/v1beta1 Workload.
type WorkloadBuilder struct {
	wl schedulingapi.Workload
}

// Workload starts a Workload in namespace ns.
func Workload(ns, name string) *WorkloadBuilder {
	return &WorkloadBuilder{wl: schedulingapi.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uidFor("workload", ns, name)},
	}}
}

// GangTemplate adds a pod group template with the gang policy; a minCount of
// zero or less adds a basic (non-gang) template instead.
func (b *WorkloadBuilder) GangTemplate(name string, minCount int32) *WorkloadBuilder {
	t := schedulingapi.PodGroupTemplate{Name: name}
	if minCount > 0 {
		t.SchedulingPolicy.Gang = &schedulingapi.GangSchedulingPolicy{MinCount: minCount}
	} else {
		t.SchedulingPolicy.Basic = &schedulingapi.BasicSchedulingPolicy{}
	}
	b.wl.Spec.PodGroupTemplates = append(b.wl.Spec.PodGroupTemplates, t)
	return b
}

// Obj returns a copy of the workload.
func (b *WorkloadBuilder) Obj() *schedulingapi.Workload {
	return b.wl.DeepCopy()
}
