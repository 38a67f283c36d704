package main

import (
	"reflect"
	"strings"
	"testing"
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
