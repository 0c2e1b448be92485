package upkeep

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func tmpl(capacityType string) *corev1.Node {
	return builder.Node("t").Label(reservations.LabelCapacityType, capacityType).Label(corev1.LabelInstanceTypeStable, "gpu-8x").Obj()
}

// provider reports res (or err) as its reservations.
type provider struct {
	cloudprovider.CloudProvider
	res []cloudprovider.ReservedCapacity
	err error
}

func (p provider) Reservations() ([]cloudprovider.ReservedCapacity, error) { return p.res, p.err }

type objects []*unstructured.Unstructured

func (o objects) List() []*unstructured.Unstructured { return o }

// evictor is the scale-down drainer over client, as the binary wires it.
func evictor(client kubernetes.Interface) *drain.Drainer {
	return drain.New(client, nil, clock.RealClock{}, drain.Options{MaxGracefulTermination: 10 * time.Minute})
}

// update is one pass's count and upkeep.
func update(p *reservations.Policy, k *Keeper, groups []*nodegroups.Info, pods []*corev1.Pod) *reservations.Count {
	c := p.Count(context.Background(), groups, pods, now)
	k.Run(context.Background(), c, pods, nil)
	return c
}

// object is a CapacityReservation named r with spec.
func object(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.dra-autoscaler.io/v1alpha1", "kind": "CapacityReservation",
		"metadata": map[string]any{"name": "r", "uid": "u1", "generation": int64(1)},
		"spec":     spec,
	}}
}
