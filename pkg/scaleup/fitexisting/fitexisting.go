// Package fitexisting drops the pending pods that fit capacity the
// cluster already has or has already asked for (nodes still being
// provisioned): the scheduler will place them without new nodes, and
// counting them again would scale up twice.
package fitexisting

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Fit places, in the runner's snapshot, every pod that fits a candidate
// node, and returns the rest in their order plus where the others went.
// Once a pod of an equivalence class fits nowhere, the later pods of that
// class are not tried: the cluster only gets fuller as pods are placed.
// classOf returns "" for pods that must always be tried (pod affinity can
// make a placement enable the next).
func Fit(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string, classOf func(*corev1.Pod) string) ([]*corev1.Pod, map[*corev1.Pod]string, error) {
	return FitRanked(ctx, runner, pods, candidates, classOf, nil)
}

// RankFunc orders the candidates for one pod, preferred first (see
// pkg/placement); nil keeps the given order.
type RankFunc func(ctx context.Context, pod *corev1.Pod, candidates []string) ([]string, error)

// maxSweeps bounds the passes over the pods: a pod with inter-pod
// affinity (class "") may fit only once a pod after it in the order is
// placed, as it would once the scheduler binds that pod, so such pods are
// tried again while a sweep places anything.
const maxSweeps = 3

// FitRanked is Fit with each pod's candidates ordered by rank.
func FitRanked(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string, classOf func(*corev1.Pod) string, rank RankFunc) ([]*corev1.Pod, map[*corev1.Pod]string, error) {
	placed := map[*corev1.Pod]string{}
	rest := pods
	for sweep := 0; sweep < maxSweeps; sweep++ {
		before := len(placed)
		var err error
		if rest, err = fitSweep(ctx, runner, rest, candidates, classOf, rank, placed, sweep > 0); err != nil {
			return nil, nil, err
		}
		if len(placed) == before || len(rest) == 0 {
			break
		}
	}
	return rest, placed, nil
}

// fitSweep tries pods in order, recording fits in placed, and returns the
// rest in order. A retry tries only the pods that are always tried.
func fitSweep(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string, classOf func(*corev1.Pod) string,
	rank RankFunc, placed map[*corev1.Pod]string, retry bool) ([]*corev1.Pod, error) {
	logger := klog.FromContext(ctx)
	var rest []*corev1.Pod
	hopeless := map[string]bool{}
	for _, pod := range pods {
		class := classOf(pod)
		if (class != "" && hopeless[class]) || (retry && class != "") {
			rest = append(rest, pod)
			continue
		}
		order := candidates
		if rank != nil {
			var err error
			if order, err = rank(ctx, pod, candidates); err != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
		p, err := runner.SchedulePod(ctx, pod, order)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if p.Node == "" {
			if class != "" {
				hopeless[class] = true
			}
			rest = append(rest, pod)
			continue
		}
		placed[pod] = p.Node
		logger.V(4).Info("Pod fits existing or upcoming capacity", "pod", klog.KObj(pod), "node", p.Node)
	}
	return rest, nil
}
