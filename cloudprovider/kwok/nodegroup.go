package kwok

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// ErrOutOfResources is wrapped by IncreaseSize and AtomicIncreaseSize when
// the injected quota fault (faults.outOfResourcesAfter) refuses nodes.
var ErrOutOfResources = errors.New("OutOfResources")

var _ cloudprovider.NodeGroup = &nodeGroup{}

// nodeGroup is one configured group. Its instances are guarded by p.mu.
type nodeGroup struct {
	p         *Provider
	cfg       NodeGroupConfig
	instances map[string]*instance // by node name
	rand      groupRand

	// The state ConfigMap (state.go). Guarded by p.mu: dirty (instances
	// changed since the last write), pending (recorded registered
	// instances whose Node Refresh has not found yet), forgotten (names
	// removed by this process), loadedSeq (p.seq at loading). loaded is
	// guarded by p.stateMu.
	dirty     bool
	pending   map[string]instanceRecord
	forgotten sets.Set[string]
	loadedSeq uint64
	loaded    bool
}

// instance is one requested machine.
//
// Failed creations (the OutOfResources fault, faults.failureRate at
// request, a Node the API server refused) are kept as instances with a
// failure, reported by Nodes() as Creating with ErrorInfo, as upstream's
// cluster autoscaler expects from clouds whose creations fail after the
// request. They never count toward the target size: IncreaseSize already
// reported them as an error and raised the target only by the successes, so
// the autoscaler does not wait for nodes that will not come. Deleting such
// an instance (DeleteNodes with its providerID, as upstream does to clean up
// failed instances) only forgets it and leaves the target alone.
type instance struct {
	name string
	// registered: the Node exists in the API server.
	registered bool
	// registeredSeq is p.seq when it registered (see Refresh).
	registeredSeq uint64
	// created orders instances by request, for DecreaseTargetSize;
	// createdAt is when it was requested (Instance.CreatedAt).
	created   uint64
	createdAt time.Time
	failure   *cloudprovider.InstanceErrorInfo
	faults    instanceFaults
	// domain is the value of the group's per-request topology labels
	// its request drew ("" without them).
	domain string
	// stop ends the instance's goroutine and done is closed when it has
	// returned; both nil when no goroutine runs (never-registering ones).
	stop func()
	done chan struct{}
}

func (i *instance) live() bool { return i.failure == nil }

func (i *instance) status() *cloudprovider.InstanceStatus {
	if i.registered {
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	}
	return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: i.failure}
}

// stopAndWait ends the instance's goroutine. Never call it with p.mu held:
// the goroutine may be waiting for the lock to record its registration.
func (i *instance) stopAndWait() {
	if i.stop != nil {
		i.stop()
		<-i.done
	}
}

func (g *nodeGroup) Id() string   { return g.cfg.Name }
func (g *nodeGroup) MinSize() int { return g.cfg.MinSize }
func (g *nodeGroup) MaxSize() int { return g.cfg.MaxSize }

// TargetSize counts registered and booting instances; failed creations
// are not counted. faults.targetSizeErrorRate makes it fail at random.
func (g *nodeGroup) TargetSize() (int, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if err := g.apiErrorLocked("TargetSize", g.rand.targetSize, g.cfg.Faults.TargetSizeErrorRate); err != nil {
		return 0, err
	}
	return g.liveLocked(), nil
}

func (g *nodeGroup) liveLocked() int {
	n := 0
	for _, inst := range g.instances {
		if inst.live() {
			n++
		}
	}
	return n
}

func (g *nodeGroup) Debug() string {
	g.p.mu.Lock()
	size := g.liveLocked() // not TargetSize: no injected error, no draw
	g.p.mu.Unlock()
	return fmt.Sprintf("%s (min %d, max %d, target %d)", g.cfg.Name, g.cfg.MinSize, g.cfg.MaxSize, size)
}

