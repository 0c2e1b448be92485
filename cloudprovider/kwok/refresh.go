package kwok

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Refresh first restores, once, the instances recorded in each group's
// state ConfigMap (state.go) and writes changes a failed write left
// behind. It then reads the nodes of every group from its watch (no LIST
// per pass): nodes carrying a group's label that the provider does not
// track are adopted as running instances (with their recorded createdAt
// and faults when recorded), and registered instances whose Node is gone
// (deleted by someone else; the API server asked, the watch may lag) are
// dropped. Instances still booting are kept.
//
// An adopted node whose slices are missing (the previous process stopped
// during the driver delay) gets them published, in the background, once
// the rest of its driver delay, counted from the node's creation, has
// passed.
func (p *Provider) Refresh(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("kwok provider: shut down")
	}
	p.mu.Unlock()
	for _, g := range p.groups {
		g.saveState(ctx)
	}
	p.mu.Lock()
	listedAt := p.seq
	p.mu.Unlock()
	defer func() {
		for _, g := range p.groups {
			g.saveState(ctx)
		}
	}()

	list, err := p.watch.nodes(ctx)
	if err != nil {
		return err
	}
	present := map[*nodeGroup]map[string]*corev1.Node{}
	for _, node := range list {
		g := p.group(node.Labels[LabelNodeGroup])
		if g == nil {
			p.logger.V(4).Info("Ignoring node of an unknown node group", "node", node.Name, "nodeGroup", node.Labels[LabelNodeGroup])
			continue
		}
		if node.DeletionTimestamp != nil {
			continue // on its way out: neither adopted nor kept
		}
		if present[g] == nil {
			present[g] = map[string]*corev1.Node{}
		}
		present[g][node.Name] = node
	}

	// Nodes the watch does not show that the instances or the records
	// name: gone only if the API server says so (the cache may lag).
	gone := map[string]bool{}
	p.mu.Lock()
	var ask []string
	for _, g := range p.groups {
		for name, inst := range g.instances {
			if inst.registered && inst.registeredSeq <= listedAt && present[g][name] == nil {
				ask = append(ask, name)
			}
		}
		for name := range g.pending {
			if g.loadedSeq <= listedAt && present[g][name] == nil {
				ask = append(ask, name)
			}
		}
	}
	p.mu.Unlock()
	for _, name := range ask {
		gone[name] = p.gone(ctx, name)
	}

	adopted := map[*nodeGroup][]*corev1.Node{}
	p.mu.Lock()
	for _, g := range p.groups {
		for name, inst := range g.instances {
			// Only instances that registered before the cache was read
			// can be missing from it because someone deleted their Node.
			if inst.registered && inst.registeredSeq <= listedAt && present[g][name] == nil && gone[name] {
				delete(g.instances, name)
				g.forgetLocked(name)
				if inst.stop != nil {
					inst.stop() // its goroutine exits on its own; Cleanup waits for it
				}
				p.logger.Info("Node deleted outside the autoscaler, dropping its instance", "nodeGroup", g.cfg.Name, "node", name)
			}
		}
		for name, r := range g.pending {
			// A recorded node missing from a List made after the
			// records were read was deleted while no process watched.
			if present[g][name] == nil && g.loadedSeq <= listedAt && gone[name] {
				g.forgetLocked(name)
				p.logger.Info("Recorded node no longer exists, dropping it", "nodeGroup", g.cfg.Name, "node", r.Name)
			}
		}
		for name, node := range present[g] {
			inst := g.instances[name]
			switch {
			case inst == nil:
				p.seq++
				inst = &instance{name: name, registered: true, registeredSeq: p.seq, created: p.seq, createdAt: node.CreationTimestamp.Time}
				if r, ok := g.pending[name]; ok {
					inst.createdAt, inst.faults = r.CreatedAt, r.Faults
					delete(g.pending, name)
				} else {
					g.dirty = true // recorded as registered already otherwise
				}
				g.instances[name] = inst
				adopted[g] = append(adopted[g], node)
				p.logger.V(4).Info("Adopted existing node", "nodeGroup", g.cfg.Name, "node", name)
			case !inst.registered && inst.live():
				// Its boot goroutine created it and has not recorded
				// that yet; it will find the work done.
				p.seq++
				inst.registered, inst.registeredSeq = true, p.seq
				g.dirty = true
			}
		}
	}
	p.mu.Unlock()

	// One line per group: after a failover every node is adopted, and a
	// line per node was ten thousand lines (and a hundredth of the pass).
	for _, g := range p.groups {
		if n := len(adopted[g]); n > 0 {
			p.logger.Info("Adopted existing nodes", "nodeGroup", g.cfg.Name, "count", n)
		}
	}
	if len(adopted) == 0 {
		return nil
	}
	// In the background: the pass needs none of it (slices come after the
	// driver delay anyway), and listing every slice to find the few
	// missing held the first pass over 5,000 adopted nodes for a second.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.republishSlices(p.ctx, adopted); err != nil {
			p.logger.Error(err, "Could not check adopted nodes for missing ResourceSlices; those missing stay missing until the provider restarts")
		}
	}()
	return nil
}

// republishSlices publishes the slices adopted nodes lack.
func (p *Provider) republishSlices(ctx context.Context, adopted map[*nodeGroup][]*corev1.Node) error {
	slices, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("kwok provider: listing ResourceSlices of adopted nodes: %w", err)
	}
	existing := sets.New[string]()
	for _, s := range slices.Items {
		existing.Insert(s.Name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil // Cleanup is waiting for the goroutines; start no more
	}
	for g, nodes := range adopted {
		for _, node := range nodes {
			inst := g.instances[node.Name]
			if inst == nil || inst.stop != nil || inst.faults.DriversNeverPublish {
				continue
			}
			if existing.HasAll(g.cfg.sliceNames(node.Name)...) {
				continue
			}
			missing := g.cfg.publishedSlices(node.Name, inst.faults)
			n := 0
			for _, s := range missing {
				if !existing.Has(s.Name) {
					missing[n] = s
					n++
				}
			}
			missing = missing[:n]
			if len(missing) == 0 {
				continue
			}
			due := node.CreationTimestamp.Add(g.cfg.DriverDelay.Duration)
			wait := newDelay(p.clock, due.Sub(p.clock.Now()))
			p.logger.Info("Adopted node lacks ResourceSlices, publishing them", "nodeGroup", g.cfg.Name, "node", node.Name, "missing", len(missing))
			g.goLocked(inst, func(ctx context.Context) {
				if wait.wait(ctx) {
					g.publishSlices(ctx, node, missing)
				}
			})
		}
	}
	return nil
}
