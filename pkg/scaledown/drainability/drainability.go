// Package drainability decides, pod by pod, what removing a node would do
// to it: the pod goes with the node (DaemonSet and mirror pods, finished
// pods), must move elsewhere, or blocks the removal. The rules and their
// names are the upstream cluster autoscaler's, so a user reading "why is
// this node not removed" finds the words they know.
package drainability

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Annotations users put on pods and nodes.
const (
	// SafeToEvictAnnotation "true" lets a pod be evicted whatever the
	// other rules say (PodDisruptionBudgets still apply); "false" keeps
	// its node.
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// SafeToEvictLocalVolumesAnnotation lists, comma-separated, the
	// local volumes whose loss is fine.
	SafeToEvictLocalVolumesAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
)

// Reasons a pod blocks the removal of its node (upstream's names).
const (
	NotReplicated          = "NotReplicated"
	ControllerNotFound     = "ControllerNotFound"
	LocalStorageRequested  = "LocalStorageRequested"
	NotSafeToEvict         = "NotSafeToEvictAnnotation"
	UnmovableKubeSystemPod = "UnmovableKubeSystemPod"
	NotEnoughPdb           = "NotEnoughPdb"
	RunningGangMember      = "RunningGangMember"
	// TerminatingOnUnreadyNode is ours: a pod being deleted on a node
	// that is not Ready may still run there (a partition, not a dead
	// machine), and removing the node would end it for sure.
	TerminatingOnUnreadyNode = "TerminatingPodOnUnreadyNode"
)

// Verdict is what removing the node does to one pod.
type Verdict int

const (
	// Stays: the pod goes with the node (DaemonSet, mirror, finished).
	Stays Verdict = iota
	// Moves: the pod is evicted and must fit elsewhere.
	Moves
	// Blocks: the node cannot be removed because of this pod.
	Blocks
)

// Rules are the options of the pod rules.
type Rules struct {
	// SkipNodesWithLocalStorage keeps nodes with pods using emptyDir or
	// hostPath volumes (--skip-nodes-with-local-storage).
	SkipNodesWithLocalStorage bool
	// SkipNodesWithSystemPods keeps nodes with kube-system pods that are
	// not DaemonSet pods and have no PodDisruptionBudget
	// (--skip-nodes-with-system-pods).
	SkipNodesWithSystemPods bool
	// SkipNodesWithCustomControllerPods keeps nodes with pods whose
	// controller is none of the built-in ones that recreate evicted pods
	// elsewhere (--skip-nodes-with-custom-controller-pods).
	SkipNodesWithCustomControllerPods bool
	// Owners, when set, tells whether a pod's controller still exists;
	// a pod whose controller is gone would not be recreated once evicted.
	Owners OwnerLookup
}

// OwnerLookup tells whether the controller ref in namespace exists; known
// is false when it cannot tell (a kind it does not watch).
type OwnerLookup func(namespace string, ref *metav1.OwnerReference) (exists, known bool)

// Outcome is the verdict on one pod, with the blocking reason and, for bad
// input (a malformed annotation), a warning to tell the pod's owner.
type Outcome struct {
	Verdict Verdict
	Reason  string
	Detail  string
	Warning string
}

// Check applies the rules to a pod. hasPDB tells whether a
// PodDisruptionBudget covers the pod (a kube-system pod with one may move).
// PodDisruptionBudget headroom and gangs are checked by the caller, across
// pods: they depend on the other pods moving in the same pass.
func (r Rules) Check(pod *corev1.Pod, hasPDB bool) Outcome {
	return r.CheckOn(pod, hasPDB, true)
}