// IncreaseSize requests delta more nodes. When the quota fault or
// faults.failureRate (at request) fails some of them, the others are still
// created, the failed ones appear in Nodes() with ErrorInfo, and the call
// returns the ids created and an error wrapping ErrOutOfResources or
// ErrInjectedFailure.
func (g *nodeGroup) IncreaseSize(ctx context.Context, delta int) ([]string, error) {
	return g.increase(ctx, delta, false)
}

// AtomicIncreaseSize requests delta nodes, all or none: when the quota
// fault, maxSize or a failure drawn at request would refuse any of them,
// nothing is created. Faults that strike after the request
// (neverRegisterAfter, neverReadyAfter, failureMode neverRegister or
// neverReady) still strike: every instance is created and some never
// register or never become Ready, the partial failure that gang handling
// must survive.
func (g *nodeGroup) AtomicIncreaseSize(ctx context.Context, delta int) ([]string, error) {
	return g.increase(ctx, delta, true)
}

func (g *nodeGroup) increase(ctx context.Context, delta int, atomic bool) ([]string, error) {
	if delta <= 0 {
		return nil, fmt.Errorf("node group %s: size increase must be positive, got %d", g.cfg.Name, delta)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.cfg.Name, err)
	}
	created, err := g.request(delta, atomic)
	g.saveState(ctx)
	return created, err
}

// request does the in-memory part of increase, under p.mu.
func (g *nodeGroup) request(delta int, atomic bool) ([]string, error) {
	p := g.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("node group %s: provider is shut down", g.cfg.Name)
	}
	live := g.liveLocked()
	if n := g.cfg.unitSize(); delta%n != 0 {
		return nil, fmt.Errorf("node group %s: size increase by %d refused: the group grows in whole units of %d nodes", g.cfg.Name, delta, n)
	}
	if live+delta > g.cfg.MaxSize {
		return nil, fmt.Errorf("node group %s: size increase too large: target %d + %d exceeds maxSize %d", g.cfg.Name, live, delta, g.cfg.MaxSize)
	}
	granted := delta
	if limit := g.cfg.Faults.OutOfResourcesAfter; limit != nil {
		granted = max(0, min(delta, *limit-live))
	}
	granted -= granted % g.cfg.unitSize() // a unit comes whole or not at all
	if atomic && granted < delta {
		return nil, fmt.Errorf("node group %s: atomic increase by %d refused, only %d available, nothing created: %w", g.cfg.Name, delta, granted, ErrOutOfResources)
	}
	struck := g.drawFailuresLocked(granted)
	atRequest := g.cfg.failureMode() == FailAtRequest
	failed := 0
	for _, s := range struck {
		if s && atRequest {
			failed++
		}
	}
	if atomic && failed > 0 {
		return nil, fmt.Errorf("node group %s: atomic increase by %d refused, %d would fail, nothing created: %w", g.cfg.Name, delta, failed, ErrInjectedFailure)
	}
	created := make([]string, 0, granted)
	domain, unit := "", g.cfg.unitSize()
	for i, s := range struck {
		if (i == 0 || unit > 1 && i%unit == 0) && len(g.cfg.PerRequestTopology) > 0 {
			// One request, or one unit of it, one fresh domain.
			domain = g.cfg.Name + "-req-" + utilrand.String(5)
		}
		if s && atRequest {
			g.newInstanceLocked().failure = injectedFailureInfo(g.cfg.Name, g.cfg.Faults.FailureRate)
			continue
		}
		inst := g.startInstanceLocked(g.faultsFor(live+len(created), s), domain)
		created = append(created, providerID(g.cfg.Name, inst.name))
	}
	refused := delta - granted
	for range refused {
		g.newInstanceLocked().failure = &cloudprovider.InstanceErrorInfo{
			ErrorClass:   cloudprovider.OutOfResourcesErrorClass,
			ErrorCode:    "OutOfResources",
			ErrorMessage: fmt.Sprintf("injected fault: node group %s holds at most %d instances (faults.outOfResourcesAfter)", g.cfg.Name, *g.cfg.Faults.OutOfResourcesAfter),
		}
	}
	p.logger.Info("Increased node group", "nodeGroup", g.cfg.Name, "delta", delta, "created", len(created), "failed", failed+refused, "atomic", atomic, "target", live+len(created))
	var errs []error
	if refused > 0 {
		errs = append(errs, ErrOutOfResources)
	}
	if failed > 0 {
		errs = append(errs, ErrInjectedFailure)
	}
	if g.cfg.Faults.InstancesVisibleAfter.Duration > 0 {
		created = nil // a cloud that cannot name its instances at request time
	}
	if len(errs) > 0 {
		return created, fmt.Errorf("node group %s: %d of %d new instances failed: %w", g.cfg.Name, failed+refused, delta, errors.Join(errs...))
	}
	return created, nil
}

