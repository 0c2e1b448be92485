package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// inference is the first scene: GPU pods that each need a GPU and the NIC
// on its PCIe root, and CPU pods, from zero nodes.
func (d *demo) inference() scene {
	o := d.o
	return scene{
		name: "inference from zero",
		lookFor: fmt.Sprintf("%d inference pods (1 GPU + the NIC on its PCIe root each) and %d CPU pods, no node yet: the right groups grow, every pod runs",
			o.gpuPods, o.cpuPods),
		play: d.playInference,
	}
}

func (d *demo) playInference(ctx context.Context) (string, error) {
	o := d.o
	tmpl := builder.ClaimTemplate(ns, "gpu-and-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).Obj()
	if err := d.create(ctx, tmpl); err != nil {
		return "", err
	}
	var errs []error
	for i := range o.gpuPods {
		pod := builder.Pod(ns, fmt.Sprintf("inference-%d", i)).CPU("4").Memory("16Gi").
			ClaimFromTemplate("accel", "gpu-and-nic").Toleration(gpuTaint, "true", corev1.TaintEffectNoSchedule).Obj()
		errs = append(errs, d.create(ctx, pod))
	}
	for i := range o.cpuPods {
		errs = append(errs, d.create(ctx, builder.Pod(ns, fmt.Sprintf("web-%d", i)).CPU("3").Memory("1Gi").Obj()))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	start := time.Now()
	if err := d.watchInference(ctx, o.gpuPods+o.cpuPods, start); err != nil {
		return "", err
	}
	return d.inferenceSummary(ctx, time.Since(start))
}

// watchInference prints nodes as they register and pods as they start.
func (d *demo) watchInference(ctx context.Context, want int, start time.Time) error {
	seen := map[string]bool{}
	say := func(key, msg string) {
		if !seen[key] {
			seen[key] = true
			fmt.Fprintf(d.o.out, "   +%5.1fs  %s\n", time.Since(start).Seconds(), msg)
		}
	}
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes, err := d.prov.nodes(ctx)
		if err != nil {
			return false, nil
		}
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			say("node/"+name, fmt.Sprintf("node %s added to group %s", name, nodes[name]))
		}
		pods, _, err := d.pods(ctx, "")
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && (strings.HasPrefix(p.Name, "inference-") || strings.HasPrefix(p.Name, "web-")) {
				running++
				say("pod/"+p.Name, fmt.Sprintf("pod %s Running on %s", p.Name, p.Spec.NodeName))
			}
		}
		return running == want, nil
	})
}

// inferenceSummary prints the pods with their nodes and devices, and
// returns the one-line result.
func (d *demo) inferenceSummary(ctx context.Context, took time.Duration) (string, error) {
	pods, _, err := d.pods(ctx, "")
	if err != nil {
		return "", err
	}
	nodes, err := d.prov.nodes(ctx)
	if err != nil {
		return "", err
	}
	perGroup := map[string]int{}
	for _, g := range nodes {
		perGroup[g]++
	}
	var groups []string
	for g, n := range perGroup {
		groups = append(groups, fmt.Sprintf("%s +%d", g, n))
	}
	sort.Strings(groups)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	w := tabwriter.NewWriter(d.o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "   POD\tNODE\tPHASE\tDEVICES")
	for _, p := range pods {
		var devices []string
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName == nil {
				continue
			}
			claim, err := d.client.ResourceV1().ResourceClaims(ns).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil || claim.Status.Allocation == nil {
				continue
			}
			for _, r := range claim.Status.Allocation.Devices.Results {
				devices = append(devices, r.Device)
			}
		}
		fmt.Fprintf(w, "   %s\t%s\t%s\t%s\n", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(devices, ","))
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d pods Running %.1fs after they were created, on %d new node(s) (%s)",
		len(pods), took.Seconds(), len(nodes), strings.Join(groups, ", ")), nil
}
