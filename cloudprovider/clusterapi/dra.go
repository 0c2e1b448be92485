package clusterapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	resourceinternal "k8s.io/kubernetes/pkg/apis/resource"
	_ "k8s.io/kubernetes/pkg/apis/resource/install" // conversions for slice validation
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// parseDRATemplate reads the ResourceSlices of a DRA template ConfigMap
// (its DRATemplateKey, one or more YAML documents, each a
// resource.k8s.io/v1 ResourceSlice) for the template node nodeName:
//   - spec.nodeName is set to nodeName; nodeSelector, allNodes and
//     perDeviceNodeSelection must be absent (a node's own slices only);
//   - spec.pool.name defaults to nodeName (a per-node pool, renamed per
//     hypothetical node by the simulator); generation defaults to 1;
//   - spec.pool.resourceSliceCount is the number of slices of that driver
//     and pool in the ConfigMap; a different non-zero value is an error;
//   - metadata.name is replaced by <nodeName>-<index>.
//
// Every slice must then pass the API server's own ResourceSlice
// validation. Errors name the ConfigMap, the document and the field.
func parseDRATemplate(ref string, data map[string]string, nodeName string) ([]*resourceapi.ResourceSlice, error) {
	raw, ok := data[DRATemplateKey]
	if !ok {
		return nil, fmt.Errorf("DRA template ConfigMap %s: no data key %q", ref, DRATemplateKey)
	}
	var slices []*resourceapi.ResourceSlice
	var errs []error
	reader := utilyaml.NewYAMLReader(bufioReader(raw))
	for doc := 0; ; doc++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("DRA template ConfigMap %s: %s: %v", ref, DRATemplateKey, err)
		}
		if len(bytes.TrimSpace(chunk)) == 0 || isComment(chunk) {
			continue
		}
		where := fmt.Sprintf("DRA template ConfigMap %s: %s document %d", ref, DRATemplateKey, doc)
		var s resourceapi.ResourceSlice
		if err := yaml.UnmarshalStrict(chunk, &s); err != nil {
			errs = append(errs, fmt.Errorf("%s: not a ResourceSlice: %v", where, err))
			continue
		}
		if s.APIVersion != resourceapi.SchemeGroupVersion.String() || s.Kind != "ResourceSlice" {
			errs = append(errs, fmt.Errorf("%s: apiVersion %q kind %q: want %s ResourceSlice", where, s.APIVersion, s.Kind, resourceapi.SchemeGroupVersion))
			continue
		}
		if s.Spec.NodeSelector != nil || ptr.Deref(s.Spec.AllNodes, false) || ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
			errs = append(errs, fmt.Errorf("%s: spec.nodeSelector, spec.allNodes and spec.perDeviceNodeSelection must not be set: a template holds the node's own slices", where))
			continue
		}
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			errs = append(errs, fmt.Errorf("%s: spec.nodeName must not be set: the template node's name is filled in", where))
			continue
		}
		s.Spec.NodeName = ptr.To(nodeName)
		if s.Spec.Pool.Name == "" {
			s.Spec.Pool.Name = nodeName
		}
		if s.Spec.Pool.Generation == 0 {
			s.Spec.Pool.Generation = 1
		}
		s.Name = fmt.Sprintf("%s-%d", nodeName, len(slices))
		s.Namespace = ""
		slices = append(slices, s.DeepCopy())
		errs = append(errs, validateSlice(where, &s)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(slices) == 0 {
		return nil, fmt.Errorf("DRA template ConfigMap %s: %s holds no ResourceSlice", ref, DRATemplateKey)
	}
	type poolKey struct{ driver, pool string }
	counts := map[poolKey]int64{}
	for _, s := range slices {
		counts[poolKey{s.Spec.Driver, s.Spec.Pool.Name}]++
	}
	for i, s := range slices {
		want := counts[poolKey{s.Spec.Driver, s.Spec.Pool.Name}]
		if c := s.Spec.Pool.ResourceSliceCount; c != 0 && c != want {
			errs = append(errs, fmt.Errorf("DRA template ConfigMap %s: slice %d: spec.pool.resourceSliceCount is %d, but the ConfigMap holds %d slice(s) of driver %s pool %s",
				ref, i, c, want, s.Spec.Driver, s.Spec.Pool.Name))
		}
		s.Spec.Pool.ResourceSliceCount = want
	}
	errs = append(errs, checkCounters(ref, slices)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return slices, nil
}

// checkCounters: a device's consumesCounters must name a counter set, and
// counters in it, that a slice of the same driver and pool declares (the
// API server cannot check across slices; the allocator would just never
// pick the device).
func checkCounters(ref string, slices []*resourceapi.ResourceSlice) []error {
	type setKey struct{ driver, pool, set string }
	sets := map[setKey]map[string]bool{}
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			k := setKey{s.Spec.Driver, s.Spec.Pool.Name, cs.Name}
			if sets[k] == nil {
				sets[k] = map[string]bool{}
			}
			for c := range cs.Counters {
				sets[k][c] = true
			}
		}
	}
	var errs []error
	for i, s := range slices {
		for j, d := range s.Spec.Devices {
			for k, cc := range d.ConsumesCounters {
				have, ok := sets[setKey{s.Spec.Driver, s.Spec.Pool.Name, cc.CounterSet}]
				where := fmt.Sprintf("DRA template ConfigMap %s: slice %d: spec.devices[%d].consumesCounters[%d]", ref, i, j, k)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: counter set %q is declared by no slice of driver %s pool %s", where, cc.CounterSet, s.Spec.Driver, s.Spec.Pool.Name))
					continue
				}
				for c := range cc.Counters {
					if !have[c] {
						errs = append(errs, fmt.Errorf("%s: counter set %q has no counter %q", where, cc.CounterSet, c))
					}
				}
			}
		}
	}
	return errs
}

// validateSlice runs the API server's ResourceSlice validation, with
// resourceSliceCount filled as it will be.
func validateSlice(where string, s *resourceapi.ResourceSlice) []error {
	c := s.DeepCopy()
	if c.Spec.Pool.ResourceSliceCount == 0 {
		c.Spec.Pool.ResourceSliceCount = 1
	}
	var internal resourceinternal.ResourceSlice
	if err := legacyscheme.Scheme.Convert(c, &internal, nil); err != nil {
		return []error{fmt.Errorf("%s: %v", where, err)}
	}
	var errs []error
	for _, e := range resourcevalidation.ValidateResourceSlice(&internal) {
		errs = append(errs, fmt.Errorf("%s: %s", where, e.Error()))
	}
	return errs
}

func isComment(chunk []byte) bool {
	for _, line := range strings.Split(string(chunk), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
