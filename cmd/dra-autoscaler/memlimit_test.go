package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		files   []string
		env     string
		want    int64
		wantErr bool
	}{
		{name: "cgroup v2 limit", files: []string{file("v2", "2147483648\n")}, want: 1932735276},
		{name: "cgroup v2 no limit", files: []string{file("v2max", "max\n"), file("v1", "1073741824")}, want: 0},
		{name: "cgroup v1 limit after a missing v2 file", files: []string{filepath.Join(dir, "none"), file("v1b", "1073741824\n")}, want: 966367638},
		{name: "cgroup v1 no limit", files: []string{file("v1max", "9223372036854771712\n")}, want: 0},
		{name: "GOMEMLIMIT wins", files: []string{file("v2c", "2147483648\n")}, env: "1GiB", want: 0},
		{name: "no cgroup files", files: []string{filepath.Join(dir, "none")}, want: 0},
		{name: "garbage", files: []string{file("bad", "lots\n")}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(before)
			got, err := setMemoryLimit(tc.files)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("setMemoryLimit = %d, %v; want %d (error: %v)", got, err, tc.want, tc.wantErr)
			}
			if tc.want > 0 {
				if now := debug.SetMemoryLimit(-1); now != tc.want {
					t.Errorf("runtime memory limit %d, want %d", now, tc.want)
				}
			}
		})
	}
}
