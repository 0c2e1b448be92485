package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles hold the container's memory limit: cgroup v2 first,
// then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setMemoryLimit gives the garbage collector a soft memory limit of 90 %
// of the container's, unless GOMEMLIMIT sets one. A pass over thousands of
// GPU nodes allocates gigabytes; the collector's default target (twice
// the live heap) can overshoot a container's limit where collecting
// harder near it would not (at L2: 1.5 GB peak without, 1.1 GB with a
// 1 GiB limit; docs/performance.md). It returns the limit set, 0 for none.
func setMemoryLimit(files []string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read the container's memory limit: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, nil
		}
		limit, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read the container's memory limit from %s: %w", f, err)
		}
		// cgroup v1 says "no limit" with a number near the largest.
		if limit <= 0 || limit >= 1<<60 {
			return 0, nil
		}
		limit = limit / 10 * 9
		debug.SetMemoryLimit(limit)
		return limit, nil
	}
	return 0, nil
}
