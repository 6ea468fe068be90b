package kvwindow_test

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// A copy of an event its caller published itself is decided from the create's refusal alone when the caller says
// which revision it knows (Claim.Known); any other revision is decided by reading, as without it.
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
		copyOf.Known = kvwindow.Known{Revision: won.Revision, Claimant: first.Claimant}
		got := claim(t, w, copyOf)
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
		got = claim(t, w, copyOf)
		if got.Status != kvwindow.Duplicate || !got.Published || got.Revision != newRev || reads != 1 {
			t.Fatalf("K=%d: stale knowledge: %+v after %d reads, want a Duplicate at %d read once", shards, got, reads, newRev)
		}

		// The claimant itself never takes its own claim for a copy (a redelivery is Owned).
		self := first
		self.Delivery = delivery(2)
		self.Known = kvwindow.Known{Revision: newRev, Claimant: first.Claimant}
		if got := claim(t, w, self); got.Status != kvwindow.Owned {
			t.Fatalf("K=%d: the holder's redelivery with Known: %+v, want Owned", shards, got)
		}
	}
}
