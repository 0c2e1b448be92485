// Package snapshottest helps tests fill a cluster snapshot.
package snapshottest

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingapi "k8s.io/api/scheduling/v1beta1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Load stores objects of any kind the snapshot holds: pods with a node
// are placed there, pods without one are registered as pending. An object
// the snapshot refuses fails the test.
func Load(tb testing.TB, s snapshot.ClusterSnapshot, objs ...any) {
	tb.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Node:
			err = s.AddNode(o)
		case *v1.Pod:
			if o.Spec.NodeName != "" {
				err = s.AddPod(o, o.Spec.NodeName)
			} else {
				err = s.AddPendingPod(o)
			}
		case *resourceapi.ResourceSlice:
			err = s.SetResourceSlice(o)
		case *resourceapi.DeviceClass:
			err = s.SetDeviceClass(o)
		case *resourceapi.DeviceTaintRule:
			err = s.SetDeviceTaintRule(o)
		case *resourceapi.ResourceClaim:
			err = s.SetResourceClaim(o)
		case *resourceapi.ResourceClaimTemplate:
			err = s.SetResourceClaimTemplate(o)
		case *schedulingapi.PodGroup:
			err = s.SetPodGroup(o)
		case *schedulingv1alpha3.CompositePodGroup:
			err = s.SetCompositePodGroup(o)
		default:
			err = fmt.Errorf("unsupported object %T", o)
		}
		if err != nil {
			tb.Fatalf("load %T: %v", o, err)
		}
	}
}
