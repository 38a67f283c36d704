// Package freeport picks loopback ports for servers a test starts in another process
// (PostgreSQL, relayworker endpoints, the manager). A port taken with ":0" and closed
// again comes from the kernel's ephemeral range, which the kernel also hands out as
// the local port of every client connection: under parallel tests one of those can
// take it before the child binds it ("bind: address already in use"). Ports below
// that range are handed out only by explicit binds, so a port free now stays free
// unless another test picks the same one.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// low is the bottom of the range picked from: above the well-known and most
// registered service ports.
const low = 10000

// Port returns a loopback TCP port nothing listens on now, below the kernel's
// ephemeral range (falling back to an ephemeral one when that range leaves no room).
func Port() (int, error) {
	high := ephemeralLow()
	for i := 0; high-low > 1000 && i < 100; i++ {
		p := low + rand.IntN(high-low)
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr is Port as a host:port on 127.0.0.1.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 where it
// cannot be read).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				return v
			}
		}
	}
	return 32768
}
