package buffers

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Windows are the times a buffer holds capacity (the active-windows
// annotation): each window starts on a cron schedule and lasts a
// duration. A buffer without the annotation is always active.
//
// Syntax: windows separated by ";", each "<schedule> for <duration>":
// the schedule is five cron fields (minute hour day-of-month month
// day-of-week) or a descriptor (@daily, @weekly, ...), optionally led by
// CRON_TZ=<zone> (UTC otherwise); the duration is Go's (90m, 10h).
//
//	0 8 * * 1-5 for 10h                 weekdays 08:00-18:00 UTC
//	CRON_TZ=Asia/Shanghai 0 19 * * * for 4h; 0 2 * * 6 for 1h
type Windows []Window

// Window is one schedule and how long each start lasts.
type Window struct {
	Spec     string
	schedule cron.Schedule
	Duration time.Duration
}

// maxWindow bounds a window's duration: a longer one is a mistake (it
// would never end between starts of any schedule worth writing).
const maxWindow = 366 * 24 * time.Hour

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseWindows reads the annotation's value; "" is no windows (always
// active), anything malformed an error naming the window.
func ParseWindows(s string) (Windows, error) {
	var out Windows
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		spec, dur, ok := strings.Cut(part, " for ")
		if !ok {
			return nil, fmt.Errorf("window %d %q: want \"<cron schedule> for <duration>\"", i+1, part)
		}
		spec, dur = strings.TrimSpace(spec), strings.TrimSpace(dur)
		if strings.Contains(spec, "@every") {
			return nil, fmt.Errorf("window %d %q: @every has no fixed start; use a cron schedule", i+1, part)
		}
		sched, err := parse(spec)
		if err != nil {
			return nil, fmt.Errorf("window %d schedule %q: %w", i+1, spec, err)
		}
		d, err := time.ParseDuration(dur)
		if err != nil {
			return nil, fmt.Errorf("window %d duration %q: %w", i+1, dur, err)
		}
		if d <= 0 || d > maxWindow {
			return nil, fmt.Errorf("window %d duration %s: must be above 0 and at most %s", i+1, d, maxWindow)
		}
		out = append(out, Window{Spec: spec, schedule: sched, Duration: d})
	}
	if s != "" && len(out) == 0 {
		return nil, fmt.Errorf("no window in %q", s)
	}
	return out, nil
}

// parse is the cron parser without its panics: it slices out of range on
// a time zone prefix with nothing after it ("TZ=").
func parse(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("malformed schedule: %v", r)
		}
	}()
	return parser.Parse(spec)
}

// Active reports whether now is inside a window (always, without any),
// and until when the answer holds: the end of the window it is in, or the
// next start (zero when nothing changes).
func (ws Windows) Active(now time.Time) (bool, time.Time) {
	if len(ws) == 0 {
		return true, time.Time{}
	}
	now = now.UTC()
	var end, next time.Time
	for _, w := range ws {
		// A start s with now-d < s <= now puts now inside [s, s+d).
		if s := w.schedule.Next(now.Add(-w.Duration)); !s.IsZero() && !s.After(now) {
			if e := s.Add(w.Duration); e.After(end) {
				end = e
			}
		}
		if s := w.schedule.Next(now); !s.IsZero() && (next.IsZero() || s.Before(next)) {
			next = s
		}
	}
	if !end.IsZero() {
		return true, end
	}
	return false, next
}
