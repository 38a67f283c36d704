// Command devbroker runs an in-memory Kafka-protocol broker (franz-go's kfake) for the
// local demo and end-to-end tests. It is not a production broker: data lives in memory.
//
//	devbroker --listen 127.0.0.1:9092 --partitions 3 [--topics orders,payments] [--advertise host:port]
//
// Clients connect to the address the broker names in its metadata. That is the
// listen address unless --advertise says otherwise: in a container listening on
// :9092, advertise the address other pods reach it by (its Service name).
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9092", "host:port to listen on")
	partitions := flag.Int("partitions", 3, "partitions of auto-created topics")
	topics := flag.String("topics", "", "comma-separated topics to create at start")
	advertise := flag.String("advertise", "", "host:port clients are told to connect to (default: the listen address)")
	flag.Parse()
	if *advertise != "" {
		if _, _, err := net.SplitHostPort(*advertise); err != nil {
			fail("--advertise %q: %v", *advertise, err)
		}
	}

	host, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		fail("--listen %q: %v", *listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		fail("--listen %q: bad port", *listen)
	}
	if *partitions < 1 {
		fail("--partitions must be at least 1")
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, net.JoinHostPort(host, portStr))
			if err != nil || *advertise == "" {
				return ln, err
			}
			return advertisedListener{ln, advertisedAddr(*advertise)}, nil
		}),
	}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fail("start broker: %v", err)
	}
	fmt.Fprintf(os.Stderr, "devbroker listening on %s\n", strings.Join(c.ListenAddrs(), ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Close()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "devbroker: "+format+"\n", args...)
	os.Exit(2)
}

// advertisedListener reports addr as its address: kfake names its listener's address
// in the metadata it returns, so this is what clients connect to.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// advertisedAddr is a host:port as a net.Addr.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }
