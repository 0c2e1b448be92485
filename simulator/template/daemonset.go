package template

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// DaemonSetPods returns the pods of daemonSets that would run on a new node
// of the template, ready to be appended to t.Pods. The answer is the real
// scheduler's: each DaemonSet's pod, as the DaemonSet controller would
// create it (template, default daemon tolerations, controller reference),
// goes through a full scheduling cycle on an instantiated node holding the
// template's own pods and the DaemonSet pods accepted before it
// (DaemonSets in namespace/name order), inside a snapshot fork that is
// reverted before returning. DaemonSets whose pod the template already
// has are skipped. The returned pods are unbound-but-placed like the
// template's (spec.nodeName is the template node's name, no UID).
//
// The DaemonSet's own node selector and affinity stay on the pod (the
// controller checks them before creating a pod and only then pins it by
// node name), so the scheduler checks them here.
func DaemonSetPods(ctx context.Context, runner *framework.Runner, t *cloudprovider.NodeTemplate, daemonSets []*appsv1.DaemonSet) (_ []*v1.Pod, err error) {
	if runner == nil {
		return nil, fmt.Errorf("daemonset pods: nil runner")
	}
	if t == nil || t.Node == nil {
		return nil, fmt.Errorf("daemonset pods: template without a node")
	}
	logger := klog.FromContext(ctx)
	snap := runner.Snapshot()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("daemonset pods: revert snapshot: %w", rerr)
		}
	}()
	nodeName, err := addInstance(ctx, runner, t, "daemonset-check-"+t.Node.Name)
	if err != nil {
		return nil, fmt.Errorf("daemonset pods for template %s: %w", t.Node.Name, err)
	}

	sorted := slices.DeleteFunc(slices.Clone(daemonSets), func(ds *appsv1.DaemonSet) bool { return ds == nil })
	slices.SortFunc(sorted, func(a, b *appsv1.DaemonSet) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var out []*v1.Pod
	for _, ds := range sorted {
		if hasPodOf(t.Pods, ds) {
			continue
		}
		pod := daemonPod(ds)
		check := pod.DeepCopy()
		check.UID = hypotheticalUID("pod", ds.Namespace, pod.Name+"-"+nodeName)
		check.Spec.NodeName = ""
		placement, err := runner.SchedulePod(ctx, check, []string{nodeName})
		if err != nil {
			return nil, fmt.Errorf("daemonset %s/%s on template %s: %w", ds.Namespace, ds.Name, t.Node.Name, err)
		}
		if placement.Node == "" {
			if len(placement.Results) > 0 {
				r := placement.Results[0]
				logger.V(4).Info("DaemonSet pod would not run on template node", "daemonSet", klog.KObj(ds), "template", t.Node.Name, "plugin", r.Plugin, "reason", r.Message)
			}
			continue
		}
		pod.Spec.NodeName = t.Node.Name
		out = append(out, pod)
	}
	logger.V(3).Info("DaemonSet pods for template", "template", t.Node.Name, "daemonSets", len(sorted), "pods", len(out))
	return out, nil
}

// addInstance adds an instance of t under a name based on base that is not
// in the snapshot yet, with its slices and pods, and returns the name.
func addInstance(ctx context.Context, runner *framework.Runner, t *cloudprovider.NodeTemplate, base string) (string, error) {
	snap := runner.Snapshot()
	name := base
	for i := 1; ; i++ {
		if _, err := snap.Get(name); err != nil {
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, AddInstance(ctx, runner, t, name)
}

// daemonPod builds the pod the DaemonSet controller creates for a node
// (pkg/controller/daemon: the pod template with the generation label and
// the default daemon tolerations, the DaemonSet as controller), named
// after the DaemonSet so that Instantiate names it "<ds>-<node>".
func daemonPod(ds *appsv1.DaemonSet) *v1.Pod {
	// A malformed generation annotation only loses a label, as in the
	// controller's own pod template.
	generation, _ := daemonutil.GetTemplateGeneration(ds)
	tmpl := daemonutil.CreatePodTemplate(ds.Spec.Template, generation, "")
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ds.Namespace,
			Name:            ds.Name,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: tmpl.Spec,
	}
}

// hasPodOf reports whether pods already hold a pod controlled by ds
// (matched by UID, or by namespace and name when either UID is unknown).
func hasPodOf(pods []*v1.Pod, ds *appsv1.DaemonSet) bool {
	for _, p := range pods {
		owner := metav1.GetControllerOfNoCopy(p)
		if owner == nil || owner.Kind != "DaemonSet" || p.Namespace != ds.Namespace {
			continue
		}
		if (owner.UID != "" && owner.UID == ds.UID) || ((owner.UID == "" || ds.UID == "") && owner.Name == ds.Name) {
			return true
		}
	}
	return false
}
