package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// managedLabelPrefixes are the label prefixes Cluster API copies from a
// Machine to its Node (and their subdomains).
var managedLabelPrefixes = []string{"node-role.kubernetes.io", "node-restriction.kubernetes.io", "node.cluster.x-k8s.io"}

// TemplateNodeInfo builds the node a new Machine of the group would
// register as, for scale from zero: capacity from the infrastructure
// template's status.capacity overridden by upstream's capacity
// annotations; labels and taints from the Machine template and the
// annotations; ResourceSlices from the DRA template ConfigMap (or,
// without one, upstream's dra-driver + gpu-count). Without cpu and memory
// capacity it returns an error wrapping ErrNotImplemented: the group then
// takes its template from a real node only.
func (g *nodeGroup) TemplateNodeInfo() (*cloudprovider.NodeTemplate, error) {
	st, err := g.current()
	if err != nil {
		return nil, err
	}
	t, err := g.p.buildTemplate(context.Background(), st)
	if err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented) {
		g.p.warn(st.obj, ReasonInvalidTemplate, "No template for scale from zero: "+err.Error())
	} else {
		g.p.forgetWarning(ReasonInvalidTemplate, st.obj)
	}
	if err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.id, err)
	}
	return t, nil
}

// errNoCapacity says the group cannot describe a node by itself.
var errNoCapacity = fmt.Errorf("no cpu and memory capacity for scale from zero (annotations %s and %s, or the infrastructure template's status.capacity): %w",
	keyCPU, keyMemory, cloudprovider.ErrNotImplemented)

func (p *Provider) buildTemplate(ctx context.Context, st *groupState) (*cloudprovider.NodeTemplate, error) {
	u := st.obj
	ann := u.GetAnnotations()
	ref := st.kind + " " + u.GetNamespace() + "/" + u.GetName()
	capacity, err := annotationCapacity(ann)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	infra, infraErr := p.infraTemplate(ctx, u)
	capacityFrom := corev1.ResourceList{}
	if infra != nil {
		raw, _, _ := unstructured.NestedStringMap(infra.Object, "status", "capacity")
		for k, v := range raw {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("%s: infrastructure template %s status.capacity[%s]=%q: %v", ref, infra.GetName(), k, v, err)
			}
			capacityFrom[corev1.ResourceName(k)] = q
		}
	}
	for k, v := range capacity {
		capacityFrom[k] = v // the annotations win
	}
	if _, ok := capacityFrom[corev1.ResourcePods]; !ok {
		capacityFrom[corev1.ResourcePods] = *resource.NewQuantity(defaultMaxPods, resource.DecimalSI)
	}
	_, hasCPU := capacityFrom[corev1.ResourceCPU]
	_, hasMem := capacityFrom[corev1.ResourceMemory]
	if !hasCPU || !hasMem {
		if infraErr != nil {
			return nil, fmt.Errorf("%s: %w (infrastructure template: %v)", ref, errNoCapacity, infraErr)
		}
		return nil, fmt.Errorf("%s: %w", ref, errNoCapacity)
	}
	name := templateNodeName(u.GetName())
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: p.templateLabels(u, infra, name)},
		Spec:       corev1.NodeSpec{Taints: templateTaints(u)},
		Status: corev1.NodeStatus{
			Capacity: capacityFrom, Allocatable: capacityFrom.DeepCopy(), Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "TemplateNode"}},
		},
	}
	node.Status.NodeInfo.Architecture = node.Labels[corev1.LabelArchStable]
	node.Status.NodeInfo.OperatingSystem = node.Labels[corev1.LabelOSStable]
	if err := launchChoices(ann, node); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	slices, err := p.templateSlices(u, ann, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return &cloudprovider.NodeTemplate{Node: node, ResourceSlices: slices}, nil
}

// launchChoices copies onto the template Node what the scalable
// resource's annotations say the infrastructure decides per launch
// (issue 41, docs/providers/clusterapi.md): the topology labels it gives
// each request (or unit) a fresh value of, and the unit size. A unit
// size that is not a positive integer is an error; a per-request label
// the Machine template fixes a value for is one too (the two cannot both
// hold).
func launchChoices(ann map[string]string, node *corev1.Node) error {
	for _, k := range []string{cloudprovider.AnnotationTopologyPerRequest, cloudprovider.AnnotationUnitSize} {
		if v, ok := ann[k]; ok {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[k] = v
		}
	}
	t := &cloudprovider.NodeTemplate{Node: node}
	if _, err := t.UnitSize(); err != nil {
		return err
	}
	for k := range strings.SplitSeq(ann[cloudprovider.AnnotationTopologyPerRequest], ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if v, fixed := node.Labels[k]; fixed {
			return fmt.Errorf("annotation %s names %s, which the Machine template fixes (%q)", cloudprovider.AnnotationTopologyPerRequest, k, v)
		}
	}
	return nil
}

