package autoscaler

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastnodes"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/mostpods"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/price"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/priority"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/random"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/reserved"
)

func buildExpanders(opts *config.Options, client kubernetes.Interface, events record.EventRecorder, stranded fragmentation.Scorer,
	requests leastwaste.Requests) (expander.Chain, error) {
	strategy := func(s expander.Strategy) expander.Factory {
		return func() (expander.Strategy, error) { return s, nil }
	}
	prioritySource := func() (map[string]string, bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cm, err := client.CoreV1().ConfigMaps(opts.Namespace).Get(ctx, opts.PriorityExpanderConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return cm.Data, true, nil
	}
	factories := map[string]expander.Factory{
		reserved.Name:   strategy(reserved.New()),
		leastwaste.Name: strategy(leastwaste.NewWith(requests)),
		mostpods.Name:   strategy(mostpods.New()),
		leastnodes.Name: strategy(leastnodes.New()),
		price.Name:      strategy(price.New()),
		priority.Name:   strategy(priority.New(prioritySource, priorityWarning(opts, events))),
		random.Name:     strategy(random.New(uint64(time.Now().UnixNano()))),
	}
	factories[fragmentation.Name] = strategy(fragmentation.New(stranded))
	return expander.Build(opts.Expanders, factories)
}

// priorityWarning tells the priority ConfigMap, with a Warning event, that
// it cannot be used; the same message once every 10 minutes at most, as
// the strategy runs for every scale-up.
func priorityWarning(opts *config.Options, events record.EventRecorder) func(error) {
	if events == nil {
		return nil
	}
	var mu sync.Mutex
	var last string
	var at time.Time
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: opts.Namespace, Name: opts.PriorityExpanderConfigMap}
	return func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if err.Error() == last && time.Since(at) < 10*time.Minute {
			return
		}
		last, at = err.Error(), time.Now()
		events.Event(ref, corev1.EventTypeWarning, "InvalidPriorityConfig", "ignored by the priority expander: "+err.Error())
	}
}
