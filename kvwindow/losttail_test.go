package kvwindow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestLostTailReportedAsLostWrites: a replica-1 bucket whose server lost its latest writes (here all of them: the
// stream's message files removed while it was down, as a hard crash loses what was not synced) comes back with the
// same creation time and its last sequence back. The next write of the worker is stored at or below what it had
// seen: its claims are lost, and the error says that the bucket lost its latest writes, not that it was created
// again. Before the fix it said "was created again".
func TestLostTailReportedAsLostWrites(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	w := newWindow(t, js, kvwindow.DefaultConfig())
	fill(t, w, 3) // sequences 1 to 3
	s.Shutdown()
	msgs, err := filepath.Glob(filepath.Join(s.Opts.StoreDir, "jetstream", "*", "streams", "KV_dedupe-window", "msgs", "*"))
	if err != nil || len(msgs) == 0 {
		t.Fatalf("the bucket's message files: %v %v", msgs, err)
	}
	for _, m := range msgs {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart()
	natstest.Eventually(t, 30*time.Second, func() error {
		st, err := js.Stream(ctxT(t, 5*time.Second), "KV_dedupe-window")
		if err != nil {
			return err
		}
		if last := st.CachedInfo().State.LastSeq; last != 0 {
			t.Fatalf("the bucket came back at last sequence %d, want 0", last)
		}
		return nil
	})
	out, err := w.Claim(ctxT(t, 10*time.Second), kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-9", TTL: time.Hour,
		Claimant: envelope(50), Delivery: delivery(1)}, kvwindow.Known{})
	if !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Fatalf("claim after the bucket lost its writes: %+v %v, want ErrWindowLost", out, err)
	}
	for _, want := range []string{`bucket "dedupe-window" lost its latest writes`, "last sequence back from 3 to 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("claim: %v\nwant it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "created again") {
		t.Errorf("claim: %v\nwant it not to say the bucket was created again", err)
	}
}

// TestAckLossWording: what a write stored at or below the sequence seen is reported as, by where it was stored and
// what a stream info read found after it.
func TestAckLossWording(t *testing.T) {
	const kv = "KV_dedupe-window"
	bound := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later := bound.Add(time.Hour)
	for _, tc := range []struct {
		name      string
		ackStream string
		now       time.Time
		readErr   error
		want      []string
		not       string
	}{
		{"same creation time: lost its latest writes", kv, bound, nil,
			[]string{"lost its latest writes (last sequence back from 20 to 6:", "stored at sequence 7", "created 2026-12-01T10:00:00Z"}, "created again"},
		{"another creation time: created again", kv, later, nil,
			[]string{"was created again under the running worker", "now created 2026-12-01T11:00:00Z", "bound to the one created 2026-12-01T10:00:00Z"}, "lost its latest writes"},
		{"creation time not read: either", kv, time.Time{}, errors.New("nats: timeout"),
			[]string{"was created again under the running worker, or lost its latest writes", "nats: timeout"}, ""},
		{"stored in another stream: created again", "KV_other", time.Time{}, nil,
			[]string{"was created again under the running worker", `stream "KV_other"`}, "lost its latest writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kvwindow.AckLoss(kv, tc.ackStream, 7, 20, bound, tc.now, tc.readErr)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q\nwant it to say %q", got, w)
				}
			}
			if tc.not != "" && strings.Contains(got, tc.not) {
				t.Errorf("%q\nwant it not to say %q", got, tc.not)
			}
		})
	}
}