// annotationCapacity reads upstream's capacity annotations: cpu, memory,
// ephemeral-disk (quantities), maxPods, gpu-count (integers), gpu-type
// (the extended resource the GPUs are counted under, only with a count).
func annotationCapacity(ann map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	var errs []error
	for key, name := range map[string]corev1.ResourceName{keyCPU: corev1.ResourceCPU, keyMemory: corev1.ResourceMemory, keyDisk: corev1.ResourceEphemeralStorage} {
		q, err := quantity(ann, key)
		errs = append(errs, err)
		if err == nil && !q.IsZero() {
			out[name] = q
		}
	}
	pods, err := integer(ann, keyMaxPods)
	errs = append(errs, err)
	if pods > 0 {
		out[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	}
	gpus, err := integer(ann, keyGPUCount)
	errs = append(errs, err)
	if typ := ann[keyGPUType]; gpus > 0 && typ != "" {
		out[corev1.ResourceName(typ)] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// templateNodeName is a placeholder node name that is also a valid
// hostname label value.
func templateNodeName(group string) string {
	name := group + "-template"
	if len(name) > validation.LabelValueMaxLength {
		name = strings.TrimRight(name[:validation.LabelValueMaxLength], "-.")
	}
	return name
}

// templateLabels: the kubelet's os/arch (from the infrastructure
// template's status.nodeInfo, else linux and $CAPI_SCALE_ZERO_DEFAULT_ARCH
// or amd64), then the Machine template's labels Cluster API propagates to
// Nodes, then the labels annotation (k1=v1,k2=v2; an item without "=" is
// skipped, as upstream does, and so is one with an invalid key).
func (p *Provider) templateLabels(u, infra *unstructured.Unstructured, name string) map[string]string {
	arch := os.Getenv("CAPI_SCALE_ZERO_DEFAULT_ARCH")
	if arch == "" {
		arch = "amd64"
	}
	labels := map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: arch}
	if infra != nil {
		if a, _, _ := unstructured.NestedString(infra.Object, "status", "nodeInfo", "architecture"); a != "" {
			labels[corev1.LabelArchStable] = a
		}
		if o, _, _ := unstructured.NestedString(infra.Object, "status", "nodeInfo", "operatingSystem"); o != "" {
			labels[corev1.LabelOSStable] = o
		}
	}
	// spec.template.metadata.labels is where Cluster API keeps them;
	// upstream's autoscaler reads spec.template.spec.metadata.labels: both.
	for _, path := range [][]string{{"spec", "template", "metadata", "labels"}, {"spec", "template", "spec", "metadata", "labels"}} {
		m, _, _ := unstructured.NestedStringMap(u.Object, path...)
		for k, v := range m {
			if managedLabel(k) {
				labels[k] = v
			}
		}
	}
	if v, ok := u.GetAnnotations()[keyLabels]; ok {
		for _, item := range strings.Split(v, ",") {
			// Upstream also takes items with an invalid key; a Node
			// cannot have them, so they are skipped here.
			if kv := strings.SplitN(item, "=", 2); len(kv) == 2 && len(validation.IsQualifiedName(kv[0])) == 0 {
				labels[kv[0]] = kv[1]
			}
		}
	}
	labels[corev1.LabelHostname] = name
	return labels
}

func managedLabel(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, m := range managedLabelPrefixes {
		if prefix == m || strings.HasSuffix(prefix, "."+m) {
			return true
		}
	}
	return false
}

// templateTaints: spec.template.spec.taints (Cluster API's taint
// propagation), then the taints annotation (k=v:Effect,k2:Effect), which
// replaces a taint of the same key and effect. A malformed annotation
// taint is skipped, as upstream does.
func templateTaints(u *unstructured.Unstructured) []corev1.Taint {
	var out []corev1.Taint
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "taints")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, corev1.Taint{Key: str("key"), Value: str("value"), Effect: corev1.TaintEffect(str("effect"))})
	}
	v, ok := u.GetAnnotations()[keyTaints]
	if !ok {
		return out
	}
	for _, item := range strings.Split(v, ",") {
		t, err := parseTaint(item)
		if err != nil {
			continue
		}
		replaced := false
		for i := range out {
			if out[i].Key == t.Key && out[i].Effect == t.Effect {
				out[i], replaced = t, true
			}
		}
		if !replaced {
			out = append(out, t)
		}
	}
	return out
}

