// Package procstat reads what the benchmarks report about a process from Linux's
// /proc: its name, parent, CPU seconds and resident memory. A benchmark attributes
// CPU to the components it started this way, without asking them.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ on Linux, the unit of utime and stime.
const clockTicks = 100

// pageSize is the unit of rss in /proc/<pid>/stat.
var pageSize = int64(os.Getpagesize())

// Stat is one reading of a process.
type Stat struct {
	PID  int
	Comm string
	PPID int
	// CPUSeconds is user + system time since the process started.
	CPUSeconds float64
	// RSSBytes is the resident set size now.
	RSSBytes int64
}

// Read reads /proc/<pid>/stat.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return parse(pid, b)
}

// parse reads "pid (comm) state ppid ... utime stime ... rss ..." (proc(5)); comm may
// hold spaces and parentheses, so the fields are counted from its last ')'.
func parse(pid int, b []byte) (Stat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("/proc/%d/stat: no (comm)", pid)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15, rss 24.
	if len(f) < 22 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %d fields after comm, want at least 22", pid, len(f))
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return Stat{PID: pid, Comm: string(b[open+1 : end]), PPID: ppid, CPUSeconds: (ut + st) / clockTicks, RSSBytes: rss * pageSize}, nil
}

// All reads every process that can be read now (processes that exit meanwhile are
// left out).
func All() []Stat {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]Stat, 0, len(paths))
	for _, p := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if s, err := Read(pid); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// PeakRSS is the process's largest resident set size so far (VmHWM in
// /proc/<pid>/status).
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmHWM %q: %w", pid, v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}
