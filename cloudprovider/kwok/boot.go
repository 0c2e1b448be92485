package kwok

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// sliceRetries bounds how often publishing a slice is retried, with the
// wait doubling from one second, before the node is left without it.
const sliceRetries = 5

// delay is a wait that starts when it is made, not when it is waited on:
// a test with a fake clock can step time as soon as the call that started
// it returns, without racing the goroutine that waits.
type delay struct{ timer clock.Timer }

func newDelay(c clock.Clock, d time.Duration) delay {
	if d <= 0 {
		return delay{}
	}
	return delay{timer: c.NewTimer(d)}
}

// wait reports whether the delay passed before ctx ended.
func (d delay) wait(ctx context.Context) bool {
	if d.timer == nil {
		return ctx.Err() == nil
	}
	select {
	case <-d.timer.C():
		return true
	case <-ctx.Done():
		d.timer.Stop()
		return false
	}
}

// startInstanceLocked adds an instance with the given faults and boots it.
func (g *nodeGroup) startInstanceLocked(f instanceFaults, domain string) *instance {
	inst := g.newInstanceLocked()
	inst.faults, inst.domain = f, domain
	g.bootLocked(inst)
	return inst
}

// bootLocked starts, unless inst never registers, the goroutine that
// registers its Node after the boot delay and publishes its slices after
// the further driver delay. Both delays count from inst.createdAt, so that
// an instance restored by a new process boots when it would have.
func (g *nodeGroup) bootLocked(inst *instance) {
	if inst.faults.NeverRegister {
		g.p.logger.V(2).Info("Instance will never register (injected fault)", "nodeGroup", g.cfg.Name, "node", inst.name)
		return
	}
	now, bootAt := g.p.clock.Now(), inst.createdAt.Add(g.cfg.BootDelay.Duration)
	boot := newDelay(g.p.clock, bootAt.Sub(now))
	drivers := newDelay(g.p.clock, bootAt.Add(g.cfg.DriverDelay.Duration).Sub(now))
	g.goLocked(inst, func(ctx context.Context) {
		if !boot.wait(ctx) {
			return
		}
		node, err := g.registerNode(ctx, inst)
		if errors.Is(err, cloudprovider.ErrReadOnly) {
			// A read-only client (explain's): the instance stays booting,
			// as the process that launched it sees it.
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				g.failCreation(inst, err)
				g.saveState(ctx)
			}
			return
		}
		if !g.markRegistered(inst) {
			return // given up meanwhile; whoever did it deletes the node
		}
		g.saveState(ctx)
		if inst.faults.DriversNeverPublish {
			g.p.logger.V(2).Info("Drivers will never publish (injected fault)", "nodeGroup", g.cfg.Name, "node", inst.name)
			return
		}
		if drivers.wait(ctx) {
			g.publishSlices(ctx, node, g.cfg.publishedSlices(node.Name, inst.faults))
		}
	})
}

// registerNode creates inst's Node. One that exists already was created
// for the same instance by a previous process that stopped before it
// recorded the registration.
func (g *nodeGroup) registerNode(ctx context.Context, inst *instance) (*corev1.Node, error) {
	nodes := g.p.client.CoreV1().Nodes()
	node, err := nodes.Create(ctx, g.cfg.buildInstanceNode(inst.name, inst.faults, inst.domain), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = nodes.Get(ctx, inst.name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	if csi := g.cfg.buildCSINode(inst.name); csi != nil {
		// As the kubelet does: owned by the Node, so it goes with it.
		csi.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		_, err := g.p.client.StorageV1().CSINodes().Create(ctx, csi, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("registering the CSINode of %s: %w", node.Name, err)
		}
	}
	return node, nil
}

// goLocked runs fn in a goroutine owned by inst and by the provider:
// stopping the instance or Cleanup cancels its context.
func (g *nodeGroup) goLocked(inst *instance, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(g.p.ctx)
	inst.stop, inst.done = cancel, make(chan struct{})
	g.p.wg.Add(1)
	go func() {
		defer g.p.wg.Done()
		defer close(inst.done)
		defer cancel()
		fn(ctx)
	}()
}

// markRegistered records that inst's Node exists, unless inst was removed
// meanwhile.
func (g *nodeGroup) markRegistered(inst *instance) bool {
	p := g.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if g.instances[inst.name] != inst {
		return false
	}
	if !inst.registered {
		p.seq++
		inst.registered, inst.registeredSeq = true, p.seq
		g.dirty = true
		p.logger.Info("Node registered", "nodeGroup", g.cfg.Name, "node", inst.name)
	}
	return true
}

// failCreation turns an instance whose Node could not be created into a
// failed creation, reported like the quota fault but as OtherErrorClass.
func (g *nodeGroup) failCreation(inst *instance, err error) {
	p := g.p
	p.logger.Error(err, "Creating node failed", "nodeGroup", g.cfg.Name, "node", inst.name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if g.instances[inst.name] == inst {
		inst.failure = &cloudprovider.InstanceErrorInfo{
			ErrorClass:   cloudprovider.OtherErrorClass,
			ErrorCode:    "NodeCreateFailed",
			ErrorMessage: err.Error(),
		}
		g.dirty = true
	}
}

// publishSlices creates the node's slices, owned by the node as the
// kubelet's plugin registration would make them, so that the garbage
// collector removes them with the node. Slices that exist are left alone.
// Attributes the template fills per unit (cloudprovider.LaunchValue, an
// IMEX channel's clique) take the node's value, as its driver publishes
// them.
func (g *nodeGroup) publishSlices(ctx context.Context, node *corev1.Node, slices []*resourceapi.ResourceSlice) {
	logger := klog.FromContext(ctx)
	slices = cloudprovider.FillLaunchValues(slices, func(label string) string { return node.Labels[label] })
	for _, slice := range slices {
		slice.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       node.Name,
			UID:        node.UID,
			Controller: ptr.To(true),
		}}
		wait := time.Second
		for attempt := 1; ; attempt++ {
			_, err := g.p.client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if ctx.Err() != nil || errors.Is(err, cloudprovider.ErrReadOnly) {
				return // stopped, or a read-only client: retrying changes nothing
			}
			if attempt == sliceRetries {
				logger.Error(err, "Publishing ResourceSlice failed, giving up", "nodeGroup", g.cfg.Name, "node", node.Name, "slice", slice.Name)
				break
			}
			logger.Error(err, "Publishing ResourceSlice failed, retrying", "nodeGroup", g.cfg.Name, "node", node.Name, "slice", slice.Name, "after", wait)
			if !newDelay(g.p.clock, wait).wait(ctx) {
				return
			}
			wait *= 2
		}
	}
	logger.V(2).Info("Published ResourceSlices", "nodeGroup", g.cfg.Name, "node", node.Name, "count", len(slices))
}

// deleteNodeObjects deletes a node and every slice published for it;
// objects already gone are fine.
func (p *Provider) deleteNodeObjects(ctx context.Context, name string) error {
	var errs []error
	err := p.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting node %s: %w", name, err))
	}
	// The garbage collector would take it with the node; not every
	// cluster (or fake) runs one.
	err = p.client.StorageV1().CSINodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting CSINode %s: %w", name, err))
	}
	slices, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, name).String(),
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing slices of node %s: %w", name, err))
		return errors.Join(errs...)
	}
	for _, s := range slices.Items {
		// Checked again here: not every client honours field selectors
		// (client-go's fake clientset ignores them).
		if s.Spec.NodeName == nil || *s.Spec.NodeName != name {
			continue
		}
		err := p.client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting slice %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}
