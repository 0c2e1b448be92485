package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

// sceneLabel is on every node of a scene's groups; the scene's pods select
// its value (scenes-kwok.yaml).
const sceneLabel = "demo.dra-autoscaler.io/scene"

// sharingGroup is the group of --sharing-config the sharing scene scales.
const sharingGroup = "gpu-mig-7"

// scene is one story: what to look for, and a play that makes it happen,
// checks it and says in one line what happened.
type scene struct {
	name    string
	lookFor string
	// after names the scene whose outcome this one starts from; it is
	// skipped when that one failed.
	after string
	play  func(ctx context.Context) (string, error)
}

type result struct {
	scene   scene
	outcome string
	err     error
	skipped bool
	took    time.Duration
}

// scenes are the demo's scenes in the order they play. Through Cluster
// API only the first plays: the others' groups are the kwok provider's.
func (d *demo) scenes() []scene {
	if d.cfg == nil {
		return []scene{d.inference()}
	}
	return []scene{d.inference(), d.gangInOneRack(), d.gangNoRoom(), d.reservedFirst(),
		d.slicesPacked(), d.noGroupHelps(), d.scaleDown()}
}

// play runs the scenes in order, printing each as it goes.
func (d *demo) play(ctx context.Context, scenes []scene) []result {
	var results []result
	failed := map[string]bool{}
	for i, s := range scenes {
		fmt.Fprintf(d.o.out, "\n== scene %d/%d: %s\n   look for: %s\n", i+1, len(scenes), s.name, s.lookFor)
		r := result{scene: s}
		if s.after != "" && failed[s.after] {
			r.skipped, r.err = true, fmt.Errorf("skipped: it starts from scene %q, which failed", s.after)
		} else {
			start := time.Now()
			sctx, cancel := context.WithTimeout(ctx, d.o.sceneTimeout)
			r.outcome, r.err = s.play(sctx)
			cancel()
			r.took = time.Since(start)
		}
		switch {
		case r.skipped:
			failed[s.name] = true
			fmt.Fprintf(d.o.out, "   result: SKIPPED (%v)\n", r.err)
		case r.err != nil:
			failed[s.name] = true
			fmt.Fprintf(d.o.out, "   result: FAIL %v\n", r.err)
		default:
			fmt.Fprintf(d.o.out, "   result: ok   %s (%.1fs)\n", r.outcome, r.took.Seconds())
		}
		results = append(results, r)
	}
	return results
}

func printSummary(out io.Writer, results []result) {
	fmt.Fprintln(out, "\nSummary")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCENE\tRESULT\tTIME\tWHAT HAPPENED")
	for _, r := range results {
		verdict, what := "ok", r.outcome
		switch {
		case r.skipped:
			verdict, what = "SKIPPED", r.err.Error()
		case r.err != nil:
			verdict, what = "FAIL", firstLine(r.err.Error())
		}
		fmt.Fprintf(w, "%s\t%s\t%.1fs\t%s\n", r.scene.name, verdict, r.took.Seconds(), what)
	}
	_ = w.Flush()
}

// printHints says where to look further: the autoscaler stays up.
func (d *demo) printHints() {
	o := d.o
	cloud := "--cloud-provider=kwok --cloud-config=" + d.cfgPath
	if d.cfg == nil {
		cloud = strings.Join(d.prov.args(), " ")
	}
	fmt.Fprintf(o.out, `
The cluster and the autoscaler (pid %d, log %s) keep running. Look further:
  export KUBECONFIG=%s
  kubectl -n kube-system get configmap cluster-autoscaler-status -o jsonpath='{.data.status}'   # groups, gangs, pods not helped
  curl -s http://%s/metrics | grep ^cluster_autoscaler_                                  # Prometheus metrics
  kubectl -n %s get pods,podgroups -o wide; kubectl get nodes -L %s
  %s explain --kubeconfig=%s %s %s/<pod>   # why a pod is Pending, per node group
  make down                                                                                  # stops the autoscaler and the cluster
`, d.auto.pid, o.logFile, absPath(o.kubeconfig), d.auto.address, ns, kwok.LabelNodeGroup, o.autoscaler, o.kubeconfig, cloud, ns)
}

// mergeConfigs is every group the kwok provider runs in the demo: those of
// --cloud-config, of --scenes-config (and its reservations), and the
// sharing group of --sharing-config, labelled for its scene. The
// provider's records go to the demo namespace, so that the next run's
// cleanup removes them with it.
func mergeConfigs(o options) (*kwok.Config, error) {
	base, err := kwok.LoadConfig(o.cloudConfig)
	if err != nil {
		return nil, err
	}
	scenes, err := kwok.LoadConfig(o.scenesConfig)
	if err != nil {
		return nil, err
	}
	sharing, err := kwok.LoadConfig(o.sharingConfig)
	if err != nil {
		return nil, err
	}
	out := &kwok.Config{StateNamespace: ns, Reservations: append(base.Reservations, scenes.Reservations...)}
	out.NodeGroups = append(append(out.NodeGroups, base.NodeGroups...), scenes.NodeGroups...)
	found := false
	for _, g := range sharing.NodeGroups {
		if g.Name == sharingGroup {
			if g.Template.Labels == nil {
				g.Template.Labels = map[string]string{}
			}
			g.Template.Labels[sceneLabel] = "sharing"
			out.NodeGroups = append(out.NodeGroups, g)
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("%s has no node group %s for the sharing scene", o.sharingConfig, sharingGroup)
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("the demo's merged kwok config: %w", err)
	}
	return out, nil
}

func writeConfig(path string, cfg *kwok.Config) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("# Written by hack/demo: every node group of the demo.\n"), data...), 0o644)
}

