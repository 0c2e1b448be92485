package metrics

import "testing"

func TestDescribe(t *testing.T) {
	m := New()
	got := map[string]Description{}
	for _, d := range m.Describe() {
		got[d.Name] = d
	}
	for name, typ := range map[string]string{
		"cluster_autoscaler_nodes_count":                   "gauge",
		"cluster_autoscaler_scaled_up_nodes_total":         "counter",
		"cluster_autoscaler_function_duration_seconds":     "histogram",
		"cluster_autoscaler_scheduler_disagreement_pods":   "gauge",
		"cluster_autoscaler_scheduler_disagreements_total": "counter",
	} {
		if got[name].Type != typ || got[name].Help == "" {
			t.Errorf("%s: %+v, want type %s with help", name, got[name], typ)
		}
	}
	if l := got["cluster_autoscaler_node_group_backed_off"].Labels; len(l) != 2 || l[0] != "node_group" {
		t.Errorf("labels of node_group_backed_off: %v", l)
	}
	for name, d := range got {
		if d.Type == "" || d.Type == "untyped" {
			t.Errorf("%s: no type", name)
		}
	}
	if _, ok := got["go_goroutines"]; ok {
		t.Error("Go collector metrics listed")
	}
}
