// Command pause is the sandbox ("pause") container of the local one-node cluster
// (hack/cluster): it holds a pod's namespaces open and does nothing else. No image
// registry is reachable here, so containerd cannot pull registry.k8s.io/pause; this is
// built into the outbox-pause image by `make images` instead.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// Children are re-parented to us only when the pod shares its PID namespace;
	// reap them so they do not linger as zombies.
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
