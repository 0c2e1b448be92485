package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

func (d *demo) slicesPacked() scene {
	return scene{
		name: "GPU slices packed",
		lookFor: "gpu-mig-7 nodes have one GPU of 7 slices; a 5-slice pod gets a new node, then two 1-slice pods " +
			"go onto that partly used GPU: no second node",
		play: d.playSharing,
	}
}

func (d *demo) playSharing(ctx context.Context) (string, error) {
	// k slices of the GPU: k one-slice partitions (kwok-sharing.yaml).
	slices := func(k int64) *builder.RequestBuilder {
		return builder.Request("gpu", "gpu").Count(k).Selector(fmt.Sprintf(`device.attributes[%q].profile == "1g"`, gpuDriver))
	}
	if err := d.create(ctx,
		builder.ClaimTemplate(ns, "slices-5").Request(slices(5)).Obj(),
		builder.ClaimTemplate(ns, "slices-1").Request(slices(1)).Obj(),
		scenePod("sharing", "slices-five").ClaimFromTemplate("gpu", "slices-5").Obj(),
	); err != nil {
		return "", err
	}
	first, err := d.waitRunning(ctx, "slices-five", 1)
	if err != nil {
		return "", err
	}
	node := first[0].Spec.NodeName
	for _, name := range []string{"slices-one-a", "slices-one-b"} {
		if err := d.create(ctx, scenePod("sharing", name).ClaimFromTemplate("gpu", "slices-1").Obj()); err != nil {
			return "", err
		}
	}
	small, err := d.waitRunning(ctx, "slices-one-", 2)
	if err != nil {
		return "", err
	}
	for _, p := range small {
		if p.Spec.NodeName != node {
			return "", fmt.Errorf("%s runs on %s, not on the partly used %s", p.Name, p.Spec.NodeName, node)
		}
	}
	if err := poll.Holds(ctx, 2*d.o.scanInterval+time.Second, sharingGroup+" stays at 1 node", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := d.counts(ctx, sharingGroup)
		return err == nil && counts[0] == 1, seen, err
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("1 node added for 5 slices; the two 1-slice pods packed onto its GPU (%s, 7/7 slices used), no second node", node), nil
}
