package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

// The reservation scenes' groups and reservation (scenes-kwok.yaml): one
// GPU a node, the same shape reserved and on demand.
const (
	reservedGroup = "gpu-reserved"
	onDemandGroup = "gpu-ondemand"
	reservationID = "demo-reserved"
	reservedCount = 2
	reservedJobs  = 3
)

func (d *demo) reservedFirst() scene {
	return scene{
		name: "reserved capacity first",
		lookFor: fmt.Sprintf("%d one-GPU jobs, a node each; groups gpu-reserved (reservation %s: %d nodes, already paid) and gpu-ondemand "+
			"are alike: %d reserved nodes, the rest on demand, the reserved group never above %d", reservedJobs, reservationID, reservedCount, reservedCount, reservedCount),
		play: d.playReserved,
	}
}

func (d *demo) playReserved(ctx context.Context) (string, error) {
	// Watch the reserved group the whole time: its nodes and its target.
	var mu sync.Mutex
	most := 0
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wctx.Err() == nil {
			nodes, _ := d.groupNodes(wctx, reservedGroup)
			target := 0.0
			if m, err := d.auto.metrics(wctx); err == nil {
				target = metricValue(m, "cluster_autoscaler_node_group_target_count", fmt.Sprintf("node_group=%q", reservedGroup))
			}
			mu.Lock()
			most = max(most, len(nodes), int(target))
			mu.Unlock()
			select {
			case <-wctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()

	for i := range reservedJobs {
		if err := d.create(ctx, scenePod("reserved", fmt.Sprintf("job-%d", i)).ClaimFromTemplate("gpu", "one-gpu").Obj()); err != nil {
			return "", err
		}
	}
	pods, err := d.waitRunning(ctx, "job-", reservedJobs)
	if err != nil {
		return "", err
	}
	counts, seen, err := d.counts(ctx, reservedGroup, onDemandGroup)
	if err != nil {
		return "", err
	}
	if counts[0] != reservedCount || counts[1] != reservedJobs-reservedCount {
		return "", fmt.Errorf("nodes %s, want %d reserved and %d on demand", seen, reservedCount, reservedJobs-reservedCount)
	}
	// Two loops more with everything running, still watched.
	time.Sleep(2 * d.o.scanInterval)
	m, err := d.auto.metrics(ctx)
	if err != nil {
		return "", err
	}
	used := metricValue(m, "cluster_autoscaler_reservation_used_nodes", fmt.Sprintf("reservation=%q", reservationID))
	if used != reservedCount {
		return "", fmt.Errorf("cluster_autoscaler_reservation_used_nodes{reservation=%q} = %v, want %d", reservationID, used, reservedCount)
	}
	mu.Lock()
	peak := most
	mu.Unlock()
	if peak > reservedCount {
		return "", fmt.Errorf("the reserved group reached %d nodes; the reservation holds %d", peak, reservedCount)
	}
	var where []string
	for _, p := range pods {
		where = append(where, p.Name+"@"+p.Spec.NodeName)
	}
	fmt.Fprintf(d.o.out, "   %s\n", strings.Join(where, " "))
	return fmt.Sprintf("%d jobs Running: %d on reserved nodes (reservation used %v/%d, never above), %d on demand",
		len(pods), counts[0], used, reservedCount, counts[1]), nil
}

func (d *demo) scaleDown() scene {
	return scene{
		name:  "scale-down keeps paid capacity",
		after: "reserved capacity first",
		lookFor: fmt.Sprintf("the %d jobs end: after --scale-down-unneeded-time=%s the idle on-demand node goes, the idle reserved nodes stay (already paid)",
			reservedJobs, d.o.unneededTime),
		play: d.playScaleDown,
	}
}

func (d *demo) playScaleDown(ctx context.Context) (string, error) {
	for i := range reservedJobs {
		name := fmt.Sprintf("job-%d", i)
		if err := d.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			return "", fmt.Errorf("deleting %s: %w", name, err)
		}
	}
	start := time.Now()
	if err := poll.Until(ctx, d.o.sceneTimeout, "the idle on-demand node removed", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := d.counts(ctx, reservedGroup, onDemandGroup)
		return err == nil && counts[1] == 0, seen, err
	}); err != nil {
		return "", err
	}
	removed := time.Since(start)
	// Kept, and because of the reservation: the autoscaler says so.
	var kept float64
	if err := poll.Until(ctx, 30*time.Second, "the reserved nodes reported unremovable for ReservedCapacity", func(ctx context.Context) (bool, string, error) {
		m, err := d.auto.metrics(ctx)
		kept = metricValue(m, "cluster_autoscaler_unremovable_nodes_count", `reason="ReservedCapacity"`)
		counts, seen, cerr := d.counts(ctx, reservedGroup)
		if err == nil {
			err = cerr
		}
		return kept == reservedCount && len(counts) == 1 && counts[0] == reservedCount,
			fmt.Sprintf("%s unremovable{ReservedCapacity}=%v", seen, kept), err
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("on-demand node removed %.0fs after the jobs ended; %d idle reserved nodes kept (unremovable: ReservedCapacity)",
		removed.Seconds(), reservedCount), nil
}
