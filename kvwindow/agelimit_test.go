package kvwindow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestBucketProblems: which buckets can hold claims of up to a given TTL, and whether mending one takes a new
// bucket or only an edit of its age limit.
func TestBucketProblems(t *testing.T) {
	good := jetstream.StreamConfig{AllowMsgTTL: true, SubjectDeleteMarkerTTL: time.Minute, MaxMsgsPerSubject: 1,
		Discard: jetstream.DiscardNew}
	with := func(f func(*jetstream.StreamConfig)) jetstream.StreamConfig { c := good; f(&c); return c }
	const week = 7 * 24 * time.Hour
	for _, tc := range []struct {
		name     string
		cfg      jetstream.StreamConfig
		maxTTL   time.Duration
		want     []string // a fragment of each problem, in order
		recreate bool
	}{
		{"no age limit", good, week, nil, false},
		{"no age limit, TTL not known", good, 0, nil, false},
		{"age limit shorter than the longest TTL", with(func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }), week,
			[]string{"its age limit (max_age 1h0m0s) is shorter than the longest claim TTL it must hold, 168h0m0s"}, false},
		{"age limit a second short", with(func(c *jetstream.StreamConfig) { c.MaxAge = week - time.Second }), week,
			[]string{"max_age 167h59m59s"}, false},
		{"age limit equal to the longest TTL", with(func(c *jetstream.StreamConfig) { c.MaxAge = week }), week, nil, false},
		{"age limit longer", with(func(c *jetstream.StreamConfig) { c.MaxAge = 2 * week }), week, nil, false},
		{"age limit, TTL not known (checked claim by claim)", with(func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }), 0, nil, false},
		{"no per-key TTLs", with(func(c *jetstream.StreamConfig) { c.AllowMsgTTL = false }), week,
			[]string{"does not support per-key TTLs"}, true},
		{"no marker TTL", with(func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = 0 }), week,
			[]string{"does not support per-key TTLs"}, true},
		{"history", with(func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 }), week, []string{"history 5"}, true},
		{"discard old", with(func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardOld }), week, []string{"discard policy is old"}, true},
		{"mirror", with(func(c *jetstream.StreamConfig) { c.Mirror = &jetstream.StreamSource{Name: "x"} }), week, []string{"mirror or sealed"}, true},
		{"sealed", with(func(c *jetstream.StreamConfig) { c.Sealed = true }), week, []string{"mirror or sealed"}, true},
		{"history and age limit", with(func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 0; c.MaxAge = time.Hour }), week,
			[]string{"history 0", "max_age 1h0m0s"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, recreate := kvwindow.BucketProblems(tc.cfg, tc.maxTTL)
			if len(got) != len(tc.want) || recreate != tc.recreate {
				t.Fatalf("problems %q, recreate %v; want %d problems %q, recreate %v", got, recreate, len(tc.want), tc.want, tc.recreate)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// TestServerAgeLimitOverridesTTL is the server behaviour the age check guards against: a bucket's age limit
// removes a claim whatever its own (longer) TTL, and the next copy of its event is Won again.
func TestServerAgeLimitOverridesTTL(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 30*time.Second)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "short", History: 1, TTL: time.Second,
		LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "short")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k", []byte("claim"), jetstream.KeyTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() error {
		if _, err := kv.Get(ctx, "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("a key with a TTL of 1h in a bucket of max_age 1s: still there (%v)", err)
		}
		return nil
	})
}

