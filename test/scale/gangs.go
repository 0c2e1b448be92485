package scale

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Topology labels of the gang pool's groups.
const (
	BlockLabel = "example.com/block"
	RackLabel  = "example.com/rack"
	// GangPool is the pool of the groups gang members select.
	GangPool = "gangs"
)

// GangLayout adds gangs over two topology levels to a busy cluster.
type GangLayout struct {
	Layout
	// Gangs are CompositePodGroups (topology block, both children
	// required), each of two PodGroups (topology rack, minCount 4) of 4
	// members that each take a whole 8-GPU node: 8 new nodes a gang.
	Gangs int
	// Blocks × Racks groups, one per rack, each with room for every gang.
	Blocks, Racks int
}

// G1 is L2 with 200 gangs of 8 over 4 blocks of 4 racks.
var G1 = GangLayout{Layout: L2, Gangs: 200, Blocks: 4, Racks: 4}

// BusyGangs is Busy(l.Layout) plus the gang pool's groups (one per rack,
// its block and rack fixed in its template) and l.Gangs gangs pending.
// No member fits an existing node (they select the gang pool, and take a
// whole node each), so each gang gets exactly 8 new nodes in one block
// (its two children in one rack or two: every rack has room for both).
func BusyGangs(l GangLayout) Scenario {
	sc := Busy(l.Layout)
	for b := range l.Blocks {
		for r := range l.Racks {
			g := Group(fmt.Sprintf("gang-b%d-r%d", b, r), GangPool, Plain, 8*l.Gangs)
			g.Topology = map[string]string{BlockLabel: fmt.Sprintf("b%d", b), RackLabel: fmt.Sprintf("b%d-r%d", b, r)}
			sc.Config.NodeGroups = append(sc.Config.NodeGroups, g)
		}
	}
	whole := builder.ClaimTemplate(Namespace, "gang-node").Request(builder.Request("gpu", "gpu").Count(8).Selector(profileIs("whole"))).Obj()
	objs := []runtime.Object{whole}
	for i := range l.Gangs {
		job := fmt.Sprintf("job-%d", i)
		objs = append(objs, builder.CompositePodGroup(Namespace, job).MinGroupCount(2).TopologyKey(BlockLabel).Workload(job, job).Obj())
		for _, w := range []string{"a", "b"} {
			pg := job + "-" + w
			objs = append(objs, builder.PodGroup(Namespace, pg).MinCount(4).TopologyKey(RackLabel).Parent(job).Workload(job, pg).Obj())
			for m := range 4 {
				pod := builder.Pod(Namespace, fmt.Sprintf("%s-%d", pg, m)).CPU("1").Memory("4Gi").PodGroup(pg).
					ClaimFromTemplate("gpu", "gang-node").NodeSelector(PoolLabel, GangPool)
				objs = append(objs, Pending(pod.Obj()))
			}
		}
	}
	sc.Objects = append(sc.Objects, objs...)
	sc.WantPlanned += 8 * l.Gangs
	return sc
}
