package main

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDevbrokerServesKafkaClients runs the binary the way the demo docs do and talks
// to it with both clients the project uses: kafka-go writes, franz-go reads back.
func TestDevbrokerServesKafkaClients(t *testing.T) {
	bin := build(t)
	addr := freeAddr(t)

	cmd := exec.Command(bin, "--listen", addr, "--partitions", "2", "--topics", "orders")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("devbroker did not exit cleanly on SIGTERM: %v (%s)", err, stderr.String())
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(addr), RequiredAcks: kafka.RequireAll, Balancer: &kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond}
	defer w.Close()
	var werr error
	for ctx.Err() == nil { // the listener may need a moment after exec
		if werr = w.WriteMessages(ctx, kafka.Message{Topic: "orders", Key: []byte("k1"), Value: []byte("a")},
			kafka.Message{Topic: "orders", Key: []byte("k2"), Value: []byte("b")}); werr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("write: %v (%s)", werr, stderr.String())
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]bool{}
	for len(got) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	if !got["a"] || !got["b"] {
		t.Fatalf("read back %v", got)
	}
}

func TestDevbrokerBadFlagsExitTwo(t *testing.T) {
	bin := build(t)
	for _, args := range [][]string{{"--listen", "nonsense"}, {"--partitions", "0"}, {"--listen", "127.0.0.1:99999"}, {"--advertise", "no-port"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 2 || !strings.HasPrefix(string(out), "devbroker: ") || strings.Count(string(out), "\n") != 1 {
			t.Errorf("%v: err=%v output=%q, want exit 2 and one line", args, err, out)
		}
	}
}

// TestDevbrokerAdvertisesTheGivenAddress: with --advertise, the metadata names that
// address (what pods in a cluster must be told), while the broker listens where
// --listen says.
func TestDevbrokerAdvertisesTheGivenAddress(t *testing.T) {
	bin := build(t)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--listen", addr, "--advertise", "localhost:"+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	var brokers []kafka.Broker
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := kafka.Dial("tcp", addr)
		if err == nil {
			brokers, err = conn.Brokers()
			conn.Close()
		}
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(brokers) != 1 || brokers[0].Host != "localhost" || strconv.Itoa(brokers[0].Port) != port {
		t.Fatalf("metadata brokers %+v, want localhost:%s", brokers, port)
	}
}

// build compiles the devbroker binary the way users run it.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devbroker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	return bin
}

// freeAddr is a loopback address with a port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
