// cpu.go: where a run's CPU went (postgres backends, the workers, the broker, this
// harness with its consumer), read from /proc, so the table says whether a peer waits
// or computes.

package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const clockTicks = 100 // USER_HZ on Linux

// cpuSample is CPU seconds by component; postgres processes are also kept one by
// one ("pg/<pid>"), so since counts only the CPU of processes alive at the end (an
// exited backend or autovacuum worker takes its CPU time out of /proc: summed by
// name, the sum could even drop).
type cpuSample map[string]float64

const pgPrefix = "pg/"

func procCPU(stat string) (comm string, ppid int, secs float64, ok bool) {
	b, err := os.ReadFile(stat)
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	open, closeP := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closeP < open {
		return "", 0, 0, false
	}
	comm = s[open+1 : closeP]
	f := strings.Fields(s[closeP+2:])
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return comm, ppid, (ut + st) / clockTicks, true
}

// sampleCPU attributes every live process: this stack's postgres processes (the
// postmaster and its children: the machine may run other servers), the others by pid.
// (Processes that exited since the last sample take their CPU with them; the workers
// are sampled before they are stopped.)
func (s *stack) sampleCPU(workers []*proc) cpuSample {
	out := cpuSample{}
	pids := map[int]string{os.Getpid(): "harness+consumer"}
	if s.broker != nil {
		pids[s.broker.cmd.Process.Pid] = "broker"
	}
	for _, w := range workers {
		pids[w.cmd.Process.Pid] = "workers"
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		comm, ppid, secs, ok := procCPU(p)
		if !ok {
			continue
		}
		switch {
		case pids[pid] != "":
			out[pids[pid]] += secs
		case comm == "postgres" && (pid == s.postmaster || ppid == s.postmaster):
			out[pgPrefix+strconv.Itoa(pid)] = secs
		}
	}
	return out
}

func (a cpuSample) since(b cpuSample) cpuSample {
	d := cpuSample{}
	for k, v := range a {
		if strings.HasPrefix(k, pgPrefix) {
			d["postgres"] += v - b[k] // a process started since then: b[k] = 0
			continue
		}
		d[k] = v - b[k]
	}
	return d
}

// postmasterPID is the parent of one of db's backends.
func postmasterPID(db interface{ QueryRow(string, ...any) *sql.Row }) (int, error) {
	var backend int
	if err := db.QueryRow(`SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, err
	}
	_, ppid, _, ok := procCPU("/proc/" + strconv.Itoa(backend) + "/stat")
	if !ok {
		return 0, fmt.Errorf("read /proc/%d/stat of the harness's backend", backend)
	}
	return ppid, nil
}
