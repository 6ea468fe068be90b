package kvwindow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

func TestList(t *testing.T) {
	srv := natstest.Run(t)
	w := newWindow(t, jsFor(t, srv.URL()), kvwindow.DefaultConfig())
	ctx := func(t *testing.T) context.Context { return ctxT(t, 10*time.Second) }
	add := func(tenant, source, key string, seq uint64) {
		t.Helper()
		claim(t, w, kvwindow.Claim{Tenant: tenant, Source: source, Key: key, TTL: time.Hour, Claimant: envelope(seq), Delivery: delivery(1)})
	}
	long := string(make([]byte, 100)) // stored under its hash; List reports the key from the claim's value
	for i := range 7 {
		add("acme", "gh", fmt.Sprint("k-", i), uint64(i+1))
	}
	add("acme", "stripe", "evt_1", 20)
	add("acme", "stripe", long, 21)
	add("globex", "gh", "k-0", 30)
	if _, err := w.Forget(ctx(t), "acme", "gh", "k-3"); err != nil {
		t.Fatal(err)
	}

	all, next, err := w.List(ctx(t), "acme", "gh", 0, 100)
	if err != nil || next != 0 {
		t.Fatalf("List: %v (next %d)", err, next)
	}
	if len(all) != 6 {
		t.Fatalf("List acme/gh: %d claims, want 6 (k-3 was forgotten)", len(all))
	}
	for _, e := range all {
		if e.Tenant != "acme" || e.Source != "gh" || e.Key == "k-3" || e.KVKey == "" || e.Claimant.Seq == 0 || e.TTL != time.Hour {
			t.Errorf("entry %+v", e)
		}
	}
	// Pages of two.
	var paged []string
	from := uint64(0)
	for page := 0; ; page++ {
		es, nx, err := w.List(ctx(t), "acme", "gh", from, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) > 2 || page > 5 {
			t.Fatalf("page %d: %d entries", page, len(es))
		}
		for _, e := range es {
			paged = append(paged, e.Key)
		}
		if nx == 0 {
			break
		}
		from = nx
	}
	if len(paged) != 6 {
		t.Errorf("paged through %v, want the 6 claims", paged)
	}
	tenant, _, err := w.List(ctx(t), "acme", "", 0, 100)
	if err != nil || len(tenant) != 8 {
		t.Fatalf("List acme: %d claims (%v), want 8", len(tenant), err)
	}
	found := false
	for _, e := range tenant {
		found = found || e.Key == long
	}
	if !found {
		t.Error("the hashed key is not listed with its exact key")
	}
	if es, _, err := w.List(ctx(t), "initech", "", 0, 10); err != nil || len(es) != 0 {
		t.Errorf("List of an empty tenant: %v %v", es, err)
	}
	if _, _, err := w.List(ctx(t), "a.b", "", 0, 10); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Errorf("List with a bad tenant: %v", err)
	}
	if _, _, err := w.List(ctx(t), "acme", "", 0, 0); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Errorf("List with limit 0: %v", err)
	}
}
