package config

import (
	"strings"
	"testing"
	"time"
)

func TestScaleDownFlags(t *testing.T) {
	o, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.ScaleDown, DefaultScaleDown(); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	if o.ScaleDown.DelayAfterDeleteOr(o.ScanInterval) != o.ScanInterval {
		t.Error("--scale-down-delay-after-delete=0 should mean the scan interval")
	}
	o, err = Parse([]string{"--scale-down-enabled=false", "--scale-down-unneeded-time=30s", "--max-graceful-termination-sec=5",
		"--scale-down-gpu-utilization-threshold=0.2", "--scale-down-delay-after-delete=1m", "--skip-nodes-with-local-storage=false"})
	if err != nil {
		t.Fatal(err)
	}
	sd := o.ScaleDown
	if sd.Enabled || sd.UnneededTime != 30*time.Second || sd.MaxGracefulTermination != 5*time.Second ||
		sd.GPUUtilizationThreshold != 0.2 || sd.DelayAfterDeleteOr(o.ScanInterval) != time.Minute || sd.SkipNodesWithLocalStorage {
		t.Fatalf("parsed %+v", sd)
	}
}

func TestScaleDownValidation(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--scale-down-utilization-threshold=1.5"}, "--scale-down-utilization-threshold=1.5: must be between 0 and 1"},
		{[]string{"--scale-down-gpu-utilization-threshold=-0.1"}, "--scale-down-gpu-utilization-threshold"},
		{[]string{"--scale-down-unneeded-time=-1s"}, "--scale-down-unneeded-time: must not be negative"},
		{[]string{"--max-pod-eviction-time=0s"}, "--max-pod-eviction-time=0s: must be positive"},
		{[]string{"--max-scale-down-parallelism=0"}, "--max-scale-down-parallelism=0: must be positive"},
		{[]string{"--max-graceful-termination-sec=-3"}, "--max-graceful-termination-sec: must not be negative"},
		{[]string{"--scale-down-unneeded-time=soon"}, "scale-down-unneeded-time"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
