package kvwindow_test

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// A copy of an event its caller published itself is decided from the create's refusal alone when the caller says
// which revision it knows (Claim's known); any other revision is decided by reading, as without it.
func TestKnownClaimDecidesWithoutRead(t *testing.T) {
	srv := natstest.Run(t)
	for _, shards := range []int{1, 4} {
		cfg := kvwindow.DefaultConfig()
		cfg.Bucket, cfg.Shards = "known-"+string(rune('0'+shards)), shards
		w := newWindow(t, jsFor(t, srv.ClientURL()), cfg)
		first := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "evt-1", TTL: time.Minute, Claimant: envelope(10), Delivery: delivery(1)}
		won := claim(t, w, first)
		if won.Status != kvwindow.Won {
			t.Fatalf("K=%d: first claim %+v", shards, won)
		}
		var reads int
		kvwindow.SetReadHook(w, func(string) bool { reads++; return false })

		copyOf := first
		copyOf.Claimant = envelope(11)
		known := kvwindow.Known{Revision: won.Revision, Claimant: first.Claimant}
		got := claimKnown(t, w, copyOf, known)
		if got.Status != kvwindow.Duplicate || !got.Published || got.Revision != won.Revision || got.HolderSeq != 10 || reads != 0 {
			t.Fatalf("K=%d: known copy: %+v after %d reads, want a published Duplicate at %d without a read", shards, got, reads, won.Revision)
		}
		if n := kvwindow.KnownDuplicates(w); n != 1 {
			t.Fatalf("K=%d: %d known duplicates counted, want 1", shards, n)
		}

		// The key moved on (the publish was recorded in the claim: a new revision): the stale knowledge reads.
		newRev, ok, err := w.MarkPublished(ctxT(t, 10*time.Second), first, won.Revision, time.Time{})
		if err != nil || !ok {
			t.Fatalf("K=%d: mark: %v %v", shards, ok, err)
		}
		got = claimKnown(t, w, copyOf, known)
		if got.Status != kvwindow.Duplicate || !got.Published || got.Revision != newRev || reads != 1 {
			t.Fatalf("K=%d: stale knowledge: %+v after %d reads, want a Duplicate at %d read once", shards, got, reads, newRev)
		}

		// The claimant itself never takes its own claim for a copy (a redelivery is Owned).
		self := first
		self.Delivery = delivery(2)
		if got := claimKnown(t, w, self, kvwindow.Known{Revision: newRev, Claimant: first.Claimant}); got.Status != kvwindow.Owned {
			t.Fatalf("K=%d: the holder's redelivery with Known: %+v, want Owned", shards, got)
		}
	}
}

// claimKnown claims c in w with known, failing the test on an error.
func claimKnown(t testing.TB, w *kvwindow.Window, c kvwindow.Claim, known kvwindow.Known) kvwindow.Outcome {
	t.Helper()
	out, err := w.Claim(ctxT(t, 10*time.Second), c, known)
	if err != nil {
		t.Fatalf("claim %+v: %v", c, err)
	}
	return out
}
