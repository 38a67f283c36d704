package main

import "testing"

func TestCacheOptionsWatchNamespaces(t *testing.T) {
	if got := cacheOptions("").DefaultNamespaces; got != nil {
		t.Fatalf("no --watch-namespaces must watch all namespaces, got %v", got)
	}
	got := cacheOptions(" shop, billing ,,").DefaultNamespaces
	if len(got) != 2 {
		t.Fatalf("got %v, want shop and billing", got)
	}
	for _, ns := range []string{"shop", "billing"} {
		if _, ok := got[ns]; !ok {
			t.Errorf("%s not watched: %v", ns, got)
		}
	}
	if len(cacheOptions("shop").ByObject) == 0 {
		t.Error("the managed-by label filters of CacheByObject were dropped")
	}
}
