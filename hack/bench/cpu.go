// cpu.go: where a run's CPU went (postgres backends, the workers, the broker, this
// harness with its consumer), read from /proc, so the table says whether a peer waits
// or computes.

package main

import (
	"os"

	"github.com/outbox-operator/outbox-operator/internal/testenv/procstat"
)

// cpuSample is CPU seconds by component.
type cpuSample map[string]float64

// sampleCPU attributes every live process: postgres by name, the others by pid.
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
		case p.Comm == "postgres":
			out["postgres"] += p.CPUSeconds
		}
	}
	return out
}

func (a cpuSample) since(b cpuSample) cpuSample {
	d := cpuSample{}
	for k, v := range a {
		d[k] = v - b[k]
	}
	return d
}
