package controlplane

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Step is one event of bringing the control plane up: a binary being
// built or a component being started, as it begins (Done false) and as it
// ends (Done true, with Err set when it failed).
type Step struct {
	// Name says what the step does: "build kube-apiserver", "start etcd".
	Name string        `json:"name"`
	Done bool          `json:"done,omitempty"`
	Err  string        `json:"err,omitempty"`
	Took time.Duration `json:"took,omitempty"`
}

// Progress hears each Step. A cold first build takes many minutes; without
// it a developer sees one line and no sign of life. Nil means nobody
// listens.
type Progress func(Step)

// Begin reports the start of name and returns the function that reports
// its end; both are no-ops without a listener.
func (p Progress) Begin(name string) func(error) {
	if p == nil {
		return func(error) {}
	}
	start := time.Now()
	p(Step{Name: name})
	return func(err error) {
		s := Step{Name: name, Done: true, Took: time.Since(start)}
		if err != nil {
			s.Err = err.Error()
		}
		p(s)
	}
}

// Printer writes one line per Step to w, stamped with the time since the
// printer was made, so a slow step shows where the minutes went:
//
//	[  0.4s] start kube-apiserver ...
//	[  6.1s] start kube-apiserver: ok (5.7s)
type Printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

// NewPrinter starts the clock of its stamps now.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: w, start: time.Now()} }

// Report prints s; it is a Progress.
func (p *Printer) Report(s Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	what := " ..."
	switch {
	case s.Done && s.Err != "":
		what = fmt.Sprintf(": FAILED after %s", round(s.Took))
	case s.Done:
		what = fmt.Sprintf(": ok (%s)", round(s.Took))
	}
	fmt.Fprintf(p.w, "[%6.1fs] %s%s\n", time.Since(p.start).Seconds(), s.Name, what)
}

// Elapsed is the time since the printer was made.
func (p *Printer) Elapsed() time.Duration { return time.Since(p.start) }

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
