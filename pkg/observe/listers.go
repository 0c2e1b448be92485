package observe

import (
	"errors"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	compositelisters "k8s.io/client-go/listers/scheduling/v1alpha3"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

type listers struct {
	nodes      corelisters.NodeLister
	pods       corelisters.PodLister
	slices     resourcelisters.ResourceSliceLister
	claims     resourcelisters.ResourceClaimLister
	templates  resourcelisters.ResourceClaimTemplateLister
	classes    resourcelisters.DeviceClassLister
	taintRules resourcelisters.DeviceTaintRuleLister    // nil when not served
	podGroups  schedulinglisters.PodGroupLister         // nil when not served
	workloads  schedulinglisters.WorkloadLister         // nil when not served
	composites compositelisters.CompositePodGroupLister // nil when not served
	daemonSets appslisters.DaemonSetLister
	claimsPV   corelisters.PersistentVolumeClaimLister
	csiNodes   storagelisters.CSINodeLister
}

// newListers registers the informers (the factory starts only those that
// were asked for).
func newListers(f informers.SharedInformerFactory, served Served) listers {
	l := listers{
		nodes:      f.Core().V1().Nodes().Lister(),
		pods:       f.Core().V1().Pods().Lister(),
		slices:     f.Resource().V1().ResourceSlices().Lister(),
		claims:     f.Resource().V1().ResourceClaims().Lister(),
		templates:  f.Resource().V1().ResourceClaimTemplates().Lister(),
		classes:    f.Resource().V1().DeviceClasses().Lister(),
		daemonSets: f.Apps().V1().DaemonSets().Lister(),
		claimsPV:   f.Core().V1().PersistentVolumeClaims().Lister(),
		csiNodes:   f.Storage().V1().CSINodes().Lister(),
	}
	if served.DeviceTaintRules {
		l.taintRules = f.Resource().V1().DeviceTaintRules().Lister()
	}
	if served.Workloads {
		l.podGroups = f.Scheduling().V1beta1().PodGroups().Lister()
		l.workloads = f.Scheduling().V1beta1().Workloads().Lister()
	}
	if served.Composites {
		l.composites = f.Scheduling().V1alpha3().CompositePodGroups().Lister()
	}
	return l
}

func (l *listers) list() (*ClusterState, error) {
	s := &ClusterState{GangsServed: l.podGroups != nil && l.workloads != nil}
	var errs []error
	collect := func(err error) { errs = append(errs, err) }
	var err error
	s.Nodes, err = l.nodes.List(everything)
	collect(err)
	s.Pods, err = l.pods.List(everything)
	collect(err)
	s.ResourceSlices, err = l.slices.List(everything)
	collect(err)
	s.ResourceClaims, err = l.claims.List(everything)
	collect(err)
	s.ResourceClaimTemplates, err = l.templates.List(everything)
	collect(err)
	s.DeviceClasses, err = l.classes.List(everything)
	collect(err)
	s.DaemonSets, err = l.daemonSets.List(everything)
	collect(err)
	csiNodes, err := l.csiNodes.List(everything)
	collect(err)
	for _, n := range csiNodes {
		if s.CSINodes == nil {
			s.CSINodes = make(map[string]*storagev1.CSINode, len(csiNodes))
		}
		s.CSINodes[n.Name] = n
	}
	pvcs, err := l.claimsPV.List(everything)
	collect(err)
	for _, c := range pvcs {
		if node := c.Annotations[annSelectedNode]; node != "" && c.Spec.VolumeName == "" {
			if s.VolumeBindings == nil {
				s.VolumeBindings = map[string]string{}
			}
			s.VolumeBindings[c.Namespace+"/"+c.Name] = node
		}
	}
	if l.taintRules != nil {
		s.DeviceTaintRules, err = l.taintRules.List(everything)
		collect(err)
	}
	if l.podGroups != nil {
		s.PodGroups, err = l.podGroups.List(everything)
		collect(err)
		s.Workloads, err = l.workloads.List(everything)
		collect(err)
	}
	if l.composites != nil {
		s.CompositePodGroups, err = l.composites.List(everything)
		collect(err)
	}
	return s, errors.Join(errs...)
}
