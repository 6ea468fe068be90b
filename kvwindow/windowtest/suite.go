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

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

var tenantSeq atomic.Uint64

// tenant returns a tenant id unique to this process, so that subtests sharing one window never see each other's
// claims.
func tenant(t *testing.T) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, tenantSeq.Add(1))
}

// Run is the conformance suite for claim windows. newWindow is called once per subtest; it may return a fresh
// window or a shared one (every subtest uses its own tenant). The TTL subtest waits about a second of real time.
func Run(t *testing.T, newWindow func(t *testing.T) Claimer) {
	t.Run("FirstWinsThenOwnedThenDuplicate", func(t *testing.T) {
		t.Parallel()
		w := newWindow(t)
		c := kvwindow.Claim{Tenant: tenant(t), Source: "src", Key: "evt-1", TTL: time.Minute, Claimant: 7}
		first := mustClaim(t, w, c)
		if first.Status != kvwindow.Won || first.Revision == 0 {
			t.Fatalf("first claim: %+v, want Won with a revision", first)
		}
		again := mustClaim(t, w, c)
		if again != (kvwindow.Outcome{Status: kvwindow.Owned, Revision: first.Revision}) {
			t.Fatalf("same claimant again: %+v, want Owned rev %d", again, first.Revision)
		}
		other := c
		other.Claimant = 8
		dup := mustClaim(t, w, other)
		if dup != (kvwindow.Outcome{Status: kvwindow.Duplicate, Revision: first.Revision}) {
			t.Fatalf("other claimant: %+v, want Duplicate rev %d", dup, first.Revision)
		}
		// A different TTL does not change the decision.
		other.TTL = 5 * time.Second
		if got := mustClaim(t, w, other); got.Status != kvwindow.Duplicate {
			t.Fatalf("other claimant, other TTL: %+v, want Duplicate", got)
		}
	})

	t.Run("TenantAndSourceIsolation", func(t *testing.T) {
		t.Parallel()
		w := newWindow(t)
		ta, tb := tenant(t), tenant(t)
		base := kvwindow.Claim{Tenant: ta, Source: "s1", Key: "same-key", TTL: time.Minute, Claimant: 1}
		if got := mustClaim(t, w, base); got.Status != kvwindow.Won {
			t.Fatalf("base claim: %+v", got)
		}
		for name, c := range map[string]kvwindow.Claim{
			"other tenant":          {Tenant: tb, Source: "s1", Key: "same-key", TTL: time.Minute, Claimant: 2},
			"other source":          {Tenant: ta, Source: "s2", Key: "same-key", TTL: time.Minute, Claimant: 3},
			"source prefix":         {Tenant: ta, Source: "s", Key: "same-key", TTL: time.Minute, Claimant: 4},
			"tenant+source shifted": {Tenant: ta + "-s1", Source: "x", Key: "same-key", TTL: time.Minute, Claimant: 5},
		} {
			if got := mustClaim(t, w, c); got.Status != kvwindow.Won {
				t.Errorf("%s: %+v, want Won", name, got)
			}
		}
	})

	t.Run("ArbitraryKeyBytes", func(t *testing.T) {
		t.Parallel()
		w := newWindow(t)
		tn := tenant(t)
		long := strings.Repeat("k", 200)
		keys := []string{
			"a.b.c", "a b", "*", ">", "a.*.>", "..", ".", " ", "\x00", "\xff\xfe", "日本語🙂",
			"$KV.x.y", "=", "==", "a=b", "/", "\\", "\n", "\"quoted\"",
			strings.Repeat("x", kvwindow.MaxRawKey), strings.Repeat("x", kvwindow.MaxRawKey+1),
			long, long[:199] + "j", "stripe:evt_123", "type:" + strings.Repeat("ab", 32),
		}
		revs := map[uint64]string{}
		for i, k := range keys {
			c := kvwindow.Claim{Tenant: tn, Source: "s", Key: k, TTL: time.Minute, Claimant: uint64(100 + i)}
			got := mustClaim(t, w, c)
			if got.Status != kvwindow.Won {
				t.Errorf("key %q: %+v, want Won (keys must not collide)", k, got)
				continue
			}
			if prev, dup := revs[got.Revision]; dup {
				t.Errorf("key %q got revision %d, already given to %q", k, got.Revision, prev)
			}
			revs[got.Revision] = k
			c.Claimant++
			if got2 := mustClaim(t, w, c); got2.Status != kvwindow.Duplicate || got2.Revision != got.Revision {
				t.Errorf("key %q second claimant: %+v, want Duplicate rev %d", k, got2, got.Revision)
			}
		}
	})

	t.Run("InvalidClaimsRejected", func(t *testing.T) {
		t.Parallel()
		w := newWindow(t)
		tn := tenant(t)
		ctx := testCtx(t)
		for name, c := range map[string]kvwindow.Claim{
			"empty tenant":    {Tenant: "", Source: "s", Key: "k", TTL: time.Minute, Claimant: 1},
			"dot in tenant":   {Tenant: "a.b", Source: "s", Key: "k", TTL: time.Minute, Claimant: 1},
			"wildcard tenant": {Tenant: "*", Source: "s", Key: "k", TTL: time.Minute, Claimant: 1},
			"long tenant":     {Tenant: strings.Repeat("t", 65), Source: "s", Key: "k", TTL: time.Minute, Claimant: 1},
			"empty source":    {Tenant: tn, Source: "", Key: "k", TTL: time.Minute, Claimant: 1},
			"gt source":       {Tenant: tn, Source: ">", Key: "k", TTL: time.Minute, Claimant: 1},
			"space in source": {Tenant: tn, Source: "a b", Key: "k", TTL: time.Minute, Claimant: 1},
			"empty key":       {Tenant: tn, Source: "s", Key: "", TTL: time.Minute, Claimant: 1},
			"zero ttl":        {Tenant: tn, Source: "s", Key: "k", TTL: 0, Claimant: 1},
			"sub-second ttl":  {Tenant: tn, Source: "s", Key: "k", TTL: 500 * time.Millisecond, Claimant: 1},
		} {
			got, err := w.Claim(ctx, c)
			if err == nil {
				t.Errorf("%s: %+v, want an error", name, got)
				continue
			}
			if !errors.Is(err, kvwindow.ErrInvalid) || errors.Is(err, kvwindow.ErrUnavailable) {
				t.Errorf("%s: error %v should wrap ErrInvalid and not ErrUnavailable", name, err)
			}
		}
	})

	t.Run("TTLExpiryReadmits", func(t *testing.T) {
		t.Parallel()
		w := newWindow(t)
		c := kvwindow.Claim{Tenant: tenant(t), Source: "s", Key: "short-lived", TTL: time.Second, Claimant: 1}
		first := mustClaim(t, w, c)
		if first.Status != kvwindow.Won {
			t.Fatalf("first claim: %+v", first)
		}
		next := c
		next.Claimant = 2
		next.TTL = time.Minute
		var won kvwindow.Outcome
		poll(t, 20*time.Second, func() error {
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
		if got := mustClaim(t, w, next); got != (kvwindow.Outcome{Status: kvwindow.Owned, Revision: won.Revision}) {
			t.Fatalf("new claimant again: %+v, want Owned rev %d", got, won.Revision)
		}
		if got := mustClaim(t, w, c); got != (kvwindow.Outcome{Status: kvwindow.Duplicate, Revision: won.Revision}) {
			t.Fatalf("old claimant after re-admission: %+v, want Duplicate rev %d", got, won.Revision)
		}
	})

	t.Run("ConcurrentClaimsOneWinner", func(t *testing.T) {
		t.Parallel()
		w := newWindow(t)
		tn := tenant(t)
		const n = 50
		for round := range 3 {
			key := fmt.Sprintf("contended-%d", round)
			var wg sync.WaitGroup
			outs := make([]kvwindow.Outcome, n)
			errs := make([]error, n)
			start := make(chan struct{})
			ctx := testCtx(t)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					outs[i], errs[i] = w.Claim(ctx, kvwindow.Claim{Tenant: tn, Source: "s", Key: key, TTL: time.Minute, Claimant: uint64(1000*round + i + 1)})
				}()
			}
			close(start)
			wg.Wait()
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
				if outs[i] != (kvwindow.Outcome{Status: kvwindow.Duplicate, Revision: outs[winner].Revision}) {
					t.Fatalf("round %d claim %d: %+v, want Duplicate rev %d", round, i, outs[i], outs[winner].Revision)
				}
			}
		}
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustClaim(t *testing.T, w Claimer, c kvwindow.Claim) kvwindow.Outcome {
	t.Helper()
	out, err := w.Claim(testCtx(t), c)
	if err != nil {
		t.Fatalf("claim %+v: %v", c, err)
	}
	return out
}

// poll calls cond until it returns nil or timeout passes.
func poll(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not met after %s: %v", timeout, err)
		}
		time.Sleep(wait) // polling interval
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}
