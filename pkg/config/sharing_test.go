package config

import (
	"strings"
	"testing"
	"time"
)

func TestSharingFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    SharingOptions
		wantErr string
	}{
		{args: nil, want: DefaultSharing()},
		{args: []string{"--dra-prioritized-list-policy=prefer-first-alternative", "--dra-fragmentation-aware-placement=false",
			"--dra-stranded-capacity-budget=500ms", "--dra-request-shape-retention=10m", "--dra-placement-ranking-budget=300ms"},
			want: SharingOptions{PrioritizedListPolicy: PrioritizedListPreferFirstAlternative, StrandedCapacityBudget: 500 * time.Millisecond,
				PlacementRankingBudget: 300 * time.Millisecond, RequestShapeRetention: 10 * time.Minute}},
		{args: []string{"--dra-prioritized-list-policy=first"}, wantErr: "--dra-prioritized-list-policy"},
		{args: []string{"--dra-stranded-capacity-budget=0s"}, wantErr: "--dra-stranded-capacity-budget"},
		{args: []string{"--dra-request-shape-retention=-1m"}, wantErr: "--dra-request-shape-retention"},
		{args: []string{"--dra-placement-ranking-budget=0s"}, wantErr: "--dra-placement-ranking-budget"},
		{args: []string{"--expander=fragmentation,least-waste"}, want: DefaultSharing()},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%v) error %v, want one naming %s", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Sharing != tc.want {
				t.Errorf("sharing options %+v, want %+v", o.Sharing, tc.want)
			}
		})
	}
}