// TestAgeLimitShorterThanTTL: a bucket created by hand with an age limit (nats kv add --ttl 1h) while claims live
// a week is refused at bind, saying what to do; a claim longer than the age limit fails rather than being stored to
// lapse early; an edit that lifts the limit is followed. Before the fix New bound to the bucket, and a claim of
// a week was removed after its age limit, its event's next copy Won again. An edit that sets the limit again under
// running windows makes every Ping fail (ErrAgeLimit) until it is lifted: before, Ping succeeded between refused
// claims, and the worker reported the window up and down by turns.
func TestAgeLimitShorterThanTTL(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "dedupe-window", History: 1, TTL: time.Hour,
		LimitMarkerTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	const week = 7 * 24 * time.Hour
	cfg := kvwindow.DefaultConfig()
	cfg.MaxTTL = week
	_, err := kvwindow.New(ctx, js, cfg)
	if err == nil || errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("New over a bucket of max_age 1h for claims of a week: %v, want a final error", err)
	}
	for _, want := range []string{`bucket "dedupe-window"`, "max_age 1h0m0s", "168h0m0s", "DEDUPE_DEFAULT_TTL",
		"nats stream edit KV_dedupe-window --max-age=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to say %q", err, want)
		}
	}

	// Without MaxTTL the bucket binds, and each claim is checked against the age limit.
	w := newWindow(t, js, kvwindow.DefaultConfig())
	c := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k", TTL: week, Claimant: envelope(1), Delivery: delivery(1)}
	if out, err := w.Claim(ctx, c, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrAgeLimit) ||
		!strings.Contains(fmt.Sprint(err), "max_age 1h0m0s") {
		t.Fatalf("claim of a week in a bucket of max_age 1h: %+v, %v; want ErrUnavailable naming the age limit", out, err)
	}
	short := c
	short.TTL = time.Hour
	if out := claim(t, w, short); out.Status != kvwindow.Won {
		t.Fatalf("claim of 1h: %v", out.Status)
	}

	// The operator lifts the limit: the running window follows at its next Ping, a new one binds.
	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.MaxAge = 0 })
	if err := w.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Key = "k2"
	if out := claim(t, w, c); out.Status != kvwindow.Won {
		t.Fatalf("claim of a week once the limit is lifted: %v", out.Status)
	}
	bound := newWindow(t, js, cfg)

	// The operator sets the limit again under both running windows (nats stream edit --max-age=1h). Each Ping
	// fails from then on, naming the bucket, the age limit and the TTL it cannot hold, for as long as the limit
	// stays: one window is configured for claims of a week, the other has refused one.
	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.MaxAge = time.Hour })
	for _, tc := range []struct {
		name string
		w    *kvwindow.Window
	}{{"configured for a week", bound}, {"refused a week", w}} {
		for i := 0; i < 3; i++ {
			err := tc.w.Ping(ctx)
			if !errors.Is(err, kvwindow.ErrAgeLimit) || errors.Is(err, kvwindow.ErrWindowLost) {
				t.Fatalf("%s: Ping %d after the age limit was set to 1h: %v, want it to fail", tc.name, i, err)
			}
			for _, want := range []string{`bucket "dedupe-window"`, "max_age 1h0m0s", "168h0m0s",
				"nats stream edit KV_dedupe-window --max-age=0"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: Ping: %v\nwant it to say %q", tc.name, err, want)
				}
			}
		}
	}
	// The window configured for a week refuses every claim meanwhile, even one the bucket could hold (New would
	// refuse the bucket): a window taking some claims and refusing others would look up and down by turns.
	short.Key = "k3"
	for _, c := range []kvwindow.Claim{c, short} {
		c.Key += "-bound"
		if out, err := bound.Claim(ctx, c, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrAgeLimit) ||
			!strings.Contains(err.Error(), "max_age 1h0m0s") {
			t.Fatalf("claim of %s in a window for a week, bucket at max_age 1h: %+v, %v; want ErrAgeLimit", c.TTL, out, err)
		}
	}

	// Lifted again: both windows answer at their next Ping and claim again.
	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.MaxAge = 0 })
	for _, w := range []*kvwindow.Window{bound, w} {
		if err := w.Ping(ctx); err != nil {
			t.Fatalf("Ping once the limit is lifted again: %v", err)
		}
	}
	c.Key = "k4"
	if out := claim(t, bound, c); out.Status != kvwindow.Won {
		t.Fatalf("claim of a week once the limit is lifted again: %v", out.Status)
	}
}

// TestAgeLimitAfterClaim: a claim won before an age limit shorter than its TTL was set (and taken up by a Ping)
// is still marked published and released: refusing would hand the envelope back, each redelivery would be refused
// its claim until the limit is lifted, and the event would then be published (or dead-lettered) again. The claim
// lapses at the age limit whether the write happens or not, and the write only lasts longer. New claims are still
// refused. Before the fix MarkPublished and Release failed with ErrAgeLimit.
func TestAgeLimitAfterClaim(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	const week = 7 * 24 * time.Hour
	cfg := kvwindow.DefaultConfig()
	cfg.MaxTTL = week
	w := newWindow(t, js, cfg)
	marked := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "marked", TTL: week, Claimant: envelope(1), Delivery: delivery(1)}
	released := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "released", TTL: week, Claimant: envelope(2), Delivery: delivery(1)}
	mrev, rrev := claim(t, w, marked).Revision, claim(t, w, released).Revision

	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.MaxAge = time.Hour })
	if err := w.Ping(ctx); !errors.Is(err, kvwindow.ErrAgeLimit) {
		t.Fatalf("Ping under max_age 1h: %v, want ErrAgeLimit", err)
	}

	rev, ok, err := w.MarkPublished(ctx, marked, mrev, time.Time{})
	if err != nil || !ok || rev <= mrev {
		t.Errorf("MarkPublished of a claim won before max_age 1h was set: %d %v %v, want the mark written", rev, ok, err)
	}
	if ok, err := w.Release(ctx, released, rrev, false); err != nil || !ok {
		t.Errorf("Release of a claim won before max_age 1h was set: %v %v, want the marker written", ok, err)
	}
	if e, ok, err := w.Get(ctx, marked.Tenant, marked.Source, marked.Key); err != nil || !ok || !e.Published {
		t.Errorf("key %s after the mark: %+v %v %v, want the claim marked published", marked.Key, e, ok, err)
	}
	if e, ok, err := w.Get(ctx, released.Tenant, released.Source, released.Key); err != nil || ok {
		t.Errorf("key %s after the release: %+v %v %v, want no claim", released.Key, e, ok, err)
	}
	next := marked
	next.Key = "next"
	if out, err := w.Claim(ctx, next, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrAgeLimit) {
		t.Errorf("new claim under max_age 1h: %+v %v, want ErrAgeLimit", out, err)
	}
}

// TestAgeCheckAllocatesNothing: the age-limit check runs before every claim, with Config.MaxTTL set as the worker and
// the receiver always set it; a bucket that can hold the claim costs no allocation (the refusal's text is built only
// for a refusal).
func TestAgeCheckAllocatesNothing(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	cfg := kvwindow.DefaultConfig()
	cfg.MaxTTL = 7 * 24 * time.Hour
	w := newWindow(t, js, cfg)
	for _, ttl := range []time.Duration{time.Hour, 14 * 24 * time.Hour} { // shorter than MaxTTL, and longer
		c := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k", TTL: ttl, Claimant: envelope(1), Delivery: delivery(1)}
		if n := testing.AllocsPerRun(100, func() {
			if err := kvwindow.AgeCheck(w, c); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("TTL %s: %.1f allocations per check, want 0", ttl, n)
		}
	}
}
