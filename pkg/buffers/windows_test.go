package buffers

import (
	"strings"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	// 2026-12-07 is a Monday.
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, tc := range []struct {
		name, spec string
		now        string
		active     bool
		until      string // "" for zero
	}{
		{"no annotation", "", "2026-12-07T03:00:00Z", true, ""},
		{"weekday inside", "0 8 * * 1-5 for 10h", "2026-12-07T12:00:00Z", true, "2026-12-07T18:00:00Z"},
		{"weekday at start", "0 8 * * 1-5 for 10h", "2026-12-07T08:00:00Z", true, "2026-12-07T18:00:00Z"},
		{"weekday at end", "0 8 * * 1-5 for 10h", "2026-12-07T18:00:00Z", false, "2026-12-08T08:00:00Z"},
		{"weekend", "0 8 * * 1-5 for 10h", "2026-12-05T12:00:00Z", false, "2026-12-07T08:00:00Z"},
		{"over midnight", "0 22 * * * for 4h", "2026-12-07T01:00:00Z", true, "2026-12-07T02:00:00Z"},
		{"time zone", "CRON_TZ=Asia/Shanghai 0 19 * * * for 4h", "2026-12-07T12:00:00Z", true, "2026-12-07T15:00:00Z"},
		{"two windows, second", "0 8 * * * for 1h; 0 20 * * * for 2h", "2026-12-07T21:00:00Z", true, "2026-12-07T22:00:00Z"},
		{"two windows, between", "0 8 * * * for 1h; 0 20 * * * for 2h", "2026-12-07T12:00:00Z", false, "2026-12-07T20:00:00Z"},
		{"descriptor", "@daily for 30m", "2026-12-07T00:10:00Z", true, "2026-12-07T00:30:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := ParseWindows(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			active, until := ws.Active(at(tc.now))
			want := time.Time{}
			if tc.until != "" {
				want = at(tc.until)
			}
			if active != tc.active || !until.Equal(want) {
				t.Errorf("Active = %v until %v, want %v until %v", active, until, tc.active, want)
			}
		})
	}
}

func TestParseWindowsErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"0 8 * * 1-5":                        "want \"<cron schedule> for <duration>\"",
		"0 8 * * 1-5 for":                    "want",
		"0 8 * * 1-5 for ten":                "duration \"ten\"",
		"0 8 * * 1-5 for -1h":                "must be above 0",
		"0 25 * * * for 1h":                  "schedule",
		"@every 1h for 10m":                  "@every",
		"0 8 * * * for 9000h":                "at most",
		"TZ= for 1h":                         "malformed schedule",
		"; ;":                                "no window",
		"0 8 * * 1-5/10h":                    "want",
		"CRON_TZ=Nowhere/X 0 8 * * * for 1h": "schedule",
	} {
		_, err := ParseWindows(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWindows(%q) = %v, want an error with %q", spec, err, want)
		}
	}
}