// newInstanceLocked adds an instance under a fresh random name.
func (g *nodeGroup) newInstanceLocked() *instance {
	name := ""
	for name == "" || g.instances[name] != nil {
		name = g.cfg.Name + "-" + utilrand.String(5)
	}
	g.p.seq++
	inst := &instance{name: name, created: g.p.seq, createdAt: g.p.clock.Now()}
	g.instances[name] = inst
	g.dirty = true
	return inst
}

// DeleteNodes removes the nodes and their slices and lowers the target; it
// refuses to take the group below minSize.
func (g *nodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	return g.deleteNodes(ctx, nodes, false)
}

// ForceDeleteNodes is DeleteNodes without the minSize check.
func (g *nodeGroup) ForceDeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	return g.deleteNodes(ctx, nodes, true)
}

func (g *nodeGroup) deleteNodes(ctx context.Context, nodes []*corev1.Node, force bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("node group %s: %w", g.cfg.Name, err)
	}
	p := g.p
	p.mu.Lock()
	victims, unknown := []*instance{}, []string{}
	liveVictims := 0
	for _, node := range nodes {
		if other := p.groupOf(node); other != g {
			p.mu.Unlock()
			return fmt.Errorf("node group %s: node %s does not belong to it", g.cfg.Name, node.Name)
		}
		name := instanceName(node)
		inst, ok := g.instances[name]
		switch {
		case !ok:
			// Not (or no longer) tracked, but labelled as ours: remove
			// what is left of it without touching the target.
			unknown = append(unknown, name)
		case !containsInstance(victims, inst):
			victims = append(victims, inst)
			if inst.live() {
				liveVictims++
			}
		}
	}
	if live := g.liveLocked(); !force && live-liveVictims < g.cfg.MinSize {
		p.mu.Unlock()
		return fmt.Errorf("node group %s: deleting %d nodes would take the group from %d below minSize %d", g.cfg.Name, liveVictims, live, g.cfg.MinSize)
	}
	for _, inst := range victims {
		delete(g.instances, inst.name)
		g.forgetLocked(inst.name)
	}
	for _, name := range unknown {
		g.forgetLocked(name)
	}
	p.mu.Unlock()
	defer g.saveState(ctx)

	var errs []error
	for _, inst := range victims {
		inst.stopAndWait()
		if inst.failure != nil {
			continue // never reached the API server
		}
		if err := p.deleteNodeObjects(p.ctx, inst.name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range unknown {
		if err := p.deleteNodeObjects(p.ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	p.logger.Info("Deleted nodes", "nodeGroup", g.cfg.Name, "count", len(victims)+len(unknown), "force", force)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node group %s: %w", g.cfg.Name, err)
	}
	return nil
}

func containsInstance(list []*instance, inst *instance) bool {
	for _, i := range list {
		if i == inst {
			return true
		}
	}
	return false
}

// DecreaseTargetSize gives up -delta requests that have not registered
// yet, newest first. It never removes a registered node.
func (g *nodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: size decrease must be negative, got %d", g.cfg.Name, delta)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("node group %s: %w", g.cfg.Name, err)
	}
	p := g.p
	p.mu.Lock()
	var pending []*instance
	for _, inst := range g.instances {
		if inst.live() && !inst.registered {
			pending = append(pending, inst)
		}
	}
	if -delta > len(pending) {
		p.mu.Unlock()
		return fmt.Errorf("node group %s: cannot decrease target by %d: only %d requested nodes have not registered", g.cfg.Name, -delta, len(pending))
	}
	sort.Slice(pending, func(a, b int) bool { return pending[a].created > pending[b].created })
	pending = pending[:-delta]
	for _, inst := range pending {
		delete(g.instances, inst.name)
		g.forgetLocked(inst.name)
	}
	p.mu.Unlock()
	defer g.saveState(ctx)

	var errs []error
	for _, inst := range pending {
		inst.stopAndWait()
		// The boot goroutine may have created the Node between our
		// check and its stop; the request is given up either way.
		if err := p.deleteNodeObjects(p.ctx, inst.name); err != nil {
			errs = append(errs, err)
		}
	}
	p.logger.Info("Decreased target size", "nodeGroup", g.cfg.Name, "delta", delta)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node group %s: %w", g.cfg.Name, err)
	}
	return nil
}

