package safety

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// UsableAnnotation marks a node of a managed group that the autoscaler
// saw usable (Ready, its start-up taints gone, its DRA pools complete),
// with the time (RFC 3339). It is written once and never removed: a
// process that starts later, after a restart or a failover, knows from it
// that the node is no failed scale-up, however unusable it is now.
const UsableAnnotation = "autoscaling.dra-autoscaler.io/usable-since"

// MarksPerPass bounds the marks queued by one Mark call (one pass).
const MarksPerPass = 10

// UsableSince tells whether the node carries UsableAnnotation, and since
// when. A value that is not a time still marks the node: someone meant to
// say it was usable, and keeping a node is the cheaper mistake.
func UsableSince(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[UsableAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true
	}
	return t, true
}

// Marker writes UsableAnnotation on the nodes it is given, in the
// background, at most MarksPerPass of them per pass: the marks share the
// autoscaler's client, whose QPS (--kube-client-qps, 5 by default) the
// loop's own writes (taints, evictions, nominations) need. A new node is
// marked in the pass that first sees it usable; the thousands of nodes of
// a cluster the autoscaler is installed on are marked over many passes
// (until then this process alone knows them usable, as before the
// annotation existed). A node is written once per process; one whose
// write failed is tried again when it is given again.
type Marker struct {
	client kubernetes.Interface

	mu      sync.Mutex
	done    map[string]bool // written, or queued
	queue   []string
	at      map[string]time.Time
	running bool
}

// NewMarker returns a marker writing through client.
func NewMarker(client kubernetes.Interface) *Marker {
	return &Marker{client: client, done: map[string]bool{}, at: map[string]time.Time{}}
}

// Mark queues the usable nodes that do not carry the annotation yet and
// makes sure a writer runs until ctx ends. It returns at once.
func (m *Marker) Mark(ctx context.Context, nodes []*corev1.Node, now time.Time) {
	if m == nil || m.client == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	queued := 0
	for _, n := range nodes {
		if queued == MarksPerPass {
			break
		}
		if _, ok := UsableSince(n); ok || m.done[n.Name] {
			continue
		}
		queued++
		m.done[n.Name] = true
		m.at[n.Name] = now
		m.queue = append(m.queue, n.Name)
	}
	if len(m.queue) > 0 && !m.running {
		m.running = true
		go m.write(ctx)
	}
}

// write drains the queue, then stops; ctx ending stops it too, and what
// it did not write is marked again from the next Mark.
func (m *Marker) write(ctx context.Context) {
	for {
		m.mu.Lock()
		if len(m.queue) == 0 || ctx.Err() != nil {
			for _, name := range m.queue {
				delete(m.done, name)
			}
			m.queue = nil
			m.running = false
			m.mu.Unlock()
			return
		}
		name := m.queue[0]
		m.queue = m.queue[1:]
		at := m.at[name]
		delete(m.at, name)
		m.mu.Unlock()
		if err := m.patch(ctx, name, at); err != nil {
			klog.FromContext(ctx).V(2).Info("Could not mark a node as seen usable; tried again next pass", "node", name, "err", err)
			m.mu.Lock()
			delete(m.done, name)
			m.mu.Unlock()
		}
	}
}

func (m *Marker) patch(ctx context.Context, node string, at time.Time) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{UsableAnnotation: at.UTC().Format(time.RFC3339)}}})
	if err != nil {
		return err
	}
	_, err = m.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
