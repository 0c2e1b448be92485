package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseExplain(t *testing.T) {
	tests := []struct {
		args    []string
		wantPod string
		wantOut string
		wantErr string
	}{
		{args: []string{"ns/p"}, wantPod: "ns/p", wantOut: "table"},
		{args: []string{"--cloud-config=x.yaml", "-o", "json", "ns/p"}, wantPod: "ns/p", wantOut: "json"},
		{args: []string{"ns/p", "--output=json", "--max-nodes-total=3"}, wantPod: "ns/p", wantOut: "json"},
		{args: nil, wantErr: "want one <namespace>/<pod>"},
		{args: []string{"p"}, wantErr: `"p" is not <namespace>/<pod>`},
		{args: []string{"ns/p/q"}, wantErr: "is not <namespace>/<pod>"},
		{args: []string{"-o", "yaml", "ns/p"}, wantErr: `-o "yaml"`},
		{args: []string{"--expander=nope", "ns/p"}, wantErr: `unknown expander "nope"`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, req, err := ParseExplain(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Pod.String() != tc.wantPod || req.Output != tc.wantOut {
				t.Errorf("got %s -o %s", req.Pod, req.Output)
			}
			if o.LeaderElection.LeaderElect || o.WriteStatusConfigMap || o.WriteNodeGroupObjects {
				t.Error("explain must neither lead nor write the status nor the NodeGroup objects")
			}
		})
	}
}

func TestExplainFlags(t *testing.T) {
	o, err := Parse([]string{"--scheduler-disagreement-threshold=30s", "--write-status-configmap=false", "--status-config-map-name=s",
		"--write-node-group-objects=false"})
	if err != nil {
		t.Fatal(err)
	}
	if o.SchedulerDisagreementThreshold != 30*time.Second || o.WriteStatusConfigMap || o.StatusConfigMapName != "s" || o.WriteNodeGroupObjects {
		t.Errorf("options %+v", o.ExplainOptions)
	}
	d := Default()
	if d.SchedulerDisagreementThreshold != 5*time.Minute || !d.WriteStatusConfigMap || d.StatusConfigMapName != "cluster-autoscaler-status" || !d.WriteNodeGroupObjects {
		t.Errorf("defaults %+v", d.ExplainOptions)
	}
	for _, bad := range [][]string{{"--scheduler-disagreement-threshold=0s"}, {"--status-config-map-name="}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
