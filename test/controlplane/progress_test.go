package controlplane

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestPrinter(t *testing.T) {
	for _, tc := range []struct {
		name string
		step Step
		want string // after the time stamp
	}{
		{"begins", Step{Name: "start etcd"}, "start etcd ..."},
		{"ends", Step{Name: "start etcd", Done: true, Took: 1500 * time.Millisecond}, "start etcd: ok (1.5s)"},
		{"ends fast", Step{Name: "build kwok", Done: true, Took: 42 * time.Millisecond}, "build kwok: ok (42ms)"},
		{"fails", Step{Name: "start kwok", Done: true, Err: "boom", Took: 2 * time.Second}, "start kwok: FAILED after 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			NewPrinter(&out).Report(tc.step)
			line := out.String()
			if !regexp.MustCompile(`^\[ *\d+\.\ds\] `).MatchString(line) || !strings.HasSuffix(line, "] "+tc.want+"\n") {
				t.Errorf("printed %q, want a time stamp and %q", line, tc.want)
			}
		})
	}
}

// Begin reports a start and an end, with the error's text; a nil
// Progress is silent and does not panic.
func TestProgressBegin(t *testing.T) {
	var steps []Step
	p := Progress(func(s Step) { steps = append(steps, s) })
	p.Begin("build a")(nil)
	p.Begin("build b")(errors.New("no compiler"))
	if len(steps) != 4 || steps[0].Done || !steps[1].Done || steps[1].Err != "" || steps[3].Err != "no compiler" || steps[2].Name != "build b" {
		t.Errorf("steps %+v", steps)
	}
	var silent Progress
	silent.Begin("x")(errors.New("y"))
}
