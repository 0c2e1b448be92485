package reservations

import (
	"fmt"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// BenchmarkNewBook counts 20 reservations against 100 groups of 50
// registered nodes each (5,000 nodes): the per-loop cost of the model.
func BenchmarkNewBook(b *testing.B) {
	var groups []GroupNodes
	for i := range 100 {
		id := fmt.Sprintf("g%d", i)
		groups = append(groups, GroupNodes{ID: id, Template: tmpl("reserved"), Nodes: nodes(id, 50), Size: 55})
	}
	var res []*Reservation
	for i := range 20 {
		res = append(res, &Reservation{ID: fmt.Sprintf("r%d", i), Kind: cloudprovider.ReservationTargeted,
			NodeGroups: []string{fmt.Sprintf("g%d", i*5), fmt.Sprintf("g%d", i*5+1)}, Count: 80})
	}
	b.ReportAllocs()
	for b.Loop() {
		NewBook(now, 30*time.Minute, res, groups)
	}
}
