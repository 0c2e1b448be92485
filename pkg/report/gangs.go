package report

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
)

// compositeKey prefixes a CompositePodGroup's key: a PodGroup may have
// the same name.
const compositeKey = "composite:"

// GangReports turns the planner's gang outcomes and the waiting gangs into
// what the reporter tells PodGroups and their pods (and the status shows).
// Gangs that fit what exists need no word from the autoscaler.
func GangReports(outcomes []plan.GangOutcome, waiting []gang.Waiting, state *observe.ClusterState) []GangReport {
	uids := map[string]types.UID{}
	for _, g := range state.PodGroups {
		uids[g.Namespace+"/"+g.Name] = g.UID
	}
	for _, c := range state.CompositePodGroups {
		uids[compositeKey+c.Namespace+"/"+c.Name] = c.UID
	}
	var out []GangReport
	for _, o := range outcomes {
		if o.FitsExisting {
			continue
		}
		key := o.Gang.Namespace + "/" + o.Gang.Name
		if o.Gang.Composite {
			key = compositeKey + key
		}
		r := GangReport{Namespace: o.Gang.Namespace, Name: o.Gang.Name, Composite: o.Gang.Composite, UID: uids[key], Pods: o.Gang.Pending}
		var parts []string
		for _, up := range o.ScaleUps {
			parts = append(parts, fmt.Sprintf("%s +%d", up.Group.Id, up.Delta))
		}
		r.Planned = strings.Join(parts, ", ")
		if o.Domain != "" && r.Planned != "" {
			r.Planned += fmt.Sprintf(" (%s=%s)", o.Gang.TopologyKey, o.Domain)
		}
		r.Message = o.Message
		for _, gr := range o.Reasons {
			r.Message += "; " + gr.String()
		}
		out = append(out, r)
	}
	for _, w := range waiting {
		out = append(out, GangReport{Namespace: w.Namespace, Name: w.Name, UID: uids[w.Namespace+"/"+w.Name], Pods: w.Pods, Message: w.Reason})
	}
	return out
}
