package upkeep

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
)

// AnnotationCordonedBy marks a node the autoscaler cordoned, and why
// ("capacity-block/<id>"). A cordon without it is someone else's and is
// never lifted here.
const AnnotationCordonedBy = "autoscaling.dra-autoscaler.io/cordoned-by"

const blockMarkPrefix = "capacity-block/"

func cordonMark(id string) string { return blockMarkPrefix + id }

// uncordon lifts the cordons placed for ending blocks whose reason is
// gone: the block's end moved later, the reservation was deleted, or the
// node is no longer on it. Only nodes carrying our mark are touched.
func (k *Keeper) uncordon(ctx context.Context, b *reservations.Book) {
	if k.client == nil {
		return
	}
	logger := klog.FromContext(ctx)
	nodes := b.Nodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		mark, ours := n.Annotations[AnnotationCordonedBy]
		if !ours || !strings.HasPrefix(mark, blockMarkPrefix) || stillEnding(b, n) {
			continue
		}
		if err := lift(ctx, k, n.Name, mark); err != nil {
			logger.Error(err, "Lifting the cordon of a capacity block that no longer ends failed; retried next loop", "node", n.Name, "cordonedBy", mark)
			continue
		}
		logger.Info("Uncordoned a node: the capacity block it was drained for no longer ends", "node", n.Name, "cordonedBy", mark)
	}
}

// stillEnding: the node is on a block that still ends within the margin
// (or has ended), the one its mark names or another: drain would cordon
// it again, so lifting the cordon now would only let pods in for a pass.
func stillEnding(b *reservations.Book, n *corev1.Node) bool {
	slot := b.NodeSlot(n.Name)
	return slot != nil && slot.Started(b.Now()) && slot.Ending(b.Now(), b.Margin())
}

// lift uncordons the node and drops the mark, provided the mark is still
// the one read (a JSON patch test): whoever changed it since owns the
// node's cordon now.
func lift(ctx context.Context, k *Keeper, node, mark string) error {
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(AnnotationCordonedBy)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": mark},
		{"op": "remove", "path": path},
		{"op": "add", "path": "/spec/unschedulable", "value": false},
	})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