// parseTaint reads key[=value][:effect], kubectl's taint syntax.
func parseTaint(s string) (corev1.Taint, error) {
	var t corev1.Taint
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 1:
		t.Key = parts[0]
	case 2:
		t.Effect = corev1.TaintEffect(parts[1])
		kv := strings.Split(parts[0], "=")
		if len(kv) > 2 {
			return t, fmt.Errorf("invalid taint %q", s)
		}
		t.Key = kv[0]
		if len(kv) == 2 {
			t.Value = kv[1]
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return t, fmt.Errorf("invalid taint %q: %s", s, strings.Join(errs, "; "))
			}
		}
	default:
		return t, fmt.Errorf("invalid taint %q", s)
	}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return t, fmt.Errorf("invalid taint %q: %s", s, strings.Join(errs, "; "))
	}
	return t, nil
}

// templateSlices are the DRA template ConfigMap's slices, else upstream's
// synthetic GPU slice (dra-driver with gpu-count > 0: devices gpu-0..N-1
// with the attribute type=gpu, one slice, resourceSliceCount 1).
func (p *Provider) templateSlices(u *unstructured.Unstructured, ann map[string]string, nodeName string) ([]*resourceapi.ResourceSlice, error) {
	if cm := ann[AnnotationDRATemplate]; cm != "" {
		ref := u.GetNamespace() + "/" + cm
		obj, err := p.configMaps.ByNamespace(u.GetNamespace()).Get(cm)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: ConfigMap %s: %v", AnnotationDRATemplate, ref, err)
		}
		cmu, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("annotation %s: ConfigMap %s: unexpected object %T", AnnotationDRATemplate, ref, obj)
		}
		data, _, err := unstructured.NestedStringMap(cmu.Object, "data")
		if err != nil {
			return nil, fmt.Errorf("annotation %s: ConfigMap %s: data: %v", AnnotationDRATemplate, ref, err)
		}
		return parseDRATemplate(ref, data, nodeName)
	}
	driver := ann[keyDRADriver]
	gpus, _ := integer(ann, keyGPUCount) // already validated
	if driver == "" || gpus == 0 {
		return nil, nil
	}
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(nodeName),
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}},
	}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": {StringValue: ptr.To("gpu")}}})
	}
	return []*resourceapi.ResourceSlice{s}, nil
}

// infraTemplate reads the infrastructure machine template the group's
// Machines are made from (spec.template.spec.infrastructureRef: apiGroup
// in v1beta2, apiVersion in v1beta1), from an informer. nil and no error
// when there is no reference.
func (p *Provider) infraTemplate(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ref, found, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "infrastructureRef")
	if !found || ref["kind"] == "" || ref["name"] == "" {
		return nil, nil
	}
	gvr, err := p.resourceFor(ref["apiGroup"], ref["apiVersion"], ref["kind"])
	if err != nil {
		return nil, fmt.Errorf("infrastructureRef %s %s: %w", ref["kind"], ref["name"], err)
	}
	l, err := p.infraLister(ctx, gvr)
	if err != nil {
		return nil, fmt.Errorf("infrastructureRef %s %s: %w", ref["kind"], ref["name"], err)
	}
	obj, err := l.ByNamespace(u.GetNamespace()).Get(ref["name"])
	if err != nil {
		return nil, fmt.Errorf("infrastructureRef %s %s: %w", ref["kind"], ref["name"], err)
	}
	out, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("infrastructureRef %s %s: unexpected object %T", ref["kind"], ref["name"], obj)
	}
	return out, nil
}

// resourceFor finds the resource of a kind through discovery: in the
// given apiVersion, or in the first version of apiGroup (preferred first)
// that serves the kind.
func (p *Provider) resourceFor(group, apiVersion, kind string) (schema.GroupVersionResource, error) {
	var versions []string
	if apiVersion != "" {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return schema.GroupVersionResource{}, err
		}
		group, versions = gv.Group, []string{gv.Version}
	} else {
		groups, err := p.disc.ServerGroups()
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("API discovery: %w", err)
		}
		for _, g := range groups.Groups {
			if g.Name != group {
				continue
			}
			versions = append(versions, g.PreferredVersion.Version)
			for _, v := range g.Versions {
				if v.Version != g.PreferredVersion.Version {
					versions = append(versions, v.Version)
				}
			}
		}
	}
	for _, v := range versions {
		gv := schema.GroupVersion{Group: group, Version: v}
		list, err := p.disc.ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Kind == kind && !strings.Contains(r.Name, "/") {
				return gv.WithResource(r.Name), nil
			}
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("no served version of group %q has kind %s", group, kind)
}
