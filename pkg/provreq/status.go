package provreq

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	provclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned/typed/autoscaling.x-k8s.io/v1"
	"k8s.io/klog/v2"
)

// StatusClient writes a request's status subresource.
type StatusClient interface {
	UpdateStatus(ctx context.Context, pr *v1.ProvisioningRequest) error
}

// TypedStatusClient is a StatusClient over the typed clientset.
type TypedStatusClient struct {
	Client provclient.ProvisioningRequestsGetter
}

// UpdateStatus updates the status subresource.
func (c TypedStatusClient) UpdateStatus(ctx context.Context, pr *v1.ProvisioningRequest) error {
	_, err := c.Client.ProvisioningRequests(pr.Namespace).UpdateStatus(ctx, pr, metav1.UpdateOptions{})
	return err
}

// write stores the request's new conditions, then sends its events: an
// event tells of a condition that is really there. A conflict (the
// request changed meanwhile) is retried by the next loop, which sees the
// new version.
func (p *Processor) write(ctx context.Context, pr *v1.ProvisioningRequest, u *update) {
	if !u.changed {
		return
	}
	logger := klog.FromContext(ctx).WithValues("provisioningRequest", klog.KObj(pr))
	next := pr.DeepCopy()
	next.Status.Conditions = u.conds
	if err := p.client.UpdateStatus(ctx, next); err != nil {
		logger.Error(err, "Updating ProvisioningRequest status failed; retrying next loop")
		return
	}
	for _, c := range u.conds {
		logger.V(2).Info("ProvisioningRequest condition", "type", c.Type, "status", c.Status, "reason", c.Reason, "message", c.Message)
	}
	if p.recorder == nil {
		return
	}
	// Objects from the informer carry no kind; the event's reference
	// needs one, and the client-go scheme does not know the type.
	ref := &v1.ProvisioningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: pr.Namespace, Name: pr.Name, UID: pr.UID, ResourceVersion: pr.ResourceVersion},
	}
	for _, e := range u.events {
		p.recorder.Event(ref, e.typ, e.reason, e.message)
	}
}
