// Package objects keeps one NodeGroup object (autoscaling.dra-autoscaler.io
// /v1alpha1, cluster-scoped) per node group the autoscaler manages: sizes,
// nodes, what a new node brings (allocatable, DRA devices per driver and
// per DeviceClass), capacity type and reservations left, backoff, the
// time from request to usable node, and how much more can be provisioned
// now and what stops it. The leader writes them at the end of each pass,
// only the objects whose status changed, through the status subresource;
// it deletes its objects of groups that are gone. Objects are marked with
// the autoscaler's identity, and those of another autoscaler are never
// touched. A cluster without the CRD is told once in the log; the pass
// goes on.
package objects

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
)

// Labels of the objects.
const (
	// LabelManagedBy marks the objects as the autoscaler's.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "dra-autoscaler"
	// LabelOwner names the autoscaler that writes an object (Identity):
	// each autoscaler reads, writes and deletes only its own.
	LabelOwner = "autoscaling.dra-autoscaler.io/owner"
)

// Identity is the owner label's value for the autoscaler whose leader
// lease is namespace/name: replicas of one autoscaler share it, two
// autoscalers in one cluster never do.
func Identity(namespace, name string) string {
	id := namespace + "." + name
	if len(validation.IsValidLabelValue(id)) == 0 {
		return id
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '-'
	}, id)
	if len(clean) > 50 {
		clean = clean[:50]
	}
	return strings.Trim(fmt.Sprintf("%s-%08x", strings.Trim(clean, "-._"), h.Sum32()), "-._")
}

// Publisher writes the NodeGroup objects of each pass.
type Publisher struct {
	Sources
	dyn   dynamic.Interface
	owner string
	// absent: the API server did not serve NodeGroups at the last try
	// (told once, until it does again).
	absent bool
	// taken are names another's objects held when last tried, and when:
	// tried again after retakeAfter, told once.
	taken map[string]time.Time
}

// retakeAfter is how long a name another's object held is left alone
// before creating ours is tried again.
const retakeAfter = 5 * time.Minute

// New returns a publisher writing as owner (Identity).
func New(dyn dynamic.Interface, owner string, s Sources) *Publisher {
	return &Publisher{Sources: s, dyn: dyn, owner: owner, taken: map[string]time.Time{}}
}

// Result counts what one Publish did.
type Result struct {
	Created, Updated, Deleted, Unchanged int
}

// Publish brings the objects in line with in: creates the missing ones,
// writes the status of those that changed, deletes those of groups that
// are gone. Failures are logged and retried next pass; none fails it.
func (p *Publisher) Publish(ctx context.Context, in PublishInput) Result {
	logger := klog.FromContext(ctx)
	var res Result
	client := p.dyn.Resource(v1alpha1.NodeGroupResource)
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: LabelOwner + "=" + p.owner})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			if !p.absent {
				logger.Info("NodeGroup objects are not written: the API server does not serve or allow them (install deploy/crds and the RBAC rules for nodegroups)",
					"resource", v1alpha1.NodeGroupResource.String(), "err", err)
			}
			p.absent = true
			return res
		}
		logger.Error(err, "Listing NodeGroup objects failed; retried next pass")
		return res
	}
	if p.absent {
		logger.Info("NodeGroup objects are served: writing them")
		p.absent = false
	}
	have := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		have[list.Items[i].GetName()] = &list.Items[i]
	}
	want := map[string]v1alpha1.NodeGroupStatus{}
	for _, g := range in.Groups {
		want[ObjectName(g.Id)] = p.Status(ctx, g, in)
	}
	for _, name := range sortedNames(want) {
		st := want[name]
		cur := have[name]
		if at, ok := p.taken[name]; cur == nil && ok && in.Now.Sub(at) < retakeAfter {
			continue
		}
		if cur == nil {
			created, err := p.create(ctx, name, st, in.Now)
			if err != nil {
				logger.Error(err, "Writing a NodeGroup object failed; retried next pass", "nodeGroup", st.NodeGroup)
			}
			if created {
				res.Created++
			}
			continue
		}
		changed, err := statusChanged(cur, st)
		if err != nil {
			logger.Error(err, "Reading a NodeGroup object failed; it is rewritten", "nodeGroup", st.NodeGroup)
		}
		if !changed {
			res.Unchanged++
			continue
		}
		if err := p.updateStatus(ctx, cur, st); err != nil {
			logger.V(2).Info("Writing a NodeGroup status failed; retried next pass", "nodeGroup", st.NodeGroup, "err", err)
			continue
		}
		res.Updated++
	}
	exist := make(map[string]bool, len(in.Exist))
	for _, id := range in.Exist {
		exist[ObjectName(id)] = true
	}
	for _, name := range sortedNames(have) {
		if _, ok := want[name]; ok || exist[name] {
			continue
		}
		uid := have[name].GetUID()
		err := client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Deleting the NodeGroup object of a group that is gone failed; retried next pass", "nodeGroupObject", name)
			continue
		}
		logger.V(2).Info("Deleted the NodeGroup object of a group that is gone", "nodeGroupObject", name)
		res.Deleted++
	}
	for name := range p.taken {
		if _, ok := want[name]; !ok || have[name] != nil {
			delete(p.taken, name)
		}
	}
	return res
}

// create makes the object, then writes its status (the status
// subresource ignores the status of a create). created is false when
// the name is another's.
func (p *Publisher) create(ctx context.Context, name string, st v1alpha1.NodeGroupStatus, now time.Time) (created bool, err error) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "NodeGroup",
		"metadata": map[string]any{"name": name, "labels": map[string]any{LabelManagedBy: ManagedBy, LabelOwner: p.owner}},
	}}
	obj, err = p.dyn.Resource(v1alpha1.NodeGroupResource).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Not in our list: another autoscaler's (or a user's) object.
		if _, told := p.taken[name]; !told {
			klog.FromContext(ctx).Info("A NodeGroup object of this name exists and is not this autoscaler's; it is left alone",
				"nodeGroup", st.NodeGroup, "object", name, "owner", p.owner)
		}
		p.taken[name] = now
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create NodeGroup %s: %w", name, err)
	}
	// Created: a failed status write is retried next pass.
	return true, p.updateStatus(ctx, obj.DeepCopy(), st)
}

func (p *Publisher) updateStatus(ctx context.Context, cur *unstructured.Unstructured, st v1alpha1.NodeGroupStatus) error {
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	obj := cur.DeepCopy()
	obj.Object["status"] = data
	// The resourceVersion read guards against writing over a newer
	// status (a replica that just lost the lease): a conflict waits for
	// the next pass.
	if _, err := p.dyn.Resource(v1alpha1.NodeGroupResource).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update NodeGroup %s status: %w", cur.GetName(), err)
	}
	return nil
}

// statusChanged compares the stored status with st as the API server
// would store it (a round trip through JSON fields).
func statusChanged(cur *unstructured.Unstructured, st v1alpha1.NodeGroupStatus) (bool, error) {
	raw, ok, err := unstructured.NestedMap(cur.Object, "status")
	if err != nil || !ok {
		return true, err
	}
	var have v1alpha1.NodeGroupStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &have); err != nil {
		return true, err
	}
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return true, err
	}
	var want v1alpha1.NodeGroupStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(data, &want); err != nil {
		return true, err
	}
	return !equality.Semantic.DeepEqual(have, want), nil
}
