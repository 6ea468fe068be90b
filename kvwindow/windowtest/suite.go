package windowtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

var tenantSeq atomic.Uint64

// Claimant stamps and consumer creation times as JetStream would report them (unix nanoseconds).
const (
	stampBase = int64(1_700_000_000_000_000_000)
	consumer1 = int64(1_700_000_500_000_000_000)
)

// claimant is the envelope stored at seq in the input stream.
func claimant(seq uint64) kvwindow.Claimant {
	return kvwindow.Claimant{Seq: seq, Stamp: stampBase + int64(seq)*1000}
}

// delivery is the n-th delivery by the (first) consumer.
func delivery(n uint64) kvwindow.Delivery { return kvwindow.Delivery{Consumer: consumer1, Count: n} }

// tenant returns a tenant id unique to this process, so that subtests sharing one window never see each other's
// claims.
func tenant(t *testing.T) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, tenantSeq.Add(1))
}

// Run is the conformance suite for claim windows. newWindow is called once per subtest; it may return a fresh
// window or a shared one (every subtest uses its own tenant). The TTL subtest waits about a second of real time.
func Run(t *testing.T, newWindow func(t *testing.T) Claimer) {
	// run runs test in parallel on a window of newWindow's, with a tenant of its own.
	run := func(name string, test func(t *testing.T, w Claimer, tn string)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, newWindow(t), tenant(t))
		})
	}
	run("FirstWinsThenOwnedThenDuplicate", func(t *testing.T, w Claimer, tn string) {
		c := kvwindow.Claim{Tenant: tn, Source: "src", Key: "evt-1", TTL: time.Minute, Claimant: claimant(7), Delivery: delivery(1)}
		first := mustClaim(t, w, c)
		if first.Status != kvwindow.Won || first.Revision == 0 {
			t.Fatalf("first claim: %+v, want Won with a revision", first)
		}
		again := mustClaim(t, w, c)
		expect(t, "same claimant again", again, kvwindow.Owned, first.Revision)
		other := c
		other.Claimant = claimant(8)
		dup := mustClaim(t, w, other)
		expect(t, "other claimant", dup, kvwindow.Duplicate, first.Revision)
		// A different TTL does not change the decision.
		other.TTL = 5 * time.Second
		if got := mustClaim(t, w, other); got.Status != kvwindow.Duplicate {
			t.Fatalf("other claimant, other TTL: %+v, want Duplicate", got)
		}
	})

	run("TenantAndSourceIsolation", func(t *testing.T, w Claimer, tn string) {
		ta, tb := tn, tenant(t)
		base := kvwindow.Claim{Tenant: ta, Source: "s1", Key: "same-key", TTL: time.Minute, Claimant: claimant(1)}
		if got := mustClaim(t, w, base); got.Status != kvwindow.Won {
			t.Fatalf("base claim: %+v", got)
		}
		for name, c := range map[string]kvwindow.Claim{
			"other tenant":          {Tenant: tb, Source: "s1", Key: "same-key", TTL: time.Minute, Claimant: claimant(2)},
			"other source":          {Tenant: ta, Source: "s2", Key: "same-key", TTL: time.Minute, Claimant: claimant(3)},
			"source prefix":         {Tenant: ta, Source: "s", Key: "same-key", TTL: time.Minute, Claimant: claimant(4)},
			"tenant+source shifted": {Tenant: ta + "-s1", Source: "x", Key: "same-key", TTL: time.Minute, Claimant: claimant(5)},
		} {
			if got := mustClaim(t, w, c); got.Status != kvwindow.Won {
				t.Errorf("%s: %+v, want Won", name, got)
			}
		}
	})

	run("MarkPublished", func(t *testing.T, w Claimer, tn string) {
		c := kvwindow.Claim{Tenant: tn, Source: "src", Key: "pub-1", TTL: time.Minute, Claimant: claimant(41), Delivery: delivery(1)}
		first := mustClaim(t, w, c)
		if first.Status != kvwindow.Won || first.Published {
			t.Fatalf("first claim: %+v", first)
		}
		marked, ok, err := w.MarkPublished(testCtx(t), c, first.Revision, time.Time{})
		if err != nil || !ok || marked <= first.Revision {
			t.Fatalf("MarkPublished at the claim's revision %d: %d %v %v, want a later revision", first.Revision, marked, ok, err)
		}
		if rev, ok, err := w.MarkPublished(testCtx(t), c, first.Revision, time.Time{}); err != nil || ok || rev != 0 {
			t.Errorf("MarkPublished at a revision that moved on: %d %v %v, want false", rev, ok, err)
		}
		if again, ok, err := w.MarkPublished(testCtx(t), c, marked, time.Time{}); err != nil || !ok || again <= marked {
			t.Errorf("MarkPublished at the revision the mark returned: %d %v %v, want a later revision", again, ok, err)
		}
		c.Delivery = delivery(2)
		later := mustClaim(t, w, c)
		if later.Status != kvwindow.Owned || !later.Published {
			t.Fatalf("a later delivery after the mark: %+v, want Owned and Published", later)
		}
		c.Delivery = delivery(3)
		if again := mustClaim(t, w, c); again.Status != kvwindow.Owned || !again.Published {
			t.Errorf("the mark survives a takeover: %+v", again)
		}
		other := c
		other.Claimant = claimant(42)
		if dup := mustClaim(t, w, other); dup.Status != kvwindow.Duplicate || !dup.Published || dup.HolderSeq != 41 {
			t.Errorf("another envelope: %+v, want Duplicate, Published (the holder marked it), holder seq 41", dup)
		}
	})

	run("DuplicateWaitsForHolder", func(t *testing.T, w Claimer, tn string) {
		holder := kvwindow.Claim{Tenant: tn, Source: "s", Key: "held", TTL: time.Minute, Claimant: claimant(51), Delivery: delivery(1)}
		copyOf := holder
		copyOf.Claimant = claimant(52)
		won := mustClaim(t, w, holder)
		dup := mustClaim(t, w, copyOf)
		if dup.Status != kvwindow.Duplicate || dup.Published || dup.HolderSeq != 51 || !dup.FirstClaimed.Equal(won.FirstClaimed) {
			t.Fatalf("copy while the holder is undecided: %+v, want Duplicate, not Published, holder seq 51, first claimed %s",
				dup, won.FirstClaimed)
		}
		marked, ok, err := w.MarkPublished(testCtx(t), holder, won.Revision, time.Time{})
		if err != nil || !ok {
			t.Fatalf("MarkPublished: %v %v", ok, err)
		}
		dup = mustClaim(t, w, copyOf)
		if dup.Status != kvwindow.Duplicate || !dup.Published || dup.Revision != marked || !dup.FirstClaimed.Equal(won.FirstClaimed) {
			t.Fatalf("copy after the holder's mark: %+v, want Duplicate, Published, rev %d", dup, marked)
		}
		// An undecided holder that gives up lets the copy through.
		other := kvwindow.Claim{Tenant: tn, Source: "s", Key: "released", TTL: time.Minute, Claimant: claimant(53), Delivery: delivery(1)}
		held := mustClaim(t, w, other)
		if ok, err := w.Release(testCtx(t), other, held.Revision, false); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		other.Claimant = claimant(54)
		if got := mustClaim(t, w, other); got.Status != kvwindow.Won {
			t.Fatalf("copy after the holder released: %+v, want Won", got)
		}
	})

	run("FirstClaimedSurvivesTakeoversAndMarks", func(t *testing.T, w Claimer, tn string) {
		c := kvwindow.Claim{Tenant: tn, Source: "s", Key: "first", TTL: time.Minute, Claimant: claimant(61), Delivery: delivery(1)}
		won := mustClaim(t, w, c)
		if won.Status != kvwindow.Won || won.FirstClaimed.IsZero() || won.FirstClaimed.After(time.Now()) {
			t.Fatalf("first claim: %+v, want Won with a first claim time", won)
		}
		f := won.FirstClaimed
		check := func(what string, got kvwindow.Outcome, want kvwindow.Status) {
			t.Helper()
			if got.Status != want || !got.FirstClaimed.Equal(f) {
				t.Fatalf("%s: %+v, want %v first claimed %s", what, got, want, f)
			}
		}
		check("same delivery again", mustClaim(t, w, c), kvwindow.Owned)
		c.Delivery = delivery(2)
		took := mustClaim(t, w, c)
		check("takeover", took, kvwindow.Owned)
		// A mark without the first claim time reads it from the claim; one with it writes it as given.
		marked, ok, err := w.MarkPublished(testCtx(t), c, took.Revision, time.Time{})
		if err != nil || !ok {
			t.Fatalf("MarkPublished: %v %v", ok, err)
		}
		check("after a mark", mustClaim(t, w, c), kvwindow.Owned)
		c.Delivery = delivery(3)
		took = mustClaim(t, w, c)
		check("takeover after a mark", took, kvwindow.Owned)
		if !took.Published || took.Revision <= marked {
			t.Fatalf("takeover after a mark: %+v, want Published after revision %d", took, marked)
		}
		if _, ok, err := w.MarkPublished(testCtx(t), c, took.Revision, took.FirstClaimed); err != nil || !ok {
			t.Fatalf("MarkPublished with the first claim time: %v %v", ok, err)
		}
		c.Delivery = delivery(4)
		check("takeover after a second mark", mustClaim(t, w, c), kvwindow.Owned)
		c.Delivery = delivery(2)
		check("an earlier delivery", mustClaim(t, w, c), kvwindow.Stale)
		c.Claimant = claimant(62)
		check("a copy", mustClaim(t, w, c), kvwindow.Duplicate)
	})

	run("ArbitraryKeyBytes", func(t *testing.T, w Claimer, tn string) {
		long := strings.Repeat("k", 200)
		keys := []string{
			"a.b.c", "a b", "*", ">", "a.*.>", "..", ".", " ", "\x00", "\xff\xfe", "日本語🙂",
			"$KV.x.y", "=", "==", "a=b", "/", "\\", "\n", "\"quoted\"",
			strings.Repeat("x", kvwindow.MaxRawKey), strings.Repeat("x", kvwindow.MaxRawKey+1),
			long, long[:199] + "j", "stripe:evt_123", "type:" + strings.Repeat("ab", 32),
		}
		// Won for every key proves that no two keys share a stored claim. (Revisions are not compared across keys:
		// a sharded window numbers each bucket's claims on its own.)
		for i, k := range keys {
			c := kvwindow.Claim{Tenant: tn, Source: "s", Key: k, TTL: time.Minute, Claimant: claimant(uint64(100 + i)), Delivery: delivery(1)}
			got := mustClaim(t, w, c)
			if got.Status != kvwindow.Won {
				t.Errorf("key %q: %+v, want Won (keys must not collide)", k, got)
				continue
			}
			c.Claimant = claimant(uint64(1000 + i))
			if got2 := mustClaim(t, w, c); got2.Status != kvwindow.Duplicate || got2.Revision != got.Revision {
				t.Errorf("key %q second claimant: %+v, want Duplicate rev %d", k, got2, got.Revision)
			}
		}
	})

	run("InvalidClaimsRejected", func(t *testing.T, w Claimer, tn string) {
		ctx := testCtx(t)
		for name, c := range map[string]kvwindow.Claim{
			"empty tenant":    {Tenant: "", Source: "s", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"dot in tenant":   {Tenant: "a.b", Source: "s", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"wildcard tenant": {Tenant: "*", Source: "s", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"long tenant":     {Tenant: strings.Repeat("t", 65), Source: "s", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"empty source":    {Tenant: tn, Source: "", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"gt source":       {Tenant: tn, Source: ">", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"space in source": {Tenant: tn, Source: "a b", Key: "k", TTL: time.Minute, Claimant: claimant(1)},
			"empty key":       {Tenant: tn, Source: "s", Key: "", TTL: time.Minute, Claimant: claimant(1)},
			"zero ttl":        {Tenant: tn, Source: "s", Key: "k", TTL: 0, Claimant: claimant(1)},
			"sub-second ttl":  {Tenant: tn, Source: "s", Key: "k", TTL: 500 * time.Millisecond, Claimant: claimant(1)},
		} {
			got, err := w.Claim(ctx, c, kvwindow.Known{})
			if err == nil {
				t.Errorf("%s: %+v, want an error", name, got)
				continue
			}
			if !errors.Is(err, kvwindow.ErrInvalid) || errors.Is(err, kvwindow.ErrUnavailable) {
				t.Errorf("%s: error %v should wrap ErrInvalid and not ErrUnavailable", name, err)
			}
		}
	})

	run("TTLExpiryReadmits", func(t *testing.T, w Claimer, tn string) {
		c := kvwindow.Claim{Tenant: tn, Source: "s", Key: "short-lived", TTL: time.Second, Claimant: claimant(1), Delivery: delivery(1)}
		first := mustClaim(t, w, c)
		if first.Status != kvwindow.Won {
			t.Fatalf("first claim: %+v", first)
		}
		next := c
		next.Claimant = claimant(2)
		next.TTL = time.Minute
		var won kvwindow.Outcome
		natstest.Eventually(t, 20*time.Second, func() error {
			got := mustClaim(t, w, next)
			switch got.Status {
			case kvwindow.Won:
				won = got
				return nil
			case kvwindow.Duplicate:
				if got.Revision != first.Revision {
					t.Fatalf("before expiry: %+v, want Duplicate rev %d", got, first.Revision)
				}
				return fmt.Errorf("claim still held")
			}
			t.Fatalf("claimant 2 before expiry: %+v", got)
			return nil
		})
		if won.Revision <= first.Revision {
			t.Fatalf("re-admitted claim revision %d, want > %d", won.Revision, first.Revision)
		}
		expect(t, "new claimant again", mustClaim(t, w, next), kvwindow.Owned, won.Revision)
		expect(t, "old claimant after re-admission", mustClaim(t, w, c), kvwindow.Duplicate, won.Revision)
	})

	run("ConcurrentClaimsOneWinner", func(t *testing.T, w Claimer, tn string) {
		const n = 50
		for round := range 3 {
			key := fmt.Sprintf("contended-%d", round)
			outs, errs := claimAtOnce(t, w, n, func(i int) kvwindow.Claim {
				return kvwindow.Claim{Tenant: tn, Source: "s", Key: key, TTL: time.Minute,
					Claimant: claimant(uint64(1000*round + i + 1)), Delivery: delivery(1)}
			})
			won, winner := 0, -1
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("claim %d: %v", i, errs[i])
				}
				if outs[i].Status == kvwindow.Won {
					won++
					winner = i
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d winners, want exactly 1: %+v", round, won, outs)
			}
			for i := range n {
				if i == winner {
					continue
				}
				expect(t, fmt.Sprintf("round %d claim %d", round, i), outs[i], kvwindow.Duplicate, outs[winner].Revision)
			}
		}
	})

	run("LaterDeliveryTakesOver", func(t *testing.T, w Claimer, tn string) {
		c := kvwindow.Claim{Tenant: tn, Source: "s", Key: "redelivered", TTL: time.Minute, Claimant: claimant(7), Delivery: delivery(1)}
		first := mustClaim(t, w, c)
		if first.Status != kvwindow.Won {
			t.Fatalf("first delivery: %+v, want Won", first)
		}
		second := c
		second.Delivery = delivery(2)
		took := mustClaim(t, w, second)
		if took.Status != kvwindow.Owned || took.Revision <= first.Revision {
			t.Fatalf("second delivery: %+v, want Owned with a revision after %d", took, first.Revision)
		}
		expect(t, "second delivery again", mustClaim(t, w, second), kvwindow.Owned, took.Revision)
		expect(t, "first delivery after the takeover", mustClaim(t, w, c), kvwindow.Stale, took.Revision)
		other := c
		other.Claimant, other.Delivery = claimant(8), delivery(9)
		expect(t, "other claimant", mustClaim(t, w, other), kvwindow.Duplicate, took.Revision)
		// A re-created consumer restarts its delivery counts: its first delivery is later than any of the old one's.
		recreated := c
		recreated.Delivery = kvwindow.Delivery{Consumer: consumer1 + 1, Count: 1}
		again := mustClaim(t, w, recreated)
		if again.Status != kvwindow.Owned || again.Revision <= took.Revision {
			t.Fatalf("first delivery by a re-created consumer: %+v, want Owned with a revision after %d", again, took.Revision)
		}
		second.Delivery = delivery(5)
		expect(t, "old consumer's delivery 5", mustClaim(t, w, second), kvwindow.Stale, again.Revision)
	})

	run("ClaimantIdentity", func(t *testing.T, w Claimer, tn string) {
		unstamped := kvwindow.Claimant{Seq: 7} // a claimant is its sequence and stamp: the sequence alone never matches
		for i, tc := range []struct {
			name            string
			held            kvwindow.Claimant
			heldDelivery    kvwindow.Delivery
			claim           kvwindow.Claimant
			claimDelivery   kvwindow.Delivery
			want            kvwindow.Status
			wantNewRevision bool // the claim was taken over (a new revision) rather than left as it was
		}{
			{"same claimant same delivery", claimant(7), delivery(1), claimant(7), delivery(1), kvwindow.Owned, false},
			{"other sequence", claimant(7), delivery(1), claimant(8), delivery(1), kvwindow.Duplicate, false},
			{"same sequence other stamp (re-created input stream)", claimant(7), delivery(1),
				kvwindow.Claimant{Seq: 7, Stamp: claimant(7).Stamp + 1}, delivery(1), kvwindow.Duplicate, false},
			{"same sequence other stamp, later delivery", claimant(7), delivery(1),
				kvwindow.Claimant{Seq: 7, Stamp: claimant(7).Stamp + 1}, delivery(2), kvwindow.Duplicate, false},
			{"unstamped claim, same sequence", unstamped, delivery(1), claimant(7), delivery(2), kvwindow.Duplicate, false},
			{"unstamped claimant against a stamped claim", claimant(7), delivery(1), unstamped, delivery(2), kvwindow.Duplicate, false},
		} {
			key := fmt.Sprintf("identity-%d", i)
			held := mustClaim(t, w, kvwindow.Claim{Tenant: tn, Source: "s", Key: key, TTL: time.Minute, Claimant: tc.held, Delivery: tc.heldDelivery})
			if held.Status != kvwindow.Won {
				t.Fatalf("%s: held claim: %+v", tc.name, held)
			}
			got := mustClaim(t, w, kvwindow.Claim{Tenant: tn, Source: "s", Key: key, TTL: time.Minute, Claimant: tc.claim, Delivery: tc.claimDelivery})
			if got.Status != tc.want || (got.Revision != held.Revision) != tc.wantNewRevision {
				t.Errorf("%s: %+v, want %v (held revision %d, new revision %v)", tc.name, got, tc.want, held.Revision, tc.wantNewRevision)
			}
		}
	})

	run("ReleaseOnlyOwnRevision", func(t *testing.T, w Claimer, tn string) {
		ctx := testCtx(t)
		release := func(c kvwindow.Claim, rev uint64) bool {
			t.Helper()
			ok, err := w.Release(ctx, c, rev, false)
			if err != nil {
				t.Fatalf("release %s rev %d: %v", c.Key, rev, err)
			}
			return ok
		}
		c := kvwindow.Claim{Tenant: tn, Source: "s", Key: "released", TTL: time.Minute, Claimant: claimant(1), Delivery: delivery(1)}
		won := mustClaim(t, w, c)
		c.Delivery = delivery(2)
		took := mustClaim(t, w, c)
		if took.Status != kvwindow.Owned {
			t.Fatalf("takeover: %+v", took)
		}
		// The first delivery's revision is stale: releasing it must not free the second delivery's claim.
		if release(c, won.Revision) {
			t.Fatal("release with a stale revision reported success")
		}
		other := kvwindow.Claim{Tenant: tn, Source: "s", Key: "released", TTL: time.Minute, Claimant: claimant(2), Delivery: delivery(1)}
		expect(t, "after a stale release", mustClaim(t, w, other), kvwindow.Duplicate, took.Revision)
		if !release(c, took.Revision) {
			t.Fatal("release with the holder's revision did nothing")
		}
		if release(c, took.Revision) {
			t.Fatal("second release reported success")
		}
		next := mustClaim(t, w, other)
		if next.Status != kvwindow.Won || next.Revision <= took.Revision {
			t.Fatalf("claim after release: %+v, want Won after revision %d", next, took.Revision)
		}
		// The released revision cannot free the new holder's claim either.
		if release(c, took.Revision) {
			t.Fatal("release of an old revision freed the new holder's claim")
		}
		expect(t, "new holder after a stale release", mustClaim(t, w, other), kvwindow.Owned, next.Revision)
		never := other
		never.Key = "never-claimed"
		if release(never, next.Revision) {
			t.Fatal("release of a key never claimed reported success")
		}
		for name, bad := range map[string]struct {
			tenant, source, key string
			rev                 uint64
		}{
			"wildcard tenant": {"*", "s", "k", 1},
			"dot in source":   {tn, "a.b", "k", 1},
			"empty key":       {tn, "s", "", 1},
			"revision 0":      {tn, "s", "released", 0},
		} {
			bc := kvwindow.Claim{Tenant: bad.tenant, Source: bad.source, Key: bad.key, TTL: time.Minute, Claimant: claimant(1), Delivery: delivery(1)}
			if _, err := w.Release(ctx, bc, bad.rev, false); !errors.Is(err, kvwindow.ErrInvalid) {
				t.Errorf("release with %s: %v, want ErrInvalid", name, err)
			}
		}
	})

	run("ReleaseMarker", func(t *testing.T, w Claimer, tn string) {
		// A release leaves a marker naming the envelope: its later delivery is told DeadLettered (nothing
		// written); another envelope claims over it, told whether the event may be stored, and keeps that across
		// a takeover.
		ctx := testCtx(t)
		a := kvwindow.Claim{Tenant: tn, Source: "s", Key: "marker", TTL: time.Minute, Claimant: claimant(71), Delivery: delivery(2)}
		held := mustClaim(t, w, a)
		if ok, err := w.Release(ctx, a, held.Revision, true); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		if _, ok, err := w.Get(ctx, tn, "s", "marker"); ok || err != nil {
			t.Fatalf("Get of a release marker: %v %v, want no claim", ok, err)
		}
		later := a
		later.Delivery = delivery(3)
		dl := mustClaim(t, w, later)
		if dl.Status != kvwindow.DeadLettered {
			t.Fatalf("later delivery of the released envelope: %+v, want DeadLettered", dl)
		}
		earlier := a
		earlier.Delivery = delivery(1)
		if got := mustClaim(t, w, earlier); got.Status != kvwindow.DeadLettered || got.Revision != dl.Revision {
			t.Fatalf("earlier delivery of the released envelope: %+v, want DeadLettered rev %d", got, dl.Revision)
		}
		b := kvwindow.Claim{Tenant: tn, Source: "s", Key: "marker", TTL: time.Minute, Claimant: claimant(72), Delivery: delivery(1)}
		won := mustClaim(t, w, b)
		if won.Status != kvwindow.Won || !won.MayBeStored || won.Revision <= dl.Revision {
			t.Fatalf("copy over a may-be-stored release marker: %+v, want Won, MayBeStored", won)
		}
		b.Delivery = delivery(2)
		if took := mustClaim(t, w, b); took.Status != kvwindow.Owned || !took.MayBeStored {
			t.Fatalf("takeover of that claim: %+v, want Owned, MayBeStored", took)
		}
		if got := mustClaim(t, w, later); got.Status != kvwindow.Duplicate {
			t.Fatalf("the released envelope once a copy holds the key: %+v, want Duplicate", got)
		}
	})

	run("ConcurrentDeliveriesOneClaimant", func(t *testing.T, w Claimer, tn string) {
		const n = 16
		for round := range 3 {
			key := fmt.Sprintf("deliveries-%d", round)
			c := kvwindow.Claim{Tenant: tn, Source: "s", Key: key, TTL: time.Minute, Claimant: claimant(uint64(round + 1))}
			outs, errs := claimAtOnce(t, w, n, func(i int) kvwindow.Claim {
				c := c
				c.Delivery = delivery(uint64(i + 1))
				return c
			})
			won := 0
			holders := map[uint64]int{} // revision written → delivery index that wrote it
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("round %d delivery %d: %v", round, i+1, errs[i])
				}
				switch outs[i].Status {
				case kvwindow.Won, kvwindow.Owned:
					if outs[i].Status == kvwindow.Won {
						won++
					}
					if j, dup := holders[outs[i].Revision]; dup {
						t.Fatalf("round %d: deliveries %d and %d both hold revision %d", round, j+1, i+1, outs[i].Revision)
					}
					holders[outs[i].Revision] = i
				case kvwindow.Stale:
				default:
					t.Fatalf("round %d delivery %d: %+v, want Won, Owned or Stale", round, i+1, outs[i])
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d Won, want exactly 1: %+v", round, won, outs)
			}
			// A Stale delivery was told of a later delivery's claim.
			for i := range n {
				if outs[i].Status != kvwindow.Stale {
					continue
				}
				if j, ok := holders[outs[i].Revision]; !ok || j <= i {
					t.Fatalf("round %d delivery %d: Stale rev %d, which no later delivery holds (%+v)", round, i+1, outs[i].Revision, outs)
				}
			}
			// The last delivery holds the claim in the end.
			last := outs[n-1]
			if last.Status != kvwindow.Won && last.Status != kvwindow.Owned {
				t.Fatalf("round %d: last delivery %+v", round, last)
			}
			c.Delivery = delivery(n)
			expect(t, fmt.Sprintf("round %d: last delivery again", round), mustClaim(t, w, c), kvwindow.Owned, last.Revision)
			c.Delivery = delivery(n - 1)
			expect(t, fmt.Sprintf("round %d: delivery %d again", round, n-1), mustClaim(t, w, c), kvwindow.Stale, last.Revision)
		}
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// claimAtOnce makes the n claims claimOf returns all at once, and returns their outcomes and errors.
func claimAtOnce(t *testing.T, w Claimer, n int, claimOf func(i int) kvwindow.Claim) ([]kvwindow.Outcome, []error) {
	outs, errs := make([]kvwindow.Outcome, n), make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	ctx := testCtx(t)
	for i := range n {
		c := claimOf(i)
		wg.Go(func() {
			<-start
			outs[i], errs[i] = w.Claim(ctx, c, kvwindow.Known{})
		})
	}
	close(start)
	wg.Wait()
	return outs, errs
}

func mustClaim(t *testing.T, w Claimer, c kvwindow.Claim) kvwindow.Outcome {
	t.Helper()
	out, err := w.Claim(testCtx(t), c, kvwindow.Known{})
	if err != nil {
		t.Fatalf("claim %+v: %v", c, err)
	}
	return out
}

// expect fails t unless got decided status at revision rev (the holder's details aside).
func expect(t *testing.T, what string, got kvwindow.Outcome, status kvwindow.Status, rev uint64) {
	t.Helper()
	if got.Status != status || got.Revision != rev {
		t.Fatalf("%s: %+v, want %v rev %d", what, got, status, rev)
	}
}
