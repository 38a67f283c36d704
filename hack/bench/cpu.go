// cpu.go: where a run's CPU went (postgres backends, the workers, the broker, this
// harness with its consumer), read from /proc, so the table says whether a peer waits
// or computes.

package main

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/testenv/procstat"
)

// cpuSample is CPU seconds by component; postgres processes are also kept one by
// one ("pg/<pid>"), so since counts only the CPU of processes alive at the end (an
// exited backend or autovacuum worker takes its CPU time out of /proc: summed by
// name, the sum could even drop).
type cpuSample map[string]float64

const pgPrefix = "pg/"

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
	for _, p := range procstat.All() {
		switch {
		case pids[p.PID] != "":
			out[pids[p.PID]] += p.CPUSeconds
		case p.Comm == "postgres" && (p.PID == s.postmaster || p.PPID == s.postmaster):
			out[pgPrefix+strconv.Itoa(p.PID)] = p.CPUSeconds
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
	st, err := procstat.Read(backend)
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/stat of the harness's backend: %w", backend, err)
	}
	return st.PPID, nil
}
