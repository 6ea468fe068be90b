package kvwindow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	if _, err := kvwindow.ManagerOf(w).Forget(ctx(t), "acme", "gh", "k-3"); err != nil {
		t.Fatal(err)
	}

	all, next, err := kvwindow.ManagerOf(w).List(ctx(t), "acme", "gh", 0, 100)
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
		es, nx, err := kvwindow.ManagerOf(w).List(ctx(t), "acme", "gh", from, 2)
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
	tenant, _, err := kvwindow.ManagerOf(w).List(ctx(t), "acme", "", 0, 100)
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
	if es, _, err := kvwindow.ManagerOf(w).List(ctx(t), "initech", "", 0, 10); err != nil || len(es) != 0 {
		t.Errorf("List of an empty tenant: %v %v", es, err)
	}
	if _, _, err := kvwindow.ManagerOf(w).List(ctx(t), "a.b", "", 0, 10); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Errorf("List with a bad tenant: %v", err)
	}
	if _, _, err := kvwindow.ManagerOf(w).List(ctx(t), "acme", "", 0, 0); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Errorf("List with limit 0: %v", err)
	}
}

// TestListBehindManyKeys lists a sparse scope, one claim and then four more behind many keys of another tenant,
// through a link that holds every byte the server sends for 1.2 s: the server's answer comes as late as it does
// in a bucket of millions of keys, where it scans message blocks for seconds to find the scope's next claim.
// Before the listing waited for the server, the first page came back empty without an error (the client's
// no-wait pull gave up after one second): "List zeta: 0 claims (next 0), want 3 and a next page".
func TestListBehindManyKeys(t *testing.T) {
	others := 200_000
	if raceEnabled {
		others = 20_000 // the detector slows the fill tenfold; the slow link is what the listing has to survive
	}
	srv := natstest.Run(t)
	js := jsFor(t, srv.URL(), nats.Timeout(10*time.Second))
	w := newWindow(t, js, kvwindow.DefaultConfig())
	add := func(tenant, key string, seq uint64) {
		t.Helper()
		claim(t, w, kvwindow.Claim{Tenant: tenant, Source: "gh", Key: key, TTL: time.Hour, Claimant: envelope(seq), Delivery: delivery(1)})
	}
	add("zeta", "z-0", 1)
	fillOthers(t, js, others)
	for i := 1; i < 5; i++ {
		add("zeta", fmt.Sprint("z-", i), uint64(i+1))
	}

	link := newSlowLink(t, srv.Opts.Port)
	slow := newWindow(t, jsFor(t, link.url, nats.Timeout(10*time.Second)), kvwindow.DefaultConfig())
	link.delay.Store(int64(1200 * time.Millisecond))
	es, next, err := kvwindow.ManagerOf(slow).List(ctxT(t, time.Minute), "zeta", "", 0, 3)
	if err != nil || len(es) != 3 || next == 0 {
		t.Fatalf("List zeta: %d claims (next %d, %v), want 3 and a next page", len(es), next, err)
	}
	rest, next2, err := kvwindow.ManagerOf(slow).List(ctxT(t, time.Minute), "zeta", "gh", next, 10)
	if err != nil || len(rest) != 2 || next2 != 0 {
		t.Fatalf("List zeta from %d: %d claims (next %d, %v), want the last 2", next, len(rest), next2, err)
	}
	var keys []string
	for _, e := range append(es, rest...) {
		keys = append(keys, e.Key)
	}
	if fmt.Sprint(keys) != "[z-0 z-1 z-2 z-3 z-4]" {
		t.Errorf("listed %v, want z-0 … z-4 in revision order", keys)
	}
	// An empty scope is the server's count of nothing, at once.
	link.delay.Store(0)
	if es, next, err := kvwindow.ManagerOf(slow).List(ctxT(t, time.Minute), "nobody", "", 0, 10); err != nil || len(es) != 0 || next != 0 {
		t.Errorf("List of an empty scope: %d claims, next %d, %v", len(es), next, err)
	}
	if n := consumers(t, js); n != 0 {
		t.Errorf("%d listing consumers left behind", n)
	}
}

// fillOthers writes n keys of tenant "other" straight into the bucket's stream (what a claim stores does not
// matter to a listing of another tenant), with async publishes.
func fillOthers(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	val := make([]byte, 40)
	for i := range n {
		m := &nats.Msg{Subject: fmt.Sprintf("$KV.dedupe-window.other.gh.k-%d", i), Data: val,
			Header: nats.Header{jetstream.MsgTTLHeader: []string{"3600"}}}
		if _, err := js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 1999 {
			waitPublished(t, js)
		}
	}
	waitPublished(t, js)
}

func waitPublished(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("async publishes not acknowledged within 30s")
	}
}

func consumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(ctxT(t, 10*time.Second), "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Consumers
}
