package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

const (
	rackLabel = "example.com/rack"
	gangSize  = 8
)

// The gang scenes' groups (scenes-kwok.yaml): 2 GPUs a node, rack-a up to
// 3 nodes (6 GPUs), rack-b up to 4 (8).
const (
	rackA = "rack-a"
	rackB = "rack-b"
)

func (d *demo) gangInOneRack() scene {
	return scene{
		name: "gang in one rack",
		lookFor: fmt.Sprintf("a PodGroup of %d one-GPU pods (minCount %d, all in one %s): rack-a holds 6 GPUs, rack-b 8; "+
			"all %d pods Running in rack-b, its 4 nodes asked for in one atomic request", gangSize, gangSize, rackLabel, gangSize),
		play: func(ctx context.Context) (string, error) {
			if err := d.gang(ctx, "train"); err != nil {
				return "", err
			}
			pods, err := d.waitRunning(ctx, "train-", gangSize)
			if err != nil {
				return "", err
			}
			nodes := map[string]bool{}
			for _, p := range pods {
				if !strings.HasPrefix(p.Spec.NodeName, rackB+"-") {
					return "", fmt.Errorf("%s runs on %s, outside rack-b", p.Name, p.Spec.NodeName)
				}
				nodes[p.Spec.NodeName] = true
			}
			counts, seen, err := d.counts(ctx, rackA, rackB)
			if err != nil {
				return "", err
			}
			if counts[0] != 0 || counts[1] != 4 {
				return "", fmt.Errorf("nodes %s, want 0 in rack-a and 4 in rack-b", seen)
			}
			// One request: the autoscaler logged one atomic scale-up of
			// rack-b, by 4, and the PodGroup heard of it.
			ups, err := d.scaleUps(rackB)
			if err != nil {
				return "", err
			}
			if len(ups) != 1 || !strings.Contains(ups[0], "delta=4") || !strings.Contains(ups[0], "atomic=true") {
				return "", fmt.Errorf("scale-ups of rack-b logged: %q, want one atomic +4", ups)
			}
			msg, err := d.waitEvent(ctx, "train", "TriggeredScaleUp", rackB+" +4")
			if err != nil {
				return "", err
			}
			fmt.Fprintf(d.o.out, "   PodGroup train: %s\n", msg)
			return fmt.Sprintf("%d/%d pods Running on %d rack-b nodes, added in one atomic request (rack-b +4); rack-a untouched",
				len(pods), gangSize, len(nodes)), nil
		},
	}
}

func (d *demo) gangNoRoom() scene {
	return scene{
		name:  "gang that cannot fit",
		after: "gang in one rack",
		lookFor: fmt.Sprintf("the same gang again: rack-b is full, rack-a can hold 6 of its %d pods; a pod-by-pod autoscaler "+
			"would add 3 rack-a nodes the gang can never use: nothing is added, and the PodGroup hears why", gangSize),
		play: func(ctx context.Context) (string, error) {
			if err := d.gang(ctx, "train2"); err != nil {
				return "", err
			}
			msg, err := d.waitEvent(ctx, "train2", "NotTriggerScaleUp", "")
			if err != nil {
				return "", err
			}
			// A few loops more, and still nothing for part of the gang.
			if err := poll.Holds(ctx, 3*d.o.scanInterval+2*time.Second, "no node added for the second gang", func(ctx context.Context) (bool, string, error) {
				counts, seen, err := d.counts(ctx, rackA, rackB)
				return err == nil && counts[0] == 0 && counts[1] == 4, seen, err
			}); err != nil {
				return "", err
			}
			pods, _, err := d.pods(ctx, "train2-")
			if err != nil {
				return "", err
			}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					return "", fmt.Errorf("%s was bound to %s", p.Name, p.Spec.NodeName)
				}
			}
			fmt.Fprintf(d.o.out, "   PodGroup train2: %s\n", msg)
			// The summary keeps the first clause: why, in short.
			why, _, _ := strings.Cut(strings.TrimPrefix(msg, "gang didn't trigger scale-up: "), ";")
			return fmt.Sprintf("no node added, %d pods Pending: %s", len(pods), why), nil
		},
	}
}

// gang creates a PodGroup of gangSize one-GPU pods that must share a rack.
func (d *demo) gang(ctx context.Context, name string) error {
	if err := d.create(ctx, builder.PodGroup(ns, name).MinCount(gangSize).TopologyKey(rackLabel).Obj()); err != nil {
		return err
	}
	for i := range gangSize {
		pod := scenePod("gang", fmt.Sprintf("%s-%d", name, i)).PodGroup(name).ClaimFromTemplate("gpu", "one-gpu").Obj()
		if err := d.create(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

var scaleUpLine = regexp.MustCompile(`"Scale-up".*`)

// scaleUps are the autoscaler's log lines of scale-ups of group.
func (d *demo) scaleUps(group string) ([]string, error) {
	data, err := os.ReadFile(d.o.logFile)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range scaleUpLine.FindAllString(string(data), -1) {
		if strings.Contains(m, fmt.Sprintf("nodeGroup=%q", group)) {
			out = append(out, m)
		}
	}
	return out, nil
}
