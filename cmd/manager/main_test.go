package main

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestParseWatchNamespaces(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string // substring; "" means no error
	}{
		{in: "", want: nil},
		{in: "shop", want: []string{"shop"}},
		{in: " shop, billing ", want: []string{"shop", "billing"}},
		{in: "shop,billing,shop", want: []string{"shop", "billing"}},
		{in: "a-1,kube-system", want: []string{"a-1", "kube-system"}},
		{in: ",,", wantErr: `--watch-namespaces ",,": item 1 is empty`},
		{in: "shop,,billing", wantErr: "item 2 is empty"},
		{in: "shop,", wantErr: "item 2 is empty"},
		{in: " ", wantErr: "item 1 is empty"},
		{in: "Shop", wantErr: `"Shop" is not a namespace name`},
		{in: "shop,bill_ing", wantErr: `"bill_ing" is not a namespace name`},
		{in: "shop;billing", wantErr: `"shop;billing" is not a namespace name`},
		{in: strings.Repeat("a", 64), wantErr: "no more than 63 characters"},
	} {
		got, err := parseWatchNamespaces(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseWatchNamespaces(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--watch-namespaces") {
				t.Errorf("parseWatchNamespaces(%q): the error %q does not name the flag", tc.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseWatchNamespaces(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestCacheOptionsWatchNamespaces(t *testing.T) {
	if got := cacheOptions(nil).DefaultNamespaces; got != nil {
		t.Fatalf("no --watch-namespaces must watch all namespaces, got %v", got)
	}
	got := cacheOptions([]string{"shop", "billing"}).DefaultNamespaces
	if len(got) != 2 {
		t.Fatalf("got %v, want shop and billing", got)
	}
	for _, ns := range []string{"shop", "billing"} {
		if _, ok := got[ns]; !ok {
			t.Errorf("%s not watched: %v", ns, got)
		}
	}
	if len(cacheOptions([]string{"shop"}).ByObject) == 0 {
		t.Error("the managed-by label filters of CacheByObject were dropped")
	}
}

func TestApplyRateLimit(t *testing.T) {
	for _, tc := range []struct {
		qps       float64
		burst     int
		wantQPS   float32
		wantBurst int
		wantErr   string
	}{
		{qps: 0, burst: 0, wantQPS: -1, wantBurst: 0}, // controller-runtime's "no client-side limit" kept
		{qps: 50, burst: 0, wantQPS: 50, wantBurst: 100},
		{qps: 0.2, burst: 0, wantQPS: 0.2, wantBurst: 1},
		{qps: 50, burst: 80, wantQPS: 50, wantBurst: 80},
		{qps: -1, wantErr: "--kube-api-qps=-1"},
		{qps: 10, burst: -5, wantErr: "--kube-api-burst=-5"},
		{qps: 0, burst: 30, wantErr: "needs --kube-api-qps"},
	} {
		cfg := &rest.Config{QPS: -1}
		err := applyRateLimit(cfg, tc.qps, tc.burst)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("applyRateLimit(%g, %d) = %v, want an error containing %q", tc.qps, tc.burst, err, tc.wantErr)
			}
			continue
		}
		if err != nil || cfg.QPS != tc.wantQPS || cfg.Burst != tc.wantBurst {
			t.Errorf("applyRateLimit(%g, %d): QPS %g, Burst %d, %v; want %g, %d", tc.qps, tc.burst, cfg.QPS, cfg.Burst, err, tc.wantQPS, tc.wantBurst)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(flag.NewFlagSet("manager", flag.ContinueOnError),
		[]string{"--watch-namespaces=shop,billing", "--database-max-connections=2", "--leader-elect"})
	if err != nil || o.dbMaxConns != 2 || !o.leaderElect || len(o.namespaces) != 2 {
		t.Fatalf("parseOptions: %+v, %v", o, err)
	}
	for args, want := range map[string]string{
		"--database-max-connections=0":  "--database-max-connections=0: must be at least 1",
		"--max-concurrent-reconciles=0": "--max-concurrent-reconciles=0: must be at least 1",
		"--watch-namespaces=Bad_NS":     "watch-namespaces",
	} {
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := parseOptions(fs, []string{args}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseOptions(%s) = %v, want an error containing %q", args, err, want)
		}
	}
}
