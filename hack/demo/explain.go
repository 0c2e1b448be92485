package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

// splitGroup's nodes have GPUs and NICs, never on one PCIe root
// (scenes-kwok.yaml).
const splitGroup = "gpu-split"

func (d *demo) noGroupHelps() scene {
	return scene{
		name: "a pod no group can help",
		lookFor: "a pod pairing a GPU with the NIC on its PCIe root, for nodes of gpu-split, whose GPUs and NICs never share a root: " +
			"no node added; `dra-autoscaler explain` says, per group, what is short",
		play: d.playExplain,
	}
}

func (d *demo) playExplain(ctx context.Context) (string, error) {
	tmpl := builder.ClaimTemplate(ns, "gpu-nic-pair").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj()
	const pod = "pair"
	if err := d.create(ctx, tmpl, scenePod("explain", pod).ClaimFromTemplate("accel", "gpu-nic-pair").Obj()); err != nil {
		return "", err
	}
	// explain answers for a pod the scheduler has tried; the event says
	// the running autoscaler has looked at it too.
	if err := poll.Until(ctx, d.o.sceneTimeout, pod+" unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := d.client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, c.Message, nil
			}
		}
		return false, string(p.Status.Phase), nil
	}); err != nil {
		return "", err
	}
	if _, err := d.waitEvent(ctx, pod, "NotTriggerScaleUp", splitGroup); err != nil {
		return "", err
	}
	args := append([]string{"explain", "--kubeconfig=" + d.o.kubeconfig, "--feature-gates=" + d.o.featureGates},
		d.prov.args()...)
	args = append(args, "-o", "json", ns+"/"+pod)
	fmt.Fprintf(d.o.out, "   $ %s %s\n", d.o.autoscaler, strings.Join(args, " "))
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, d.o.autoscaler, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("explain: %v\n%s", err, fileTailOf(stderr.String(), 20))
	}
	var rep explain.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return "", fmt.Errorf("explain -o json: %w\n%s", err, stdout.String())
	}
	// The table explain prints without -o json, indented.
	var table bytes.Buffer
	if err := explain.Write(&table, &rep, "table"); err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimRight(table.String(), "\n"), "\n") {
		fmt.Fprintf(d.o.out, "   | %s\n", line)
	}
	var verdict *explain.GroupVerdict
	for i := range rep.NodeGroups {
		g := &rep.NodeGroups[i]
		if g.Verdict == explain.VerdictScaleUp {
			return "", fmt.Errorf("explain says group %s would help: %+v", g.NodeGroup, g)
		}
		if g.NodeGroup == splitGroup {
			verdict = g
		}
	}
	if verdict == nil || verdict.Verdict != explain.VerdictCannotHelp || verdict.Reason != "DynamicResources" || !strings.Contains(verdict.Constraint, pcieRoot) {
		return "", fmt.Errorf("explain for %s: %+v, want cannot-help for DynamicResources blaming the %s constraint", splitGroup, verdict, pcieRoot)
	}
	if counts, seen, err := d.counts(ctx, splitGroup); err != nil || counts[0] != 0 {
		return "", fmt.Errorf("nodes %s (%v), want none added to %s", seen, err, splitGroup)
	}
	return fmt.Sprintf("no node added; explain: %s cannot help: %s", splitGroup, verdict.Constraint), nil
}

func fileTailOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