// CheckOn is Check for a pod of a node that is Ready or not: on a node
// that is not Ready, a pod being deleted is work all the same (its
// kubelet could not confirm it ended).
func (r Rules) CheckOn(pod *corev1.Pod, hasPDB, nodeReady bool) Outcome {
	if !nodeReady && TerminatingUnconfirmed(pod) {
		return Outcome{Verdict: Blocks, Reason: TerminatingOnUnreadyNode,
			Detail: fmt.Sprintf("pod %s/%s is terminating on a node that is not Ready: it may still run there", pod.Namespace, pod.Name)}
	}
	if GoesWithNode(pod) {
		return Outcome{Verdict: Stays}
	}
	safe, warning := safeToEvict(pod)
	switch safe {
	case annotationTrue:
		return Outcome{Verdict: Moves}
	case annotationFalse, annotationMalformed:
		return Outcome{Verdict: Blocks, Reason: NotSafeToEvict,
			Detail: fmt.Sprintf("pod %s/%s has %s=%q", pod.Namespace, pod.Name, SafeToEvictAnnotation, pod.Annotations[SafeToEvictAnnotation]), Warning: warning}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return Outcome{Verdict: Blocks, Reason: NotReplicated, Detail: fmt.Sprintf("pod %s/%s has no controller", pod.Namespace, pod.Name)}
	}
	if r.SkipNodesWithCustomControllerPods && !builtinController(ref) {
		return Outcome{Verdict: Blocks, Reason: NotReplicated,
			Detail: fmt.Sprintf("pod %s/%s is controlled by %s %s, not a ReplicaSet, ReplicationController, Job or StatefulSet", pod.Namespace, pod.Name, ref.Kind, ref.Name)}
	}
	if r.Owners != nil {
		if exists, known := r.Owners(pod.Namespace, ref); known && !exists {
			return Outcome{Verdict: Blocks, Reason: ControllerNotFound,
				Detail: fmt.Sprintf("pod %s/%s: its controller %s %s no longer exists", pod.Namespace, pod.Name, ref.Kind, ref.Name)}
		}
	}
	if r.SkipNodesWithSystemPods && pod.Namespace == metav1.NamespaceSystem && !hasPDB {
		return Outcome{Verdict: Blocks, Reason: UnmovableKubeSystemPod,
			Detail: fmt.Sprintf("kube-system pod %s has no PodDisruptionBudget", pod.Name)}
	}
	if r.SkipNodesWithLocalStorage {
		if vol := localVolume(pod); vol != "" {
			return Outcome{Verdict: Blocks, Reason: LocalStorageRequested,
				Detail: fmt.Sprintf("pod %s/%s uses local volume %s", pod.Namespace, pod.Name, vol)}
		}
	}
	return Outcome{Verdict: Moves}
}

type annotationValue int

const (
	annotationUnset annotationValue = iota
	annotationTrue
	annotationFalse
	annotationMalformed
)

// safeToEvict reads the annotation. A value that is not a boolean is
// taken as "false": a user who wrote something meant to say something,
// and keeping a node is the mistake that costs least.
func safeToEvict(pod *corev1.Pod) (annotationValue, string) {
	v, ok := pod.Annotations[SafeToEvictAnnotation]
	if !ok {
		return annotationUnset, ""
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return annotationMalformed, fmt.Sprintf("annotation %s=%q is not true or false; the pod is treated as not safe to evict", SafeToEvictAnnotation, v)
	}
	if b {
		return annotationTrue, ""
	}
	return annotationFalse, ""
}

// localVolume returns the first emptyDir (not in memory) or hostPath
// volume not listed in the safe-to-evict-local-volumes annotation.
func localVolume(pod *corev1.Pod) string {
	safe := map[string]bool{}
	if v := pod.Annotations[SafeToEvictLocalVolumesAnnotation]; v != "" {
		for _, name := range strings.Split(v, ",") {
			safe[strings.TrimSpace(name)] = true
		}
	}
	for _, vol := range pod.Spec.Volumes {
		local := vol.HostPath != nil || (vol.EmptyDir != nil && vol.EmptyDir.Medium != corev1.StorageMediumMemory)
		if local && !safe[vol.Name] {
			return vol.Name
		}
	}
	return ""
}

// GoesWithNode tells pods that need no new home: mirror and DaemonSet
// pods (they belong to the node), finished pods and pods already being
// deleted.
func GoesWithNode(pod *corev1.Pod) bool {
	return isMirror(pod) || isDaemonSetPod(pod) || isTerminal(pod) || pod.DeletionTimestamp != nil
}

// TerminatingUnconfirmed tells a pod being deleted that has not finished
// and is neither a mirror nor a DaemonSet pod (those go with their node
// in any case): on a node whose kubelet is not heard from, nothing says
// its containers stopped.
func TerminatingUnconfirmed(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && !isTerminal(pod) && !isMirror(pod) && !isDaemonSetPod(pod)
}

// builtinController tells the controllers known to recreate an evicted
// pod (DaemonSet pods go with their node and never get here).
func builtinController(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	group := gv.Group
	switch ref.Kind {
	case "ReplicaSet", "StatefulSet":
		return group == "apps"
	case "Job":
		return group == "batch"
	case "ReplicationController":
		return group == ""
	}
	return false
}

func isMirror(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	c := metav1.GetControllerOfNoCopy(pod)
	return c != nil && c.Kind == "DaemonSet"
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
