// profile.go: with -profile DIR, the relay workers serve pprof and the harness saves a
// CPU profile taken during each run and the block and mutex profiles at its end
// (go tool pprof -top DIR/<run>-w0-cpu.pb.gz); the consumer runs, in the harness
// process, save DIR/cons-<n>-cpu.pb.gz.

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profiler collects the profiles of one run.
type profiler struct {
	dir string
	wg  sync.WaitGroup
}

// cpu starts a CPU profile of every worker of p for d.
func (pf *profiler) cpu(p peer, tag string, d time.Duration) {
	rp, ok := relayOf(p)
	if pf == nil || !ok {
		return
	}
	for i, addr := range rp.pprof {
		pf.wg.Add(1)
		go func() {
			defer pf.wg.Done()
			pf.fetch(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())),
				fmt.Sprintf("%s-w%d-cpu.pb.gz", tag, i))
		}()
	}
}

// finish waits for the CPU profiles and saves block and mutex profiles.
func (pf *profiler) finish(p peer, tag string) {
	rp, ok := relayOf(p)
	if pf == nil || !ok {
		return
	}
	pf.wg.Wait()
	for i, addr := range rp.pprof {
		for _, kind := range []string{"block", "mutex"} {
			pf.fetch(fmt.Sprintf("http://%s/debug/pprof/%s", addr, kind), fmt.Sprintf("%s-w%d-%s.pb.gz", tag, i, kind))
		}
	}
}

func (pf *profiler) fetch(url, file string) {
	resp, err := http.Get(url)
	for i := 0; err != nil && i < 100; i++ { // the worker may still be starting
		time.Sleep(50 * time.Millisecond)
		resp, err = http.Get(url)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(pf.dir, file))
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
