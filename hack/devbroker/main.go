// Command devbroker runs an in-memory Kafka-protocol broker (franz-go's kfake) for the
// local demo and end-to-end tests. It is not a production broker: data lives in memory.
//
//	devbroker --listen 127.0.0.1:9092 --partitions 3 [--topics orders,payments]
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
	flag.Parse()

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
			return net.Listen(network, net.JoinHostPort(host, portStr))
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
