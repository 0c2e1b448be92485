package provreq

import (
	"context"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

// Start returns a running processor when ProvisioningRequests are enabled
// and the cluster serves them, nil otherwise (the loop then runs as if
// the API did not exist). Shutdown stops its informers.
func Start(ctx context.Context, client versioned.Interface, kube kubernetes.Interface, opts config.ProvisioningRequestOptions,
	planner GangPlanner, actuator ScaleUpLauncher, recorder record.EventRecorder) (*Processor, error) {
	logger := klog.FromContext(ctx)
	if !opts.Enabled {
		return nil, nil
	}
	served, err := Served(kube.Discovery())
	if err != nil {
		return nil, err
	}
	if !served {
		logger.Info("ProvisioningRequests are not served (no autoscaling.x-k8s.io/v1 CRD); not watching them")
		return nil, nil
	}
	inf := NewInformers(client, kube)
	if err := inf.Start(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	p := NewProcessor(Options{BookingDuration: opts.BookingDuration, MaxPods: opts.MaxPods}, inf.Requests, inf.Templates, TypedStatusClient{client.AutoscalingV1()}, planner, actuator, recorder)
	p.informers = inf
	logger.Info("Serving ProvisioningRequests", "bookingDuration", opts.BookingDuration, "maxPods", opts.MaxPods)
	return p, nil
}

// Shutdown stops the informers Start started.
func (p *Processor) Shutdown() {
	if p != nil && p.informers != nil {
		p.informers.Shutdown()
	}
}
