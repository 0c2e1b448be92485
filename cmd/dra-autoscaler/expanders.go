package main

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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

func buildExpanders(opts *config.Options, client kubernetes.Interface, stranded fragmentation.Scorer) (expander.Chain, error) {
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
		leastwaste.Name: strategy(leastwaste.New()),
		mostpods.Name:   strategy(mostpods.New()),
		leastnodes.Name: strategy(leastnodes.New()),
		price.Name:      strategy(price.New()),
		priority.Name:   strategy(priority.New(prioritySource)),
		random.Name:     strategy(random.New(uint64(time.Now().UnixNano()))),
	}
	factories[fragmentation.Name] = strategy(fragmentation.New(stranded))
	return expander.Build(opts.Expanders, factories)
}
