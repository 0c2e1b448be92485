package externalgrpc

import (
	"fmt"

	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/wire"
)

// The checks of what a Refresh reads: a bad entry is left out (logged
// and told, see warner) and the rest of the answer is used, so one bad
// group or reservation never stops the others.

// Subjects of warnings about entries that have no usable id.
func positionSubject(i int) string      { return fmt.Sprintf("#%d", i) }
func duplicateSubject(id string) string { return id + "\x00duplicate" }

// takeGroups keeps the valid groups of a NodeGroups answer. The first
// entry of an id decides: a later one with the same id is ignored, valid
// or not.
func (p *Provider) takeGroups(gen *generation, groups []*pb.NodeGroup) {
	const rpc = "NodeGroups"
	bad := map[string]bool{}
	listed := map[string]bool{}
	for i, g := range groups {
		id := g.GetId()
		subject, problem := id, ""
		switch {
		case id == "":
			subject = positionSubject(i)
			problem = fmt.Sprintf("node group #%d (debug %q) has an empty id; it is ignored", i, g.GetDebug())
		case listed[id]:
			subject = duplicateSubject(id)
			problem = fmt.Sprintf("node group %q is listed more than once; the first entry is used, the others are ignored", id)
		default:
			listed[id] = true
			if why := invalidSizes(g); why != "" {
				problem = fmt.Sprintf("node group %q: %s; the group is left out of autoscaling", id, why)
			}
		}
		if problem != "" {
			bad[subject] = true
			p.badAnswer(rpc, subject, ReasonInvalidNodeGroup, problem)
			continue
		}
		gen.order = append(gen.order, id)
		gen.byID[id] = &groupInfo{min: int(g.GetMinSize()), max: int(g.GetMaxSize()), debug: g.GetDebug()}
	}
	p.events.sweep(rpc, func(s string) bool { return bad[s] })
	// A group that NodeGroupForNode named while unlisted is listed now.
	p.events.sweep("NodeGroupForNode", func(s string) bool { return gen.byID[s] == nil })
}

func invalidSizes(g *pb.NodeGroup) string {
	switch {
	case g.GetMinSize() < 0:
		return fmt.Sprintf("negative minSize %d", g.GetMinSize())
	case g.GetMaxSize() < 0:
		return fmt.Sprintf("negative maxSize %d", g.GetMaxSize())
	case g.GetMaxSize() < g.GetMinSize():
		return fmt.Sprintf("maxSize %d below minSize %d", g.GetMaxSize(), g.GetMinSize())
	}
	return ""
}

// takeReservations keeps the valid reservations of a Reservations answer.
// Groups a reservation names that NodeGroups did not list (validly) are
// dropped from it, and the reservation with them when none is left: its
// count is shared by the groups it names, so it must not be read as
// applying to others.
func (p *Provider) takeReservations(gen *generation, list []*ext.Reservation) {
	const rpc = "Reservations"
	bad := map[string]bool{}
	seen := map[string]bool{}
	for i, r := range list {
		subject := r.GetId()
		if subject == "" {
			subject = positionSubject(i)
		}
		res, err := wire.ReservationFrom(r)
		reason := ReasonInvalidReservation
		if err == nil && seen[res.ID] {
			subject = duplicateSubject(res.ID)
			err = fmt.Errorf("reservation %s is listed more than once; the first entry is used", res.ID)
		}
		var known, unknown []string
		if err == nil {
			seen[res.ID] = true
			for _, id := range res.NodeGroups {
				if gen.byID[id] != nil {
					known = append(known, id)
				} else {
					unknown = append(unknown, id)
				}
			}
		}
		if err != nil {
			groups := "names no node group"
			if len(r.GetNodeGroups()) > 0 {
				groups = groupList(r.GetNodeGroups())
			}
			bad[subject] = true
			p.badAnswer(rpc, subject, reason, fmt.Sprintf("%s: %v; the reservation is ignored", groups, err))
			continue
		}
		if len(unknown) > 0 {
			reason, subject = ReasonUnknownNodeGroup, subject+"\x00unknown"
			what := fmt.Sprintf("only those are dropped from it, it stays for %s", groupList(known))
			if len(known) == 0 {
				what = "the reservation is ignored"
			}
			bad[subject] = true
			p.badAnswer(rpc, subject, reason, fmt.Sprintf("reservation %s names %s, which NodeGroups does not list (validly); %s", res.ID, groupList(unknown), what))
			if len(known) == 0 {
				continue
			}
			res.NodeGroups = known
		}
		gen.reservations = append(gen.reservations, res)
	}
	p.events.sweep(rpc, func(s string) bool { return bad[s] })
}
