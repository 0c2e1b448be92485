package kwok

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Pricing prices nodes by their group's configured price per node-hour.
// Without any price in the config it returns ErrNotImplemented, so that
// price-based choices fall back to other criteria.
func (p *Provider) Pricing() (cloudprovider.PricingModel, error) {
	for _, g := range p.groups {
		if g.cfg.Price != nil {
			return &pricingModel{p: p}, nil
		}
	}
	return nil, cloudprovider.ErrNotImplemented
}

type pricingModel struct{ p *Provider }

// NodePrice is the group's price times the hours between start and end.
// Template nodes carry the group label, so they are priced too.
func (m *pricingModel) NodePrice(node *corev1.Node, start, end time.Time) (float64, error) {
	g := m.p.groupOf(node)
	if g == nil {
		return 0, fmt.Errorf("node %s belongs to no kwok node group", node.Name)
	}
	if g.cfg.Price == nil {
		return 0, fmt.Errorf("node group %s: no price configured", g.cfg.Name)
	}
	return *g.cfg.Price * hours(start, end), nil
}

// PodPrice charges a pod's CPU requests at the cheapest price per core of
// any priced group: the least the pod could cost anywhere, which is what
// the price expander compares node prices against. Kwok has no price list
// per resource to do better.
func (m *pricingModel) PodPrice(pod *corev1.Pod, start, end time.Time) (float64, error) {
	perCore := -1.0
	for _, g := range m.p.groups {
		cpu := g.cfg.Template.Capacity.Cpu()
		if g.cfg.Price == nil || cpu.IsZero() {
			continue
		}
		if price := *g.cfg.Price / cpu.AsApproximateFloat64(); perCore < 0 || price < perCore {
			perCore = price
		}
	}
	if perCore < 0 {
		return 0, fmt.Errorf("no priced node group with CPU capacity: %w", cloudprovider.ErrNotImplemented)
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return requests.Cpu().AsApproximateFloat64() * perCore * hours(start, end), nil
}

func hours(start, end time.Time) float64 {
	if end.Before(start) {
		return 0
	}
	return end.Sub(start).Hours()
}

// Reservations reports the configured reservations with InUse counted
// from the live instances (registered and booting) of their groups. An
// instance sits on at most one reservation: reservations are filled in
// config order, each up to its count, and instances beyond them are
// on-demand; so InUse never exceeds Count and groups sharing a reservation
// share its counter. A reservation outside its time window holds nothing.
func (p *Provider) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	unplaced := map[string]int{}
	for _, g := range p.groups {
		unplaced[g.cfg.Name] = g.liveLocked()
	}
	out := make([]cloudprovider.ReservedCapacity, 0, len(p.reservations))
	for _, r := range p.reservations {
		res := cloudprovider.ReservedCapacity{
			ID:         r.ID,
			Kind:       r.Kind,
			NodeGroups: append([]string(nil), r.NodeGroups...),
			Count:      r.Count,
		}
		if r.Start != nil {
			res.Start = r.Start.Time
		}
		if r.End != nil {
			res.End = r.End.Time
		}
		if r.Price != nil {
			res.Price = *r.Price
		}
		active := (res.Start.IsZero() || !now.Before(res.Start)) && (res.End.IsZero() || now.Before(res.End))
		for _, name := range r.NodeGroups {
			if !active {
				break
			}
			take := min(unplaced[name], res.Count-res.InUse)
			res.InUse += take
			unplaced[name] -= take
		}
		out = append(out, res)
	}
	return out, nil
}
