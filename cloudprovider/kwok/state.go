package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// A group's instances are recorded in a ConfigMap, as a real cloud would
// keep them across a restart of the autoscaler: instances that have not
// registered have no Node by which a new process could find them.
//
// Memory stays the truth. Every change marks the group dirty and is
// written afterwards; a failed write is logged and retried on the next
// change or Refresh. Nothing is written before the ConfigMap has been read
// once (and the instances in it restored), so that a new process never
// overwrites what the old one recorded.

const (
	stateNamePrefix = "kwok-provider-"
	stateKey        = "instances"
)

// instanceRecord is one instance in the state ConfigMap.
type instanceRecord struct {
	Name       string         `json:"name"`
	CreatedAt  time.Time      `json:"createdAt"`
	Registered bool           `json:"registered,omitempty"`
	Failure    *failureRecord `json:"failure,omitempty"`
	Faults     instanceFaults `json:"faults,omitempty"`
	Domain     string         `json:"domain,omitempty"`
}

type failureRecord struct {
	OutOfResources bool   `json:"outOfResources,omitempty"` // else OtherErrorClass
	Code           string `json:"code"`
	Message        string `json:"message,omitempty"`
}

func stateName(group string) string { return stateNamePrefix + group }

func (i *instance) record() instanceRecord {
	r := instanceRecord{Name: i.name, CreatedAt: i.createdAt, Registered: i.registered, Faults: i.faults, Domain: i.domain}
	if f := i.failure; f != nil {
		r.Failure = &failureRecord{OutOfResources: f.ErrorClass == cloudprovider.OutOfResourcesErrorClass, Code: f.ErrorCode, Message: f.ErrorMessage}
	}
	return r
}

func (r *failureRecord) info() *cloudprovider.InstanceErrorInfo {
	if r == nil {
		return nil
	}
	class := cloudprovider.OtherErrorClass
	if r.OutOfResources {
		class = cloudprovider.OutOfResourcesErrorClass
	}
	return &cloudprovider.InstanceErrorInfo{ErrorClass: class, ErrorCode: r.Code, ErrorMessage: r.Message}
}

// forgetLocked records that this process removed the instance name, so
// that a stale record of it is never restored, and marks the group dirty.
func (g *nodeGroup) forgetLocked(name string) {
	g.forgotten.Insert(name)
	delete(g.pending, name)
	g.dirty = true
}

// saveState writes the group's instances if they changed since the last
// successful write.
func (g *nodeGroup) saveState(ctx context.Context) {
	p := g.p
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if !g.loadState(ctx) {
		return
	}
	p.mu.Lock()
	if !g.dirty {
		p.mu.Unlock()
		return
	}
	records := make([]instanceRecord, 0, len(g.instances)+len(g.pending))
	for _, inst := range g.instances {
		records = append(records, inst.record())
	}
	for _, r := range g.pending {
		records = append(records, r)
	}
	g.dirty = false
	p.mu.Unlock()

	sort.Slice(records, func(a, b int) bool {
		if !records[a].CreatedAt.Equal(records[b].CreatedAt) {
			return records[a].CreatedAt.Before(records[b].CreatedAt)
		}
		return records[a].Name < records[b].Name
	})
	if err := g.writeState(ctx, records); err != nil {
		p.mu.Lock()
		g.dirty = true
		p.mu.Unlock()
		if ctx.Err() == nil {
			p.logger.Error(err, "Recording instances failed, retrying on the next change or Refresh", "nodeGroup", g.cfg.Name)
		}
	}
}

// loadState reads the group's ConfigMap once (p.stateMu held) and
// restores the instances in it this process does not know: failed ones as
// failed, booting ones booting with their original createdAt (their boot
// resumes where it was, or never ends if their faults say so). Registered
// ones wait in pending for Refresh to find their Node. It reports whether
// the state is loaded; a failed read is logged and tried again later.
func (g *nodeGroup) loadState(ctx context.Context) bool {
	if g.loaded {
		return true
	}
	p := g.p
	var records []instanceRecord
	unreadable := false
	cm, err := p.client.CoreV1().ConfigMaps(p.stateNamespace).Get(ctx, stateName(g.cfg.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		if ctx.Err() == nil {
			p.logger.Error(err, "Reading recorded instances failed, retrying later", "nodeGroup", g.cfg.Name)
		}
		return false
	default:
		if err := json.Unmarshal([]byte(cm.Data[stateKey]), &records); err != nil {
			// Unreadable: start afresh rather than never record again.
			p.logger.Error(err, "Recorded instances unreadable, ignoring them", "nodeGroup", g.cfg.Name, "configMap", cm.Namespace+"/"+cm.Name)
			records, unreadable = nil, true
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	g.loaded, g.loadedSeq = true, p.seq
	// Written back only when this process knows better: a process that
	// merely reads (the explain subcommand) rewrites nothing.
	g.dirty = g.dirty || unreadable
	for _, r := range records {
		if g.forgotten.Has(r.Name) {
			g.dirty = true
			continue
		}
		if g.instances[r.Name] != nil {
			continue
		}
		if r.Registered {
			g.pending[r.Name] = r
			continue
		}
		p.seq++
		inst := &instance{name: r.Name, created: p.seq, createdAt: r.CreatedAt, failure: r.Failure.info(), faults: r.Faults, domain: r.Domain}
		g.instances[r.Name] = inst
		if inst.failure == nil && !p.closed {
			g.bootLocked(inst)
		}
		p.logger.Info("Restored recorded instance", "nodeGroup", g.cfg.Name, "node", r.Name, "createdAt", r.CreatedAt, "failed", inst.failure != nil)
	}
	return true
}

// writeState replaces the group's ConfigMap, creating it (and its
// namespace) when missing.
func (g *nodeGroup) writeState(ctx context.Context, records []instanceRecord) error {
	p := g.p
	data, err := json.Marshal(records)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: stateName(g.cfg.Name), Namespace: p.stateNamespace, Labels: map[string]string{LabelNodeGroup: g.cfg.Name}},
		Data:       map[string]string{stateKey: string(data)},
	}
	cms := p.client.CoreV1().ConfigMaps(p.stateNamespace)
	// Unconditional: this process is the only writer of its groups.
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.stateNamespace}}
		if _, nsErr := p.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return fmt.Errorf("creating namespace %s: %w", p.stateNamespace, nsErr)
		}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", p.stateNamespace, cm.Name, err)
	}
	return nil
}