// createClasses makes the device classes every scene's claims use, and the
// one-GPU claim template of the gang and reservation scenes.
func createClasses(ctx context.Context, d *demo) error {
	return d.create(ctx,
		builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.DeviceClass("nic").Driver(nicDriver).Obj(),
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
	)
}

// create creates each object in the cluster.
func (d *demo) create(ctx context.Context, objs ...runtime.Object) error {
	opts := metav1.CreateOptions{}
	c := d.client
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.Pod:
			_, err = c.CoreV1().Pods(o.Namespace).Create(ctx, o, opts)
		case *schedulingv1beta1.PodGroup:
			_, err = c.SchedulingV1beta1().PodGroups(o.Namespace).Create(ctx, o, opts)
		case *resourceapi.DeviceClass:
			_, err = c.ResourceV1().DeviceClasses().Create(ctx, o, opts)
		case *resourceapi.ResourceClaimTemplate:
			_, err = c.ResourceV1().ResourceClaimTemplates(o.Namespace).Create(ctx, o, opts)
		default:
			err = fmt.Errorf("the demo does not create %T", obj)
		}
		if err != nil {
			return fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	return nil
}

// scenePod is a pod of scene: it selects the scene's nodes and tolerates
// the GPU taint all scene groups carry.
func scenePod(scene, name string) *builder.PodBuilder {
	return builder.Pod(ns, name).CPU("1").Memory("1Gi").NodeSelector(sceneLabel, scene).
		Toleration(gpuTaint, "true", corev1.TaintEffectNoSchedule)
}

// groupNodes lists the nodes of a kwok group.
func (d *demo) groupNodes(ctx context.Context, group string) ([]corev1.Node, error) {
	list, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.LabelNodeGroup + "=" + group})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// counts returns the node count of each group, and says it.
func (d *demo) counts(ctx context.Context, groups ...string) ([]int, string, error) {
	var n []int
	var seen []string
	for _, g := range groups {
		nodes, err := d.groupNodes(ctx, g)
		if err != nil {
			return nil, "", err
		}
		n = append(n, len(nodes))
		seen = append(seen, fmt.Sprintf("%s=%d", g, len(nodes)))
	}
	return n, strings.Join(seen, " "), nil
}

// pods lists the pods whose names start with prefix.
func (d *demo) pods(ctx context.Context, prefix string) ([]corev1.Pod, string, error) {
	list, err := d.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	var out []corev1.Pod
	var seen []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) && p.DeletionTimestamp == nil {
			out = append(out, p)
			seen = append(seen, fmt.Sprintf("%s: %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
		}
	}
	return out, strings.Join(seen, "; "), nil
}

// waitRunning waits until n pods named prefix* run, and returns them.
func (d *demo) waitRunning(ctx context.Context, prefix string, n int) ([]corev1.Pod, error) {
	var got []corev1.Pod
	err := poll.Until(ctx, d.o.sceneTimeout, fmt.Sprintf("%d pods %s* Running", n, prefix), func(ctx context.Context) (bool, string, error) {
		pods, seen, err := d.pods(ctx, prefix)
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		got = pods
		return running == n && len(pods) == n, seen, err
	})
	return got, err
}

// events are the messages of the events with reason about the object name
// in the demo namespace.
func (d *demo) events(ctx context.Context, name, reason string) ([]string, error) {
	list, err := d.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out, nil
}

// waitEvent waits for an event with reason on name whose message holds
// want, and returns the message.
func (d *demo) waitEvent(ctx context.Context, name, reason, want string) (string, error) {
	var found string
	err := poll.Until(ctx, d.o.sceneTimeout, fmt.Sprintf("a %s event on %s saying %q", reason, name, want), func(ctx context.Context) (bool, string, error) {
		msgs, err := d.events(ctx, name, reason)
		for _, m := range msgs {
			if strings.Contains(m, want) {
				found = m
				return true, m, nil
			}
		}
		return false, fmt.Sprintf("%q", msgs), err
	})
	return found, err
}

// metricValue is the value of the first sample of name whose labels
// contain every one of labels, -1 when there is none.
func metricValue(exposition, name string, labels ...string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || !(series == name || strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(series, l)
		}
		if v, err := strconv.ParseFloat(value, 64); match && err == nil {
			return v
		}
	}
	return -1
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func absPath(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}