// Nodes lists every instance, failed creations included, sorted by name;
// faults.instancesVisibleAfter hides young ones and faults.nodesErrorRate
// makes the call fail at random.
func (g *nodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if err := g.apiErrorLocked("Nodes", g.rand.nodes, g.cfg.Faults.NodesErrorRate); err != nil {
		return nil, err
	}
	now, hide := g.p.clock.Now(), g.cfg.Faults.InstancesVisibleAfter.Duration
	out := make([]cloudprovider.Instance, 0, len(g.instances))
	for _, inst := range g.instances {
		if hide > 0 && now.Before(inst.createdAt.Add(hide)) {
			continue
		}
		out = append(out, cloudprovider.Instance{Id: providerID(g.cfg.Name, inst.name), Status: inst.status(), CreatedAt: inst.createdAt})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Id < out[b].Id })
	return out, nil
}

// TemplateNodeInfo returns the node a new instance registers as and the
// slices its drivers publish, under the placeholder name "<group>-template"
// (slices' nodeName and pool name match it). No pods: the provider knows
// of no DaemonSets.
func (g *nodeGroup) TemplateNodeInfo() (*cloudprovider.NodeTemplate, error) {
	name := templateNodeName(g.cfg.Name)
	return &cloudprovider.NodeTemplate{
		Node:           g.cfg.buildTemplateNode(),
		ResourceSlices: g.cfg.buildSlices(name),
		CSINode:        g.cfg.buildCSINode(name),
	}, nil
}

// GetOptions is the group's options config over defaults;
// ErrNotImplemented for a group without one.
func (g *nodeGroup) GetOptions(defaults cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
	o := g.cfg.Options
	if o == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	out := defaults
	if o.ScaleDownUtilizationThreshold != nil {
		out.ScaleDownUtilizationThreshold = *o.ScaleDownUtilizationThreshold
	}
	if o.ScaleDownGPUUtilizationThreshold != nil {
		out.ScaleDownGpuUtilizationThreshold = *o.ScaleDownGPUUtilizationThreshold
	}
	for _, d := range []struct {
		from *metav1.Duration
		to   *time.Duration
	}{{o.ScaleDownUnneededTime, &out.ScaleDownUnneededTime}, {o.ScaleDownUnreadyTime, &out.ScaleDownUnreadyTime}, {o.MaxNodeProvisionTime, &out.MaxNodeProvisionTime}} {
		if d.from != nil {
			*d.to = d.from.Duration
		}
	}
	if o.ZeroOrMaxNodeScaling != nil {
		out.ZeroOrMaxNodeScaling = *o.ZeroOrMaxNodeScaling
	}
	return &out, nil
}
