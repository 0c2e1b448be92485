package metrics

import (
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Description is one metric the autoscaler registers, for generated
// documentation (docs/metrics.md) and the tests that keep it true.
type Description struct {
	Name, Type, Help string
	Labels           []string
}

// descPattern reads prometheus.Desc.String(), the only public view of a
// descriptor's name, help and labels.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", help: "((?:[^"\\]|\\.)*)", unit: "[^"]*", constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// Describe lists the autoscaler's own metrics (the cluster_autoscaler_*
// ones; the Go and process collectors are left out), sorted by name. The
// type comes from the Go type of the Metrics field that registers it.
func (m *Metrics) Describe() []Description {
	types := map[string]string{}
	collectTypes(reflect.ValueOf(m).Elem(), types)
	ch := make(chan *prometheus.Desc, 256)
	go func() { m.Registry.Describe(ch); close(ch) }()
	var out []Description
	for d := range ch {
		match := descPattern.FindStringSubmatch(d.String())
		if match == nil || !strings.HasPrefix(match[1], namespace+"_") {
			continue
		}
		desc := Description{Name: match[1], Help: strings.ReplaceAll(match[2], `\"`, `"`), Type: types[match[1]]}
		if match[3] != "" {
			desc.Labels = strings.Split(match[3], ",")
		}
		out = append(out, desc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// collectTypes maps the metric names of v's collector fields to their
// Prometheus type, descending into embedded structs and into the
// per-feature metric sets the Metrics struct points to.
func collectTypes(v reflect.Value, types map[string]string) {
	for i := range v.NumField() {
		f := v.Field(i)
		if v.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
			collectTypes(f, types)
			continue
		}
		if !f.CanInterface() || (f.Kind() == reflect.Pointer || f.Kind() == reflect.Interface) && f.IsNil() {
			continue
		}
		c, ok := f.Interface().(prometheus.Collector)
		if !ok {
			if f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct {
				collectTypes(f.Elem(), types)
			}
			continue
		}
		typ := typeOf(c)
		ch := make(chan *prometheus.Desc, 8)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if match := descPattern.FindStringSubmatch(d.String()); match != nil {
				types[match[1]] = typ
			}
		}
	}
}

func typeOf(c prometheus.Collector) string {
	// Order matters: a Gauge has every method of a Counter, and a Summary
	// those of a Histogram (this package registers no summaries).
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		return "histogram"
	case prometheus.Gauge, *prometheus.GaugeVec:
		return "gauge"
	case prometheus.Counter, *prometheus.CounterVec:
		return "counter"
	}
	return "untyped"
}
