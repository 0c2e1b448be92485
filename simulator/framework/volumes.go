package framework

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// VolumePlugins are the filters whose rejections DescribeVolumes explains.
var VolumePlugins = map[string]bool{names.VolumeBinding: true, names.VolumeZone: true, names.VolumeRestrictions: true}

// DescribeVolumes says in a user's words what about the pod's claims keeps
// it off node, after a volume plugin rejected it there: a bound volume in
// another zone, a class that provisions only elsewhere, a claim that does
// not exist or is not bound. It reads the same informers the plugins read;
// it only describes the plugin's verdict, it does not judge again. ""
// when nothing is found to say.
func (r *Runner) DescribeVolumes(pod *v1.Pod, node *v1.Node) string {
	if r.informers == nil || node == nil {
		return ""
	}
	claims := r.informers.Core().V1().PersistentVolumeClaims().Lister()
	volumes := r.informers.Core().V1().PersistentVolumes().Lister()
	classes := r.informers.Storage().V1().StorageClasses().Lister()
	var out []string
	for _, vol := range pod.Spec.Volumes {
		var name string
		switch {
		case vol.PersistentVolumeClaim != nil:
			name = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			name = pod.Name + "-" + vol.Name
		default:
			continue
		}
		claim, err := claims.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			out = append(out, fmt.Sprintf("claim %s does not exist", name))
			continue
		}
		if claim.Spec.VolumeName != "" {
			pv, err := volumes.Get(claim.Spec.VolumeName)
			if err != nil {
				out = append(out, fmt.Sprintf("claim %s is bound to PV %s, which does not exist", name, claim.Spec.VolumeName))
				continue
			}
			if where := pvElsewhere(pv, node); where != "" {
				out = append(out, fmt.Sprintf("PV %s (claim %s) %s", pv.Name, name, where))
			}
			continue
		}
		className := ""
		if claim.Spec.StorageClassName != nil {
			className = *claim.Spec.StorageClassName
		}
		class, err := classes.Get(className)
		switch {
		case className == "" || err != nil:
			out = append(out, fmt.Sprintf("claim %s is not bound and has no StorageClass %q to provision it", name, className))
		case class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer:
			out = append(out, fmt.Sprintf("claim %s is not bound yet (StorageClass %s binds immediately)", name, class.Name))
		case len(class.AllowedTopologies) > 0 && !v1helper.MatchTopologySelectorTerms(class.AllowedTopologies, labels.Set(node.Labels)):
			var keys []string
			var want []string
			for _, term := range class.AllowedTopologies {
				var parts []string
				for _, e := range term.MatchLabelExpressions {
					parts = append(parts, place(e.Key, e.Values))
					keys = append(keys, e.Key)
				}
				want = append(want, strings.Join(parts, ", "))
			}
			out = append(out, fmt.Sprintf("StorageClass %s (claim %s) provisions only in %s; %s", class.Name, name,
				strings.Join(want, " or "), nodeIn(node, keys)))
		}
	}
	return strings.Join(out, "; ")
}

// pvElsewhere says where pv is when node is not there: its node affinity,
// or the zone and region labels VolumeZone reads; "" when node matches.
func pvElsewhere(pv *v1.PersistentVolume, node *v1.Node) string {
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		if ok, _ := corev1helpers.MatchNodeSelectorTerms(node, a.Required); !ok {
			var keys, terms []string
			for _, term := range a.Required.NodeSelectorTerms {
				var parts []string
				for _, e := range term.MatchExpressions {
					parts = append(parts, place(e.Key, e.Values))
					keys = append(keys, e.Key)
				}
				terms = append(terms, strings.Join(parts, ", "))
			}
			return "is in " + strings.Join(terms, " or ") + "; " + nodeIn(node, keys)
		}
	}
	var keys, parts []string
	for _, key := range []string{v1.LabelTopologyZone, v1.LabelTopologyRegion, v1.LabelFailureDomainBetaZone, v1.LabelFailureDomainBetaRegion} {
		value, ok := pv.Labels[key]
		if !ok {
			continue
		}
		// A volume in several zones lists them joined by "__".
		values := strings.Split(value, "__")
		if !slices.Contains(values, node.Labels[key]) {
			parts, keys = append(parts, place(key, values)), append(keys, key)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "is in " + strings.Join(parts, ", ") + "; " + nodeIn(node, keys)
}

// place names a topology as a user says it: "zone b", "region eu or us",
// "rack in (r1, r2)".
func place(key string, values []string) string {
	switch key {
	case v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone:
		return "zone " + strings.Join(values, " or ")
	case v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion:
		return "region " + strings.Join(values, " or ")
	case v1.LabelHostname:
		return "node " + strings.Join(values, " or ")
	}
	return key + " in (" + strings.Join(values, ", ") + ")"
}

// nodeIn says where node is for keys: "the node is in zone a".
func nodeIn(node *v1.Node, keys []string) string {
	sort.Strings(keys)
	var parts []string
	for i, key := range keys {
		if i > 0 && keys[i-1] == key {
			continue
		}
		if value, ok := node.Labels[key]; ok {
			parts = append(parts, "in "+place(key, []string{value}))
		} else {
			parts = append(parts, "without a "+key+" label")
		}
	}
	return "the node is " + strings.Join(parts, ", ")
}
