package kvwindow_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/kvwindow/windowtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestConformance(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	w := newWindow(t, js, kvwindow.DefaultConfig())
	windowtest.Run(t, func(t *testing.T) windowtest.Claimer { return w })
}

func TestConformanceMemoryStorageFreshBuckets(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	var n atomic.Int64
	windowtest.Run(t, func(t *testing.T) windowtest.Claimer {
		cfg := kvwindow.DefaultConfig()
		cfg.Bucket = fmt.Sprintf("w%d", n.Add(1))
		cfg.Storage = jetstream.MemoryStorage
		return newWindow(t, js, cfg)
	})
}

func TestProvisionCreatesBucket(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 20*time.Second)
	cfg := kvwindow.DefaultConfig()
	cfg.MaxBytes = 1 << 20
	cfg.MarkerTTL = 30 * time.Second
	w := newWindow(t, js, cfg)
	if w.Bucket() != "dedupe-window" || w.MarkerTTL() != 30*time.Second {
		t.Fatalf("bucket %q marker %s", w.Bucket(), w.MarkerTTL())
	}
	st, err := js.Stream(ctx, "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if c.MaxMsgsPerSubject != 1 || !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != 30*time.Second ||
		c.Storage != jetstream.FileStorage || c.Replicas != 1 || c.MaxBytes != 1<<20 || c.Discard != jetstream.DiscardNew {
		t.Fatalf("bucket config: %+v", c)
	}
	// Binding again (another worker) with different creation settings leaves the bucket alone.
	cfg2 := cfg
	cfg2.MaxBytes, cfg2.MarkerTTL, cfg2.Provision = 0, time.Hour, false
	newWindow(t, js, cfg2)
	st, _ = js.Stream(ctx, "KV_dedupe-window")
	if got := st.CachedInfo().Config; got.MaxBytes != 1<<20 || got.SubjectDeleteMarkerTTL != 30*time.Second {
		t.Fatalf("existing bucket was changed: %+v", got)
	}
}

func TestProvisionOffWithoutBucket(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	cfg := kvwindow.DefaultConfig()
	cfg.Provision, cfg.Storage = false, jetstream.MemoryStorage
	_, err := kvwindow.New(ctxT(t, 10*time.Second), js, cfg)
	// The fix creates the bucket as the worker would: its replicas and storage too.
	const fix = "nats kv add dedupe-window --history=1 --marker-ttl=1m0s --replicas=1 --storage=memory"
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), fix) {
		t.Fatalf("want a clear missing-bucket error with the fix %q, got %v", fix, err)
	}
	if errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("a missing bucket is a configuration error, not unavailability: %v", err)
	}
	if _, err := js.KeyValue(ctxT(t, 5*time.Second), "dedupe-window"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("bucket was created: %v", err)
	}
}

func TestExistingIncompatibleBucket(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 20*time.Second)
	for _, tc := range []struct {
		name string
		kv   jetstream.KeyValueConfig
		want string
	}{
		{"no-ttl", jetstream.KeyValueConfig{Bucket: "no-ttl"}, "does not support per-key TTLs"},
		{"history", jetstream.KeyValueConfig{Bucket: "history", History: 5, LimitMarkerTTL: time.Minute}, "history 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := js.CreateKeyValue(ctx, tc.kv); err != nil {
				t.Fatal(err)
			}
			cfg := kvwindow.DefaultConfig()
			cfg.Bucket = tc.kv.Bucket
			_, err := kvwindow.New(ctx, js, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "nats kv add "+tc.kv.Bucket+" --history=1 --marker-ttl=1m0s") {
				t.Fatalf("want an error naming the problem and the fix, got %v", err)
			}
			st, _ := js.Stream(ctx, "KV_"+tc.kv.Bucket)
			if st.CachedInfo().Config.AllowMsgTTL != (tc.kv.LimitMarkerTTL > 0) {
				t.Fatal("the existing bucket was modified")
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  kvwindow.Config
		want string // "" = valid
	}{
		{"zero uses defaults", kvwindow.Config{}, ""},
		{"defaults", kvwindow.DefaultConfig(), ""},
		{"memory r3", kvwindow.Config{Bucket: "b_1-x", Replicas: 3, Storage: jetstream.MemoryStorage, MaxBytes: 1 << 30}, ""},
		{"space in bucket", kvwindow.Config{Bucket: "a b"}, `kvwindow: bucket: must be a valid KV bucket name, got "a b"`},
		{"dot in bucket", kvwindow.Config{Bucket: "a.b"}, `kvwindow: bucket: must be a valid KV bucket name, got "a.b"`},
		{"wildcard bucket", kvwindow.Config{Bucket: "*"}, `kvwindow: bucket: `},
		{"replicas 6", kvwindow.Config{Replicas: 6}, "kvwindow: replicas: must be between 1 and 5, got 6"},
		{"replicas -1", kvwindow.Config{Replicas: -1}, "kvwindow: replicas: "},
		{"storage", kvwindow.Config{Storage: 7}, "kvwindow: storage: must be file or memory, got 7"},
		{"marker sub-second", kvwindow.Config{MarkerTTL: 500 * time.Millisecond}, "kvwindow: marker_ttl: must be whole seconds and at least 1s, got 500ms"},
		{"marker fractional", kvwindow.Config{MarkerTTL: 1500 * time.Millisecond}, "kvwindow: marker_ttl: "},
		{"marker negative", kvwindow.Config{MarkerTTL: -time.Second}, "kvwindow: marker_ttl: "},
		{"max bytes", kvwindow.Config{MaxBytes: -1}, "kvwindow: max_bytes: must be 0 (unlimited) or positive, got -1"},
		{"timeout", kvwindow.Config{Timeout: -time.Second}, "kvwindow: timeout: must be positive, got -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
	// New validates too, before touching the server.
	if _, err := kvwindow.New(ctxT(t, time.Second), nil, kvwindow.Config{Bucket: "a b"}); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Fatalf("New with a bad bucket: %v", err)
	}
	d := kvwindow.Config{}.WithDefaults()
	if d.Bucket != "dedupe-window" || d.Replicas != 1 || d.MarkerTTL != time.Minute || d.Timeout != 5*time.Second || d.Storage != jetstream.FileStorage {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestKVKeyLayout(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"a", "t.s.YQ"},
		{"a.b c*>", "t.s.YS5iIGMqPg"},
		{strings.Repeat("x", 48), "t.s." + strings.Repeat("eHh4", 16)},
		{strings.Repeat("x", 49), "t.s.=VbuYI-aOBfccEFOVuHKDr8huVJ4fHKRZixzHpt0tOsg"},
	} {
		got, err := kvwindow.KVKey("t", "s", tc.key)
		if err != nil || got != tc.want {
			t.Errorf("KVKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for _, bad := range [][3]string{{"", "s", "k"}, {"t", "", "k"}, {"t.x", "s", "k"}, {"t", "s.>", "k"}, {"t", "s", ""}} {
		if _, err := kvwindow.KVKey(bad[0], bad[1], bad[2]); !errors.Is(err, kvwindow.ErrInvalid) {
			t.Errorf("KVKey%q: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestExpiryMarkerThenReclaim: when a claim's TTL lapses the server replaces it with a "MaxAge" marker that
// lives for the bucket's marker TTL. A plain "expected last subject sequence 0" create fails on that marker; the
// window writes over the marker instead.
func TestExpiryMarkerThenReclaim(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 30*time.Second)
	w := newWindow(t, js, kvwindow.DefaultConfig())
	c := kvwindow.Claim{Tenant: "acme", Source: "stripe", Key: "evt_1", TTL: time.Second, Claimant: envelope(11), Delivery: delivery(1)}
	first := claim(t, w, c)
	if first.Status != kvwindow.Won {
		t.Fatalf("first: %+v", first)
	}
	subj := "$KV.dedupe-window.acme.stripe.ZXZ0XzE"
	st, err := js.Stream(ctx, "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	var marker *jetstream.RawStreamMsg
	natstest.Eventually(t, 15*time.Second, func() error {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return err
		}
		if m.Header.Get(jetstream.MarkerReasonHeader) != "MaxAge" {
			return fmt.Errorf("no marker yet (seq %d, headers %v)", m.Sequence, m.Header)
		}
		marker = m
		return nil
	})
	if marker.Sequence <= first.Revision || marker.Header.Get(jetstream.MsgTTLHeader) == "" {
		t.Fatalf("marker: seq %d headers %v", marker.Sequence, marker.Header)
	}
	if _, ok, err := w.Get(ctx, "acme", "stripe", "evt_1"); ok || err != nil {
		t.Fatalf("Get on a marker: %v %v", ok, err)
	}
	// The server refuses a plain create on a subject holding a marker.
	m := nats.NewMsg(subj)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	var apiErr *jetstream.APIError
	if _, err := js.PublishMsg(ctx, m); !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("plain create over a marker: %v, want API error 10071", err)
	}
	c.Claimant, c.TTL = envelope(12), time.Hour
	again := claim(t, w, c)
	if again.Status != kvwindow.Won || again.Revision <= marker.Sequence {
		t.Fatalf("re-claim over the marker: %+v (marker seq %d)", again, marker.Sequence)
	}
	if _, _, markers, _ := kvwindow.Stats(w); markers == 0 {
		t.Fatal("the re-claim did not go through the marker path")
	}
	if got := claim(t, w, c); decision(got) != (kvwindow.Outcome{Status: kvwindow.Owned, Revision: again.Revision}) {
		t.Fatalf("redelivery after re-claim: %+v", got)
	}
}

func TestGet(t *testing.T) {
	s := natstest.Run(t)
	w := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig())
	ctx := ctxT(t, 10*time.Second)
	key := "order.created:" + strings.Repeat("z", 100)
	before := time.Now().Add(-time.Second)
	out := claim(t, w, kvwindow.Claim{Tenant: "acme", Source: "shop", Key: key, TTL: 90*time.Second + time.Millisecond,
		Claimant: envelope(4242), Delivery: delivery(3)})
	e, ok, err := w.Get(ctx, "acme", "shop", key)
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if e.Tenant != "acme" || e.Source != "shop" || e.Key != key || e.Claimant != envelope(4242) || e.Delivery != delivery(3) || e.Revision != out.Revision ||
		e.TTL != 91*time.Second || e.ClaimedAt.Before(before) || e.ClaimedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("entry %+v (revision %d)", e, out.Revision)
	}
	if e.ExpiresAt() != e.ClaimedAt.Add(91*time.Second) {
		t.Fatal("ExpiresAt")
	}
	if _, ok, err := w.Get(ctx, "acme", "shop", "other"); ok || err != nil {
		t.Fatalf("Get missing: %v %v", ok, err)
	}
	if _, ok, err := w.Get(ctx, "other", "shop", key); ok || err != nil {
		t.Fatalf("Get other tenant: %v %v", ok, err)
	}
	if _, _, err := w.Get(ctx, "acme.*", "shop", key); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Fatalf("Get with a wildcard tenant: %v", err)
	}
}

func TestForget(t *testing.T) {
	s := natstest.Run(t)
	w := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig())
	ctx := ctxT(t, 20*time.Second)
	seed := func() {
		t.Helper()
		for _, tn := range []string{"a", "b", "ab"} {
			for _, src := range []string{"s1", "s2"} {
				for i := range 3 {
					claim(t, w, kvwindow.Claim{Tenant: tn, Source: src, Key: "k" + strconv.Itoa(i), TTL: time.Hour, Claimant: envelope(1)})
				}
			}
		}
	}
	held := func(tn, src, key string) bool {
		t.Helper()
		_, ok, err := w.Get(ctx, tn, src, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	seed()
	if n, err := kvwindow.ManagerOf(w).Forget(ctx, "a", "s1", "k0"); n != 1 || err != nil {
		t.Fatalf("Forget: %d %v", n, err)
	}
	if n, err := kvwindow.ManagerOf(w).Forget(ctx, "a", "s1", "k0"); n != 0 || err != nil {
		t.Fatalf("Forget again: %d %v", n, err)
	}
	if held("a", "s1", "k0") || !held("a", "s1", "k1") || !held("b", "s1", "k0") {
		t.Fatal("Forget removed the wrong claims")
	}
	if got := claim(t, w, kvwindow.Claim{Tenant: "a", Source: "s1", Key: "k0", TTL: time.Hour, Claimant: envelope(2)}); got.Status != kvwindow.Won {
		t.Fatalf("claim after Forget: %+v", got)
	}

	// Source-scoped.
	if n, err := kvwindow.ManagerOf(w).ForgetAll(ctx, "a", "s2"); n != 3 || err != nil {
		t.Fatalf("ForgetAll(a, s2): %d %v", n, err)
	}
	if held("a", "s2", "k1") || !held("a", "s1", "k1") || !held("b", "s2", "k1") || !held("ab", "s2", "k1") {
		t.Fatal("ForgetAll(a, s2) removed the wrong claims")
	}
	// Tenant-wide: "a" must not touch "ab" (a prefix of its subject) or "b".
	if n, err := kvwindow.ManagerOf(w).ForgetAll(ctx, "a", ""); n != 3 || err != nil {
		t.Fatalf("ForgetAll(a): %d %v", n, err)
	}
	for _, src := range []string{"s1", "s2"} {
		for i := range 3 {
			k := "k" + strconv.Itoa(i)
			if held("a", src, k) || !held("b", src, k) || !held("ab", src, k) {
				t.Fatalf("ForgetAll(a) and %s/%s: tenant isolation broken", src, k)
			}
		}
	}
	if n, err := kvwindow.ManagerOf(w).ForgetAll(ctx, "a", ""); n != 0 || err != nil {
		t.Fatalf("ForgetAll(a) again: %d %v", n, err)
	}
	for _, bad := range [][2]string{{"", ""}, {"a.>", ""}, {"*", ""}, {"a", "s.>"}, {"a", "*"}, {strings.Repeat("a", 65), ""}} {
		if _, err := kvwindow.ManagerOf(w).ForgetAll(ctx, bad[0], bad[1]); !errors.Is(err, kvwindow.ErrInvalid) {
			t.Errorf("ForgetAll%q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := kvwindow.ManagerOf(w).Forget(ctx, "a", ">", "k"); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Errorf("Forget with a wildcard source: %v", err)
	}
	if n, err := kvwindow.ManagerOf(w).ForgetAll(ctx, "b", ""); n != 6 || err != nil {
		t.Fatalf("ForgetAll(b): %d %v", n, err)
	}
}

// spyReads counts the window's reads of the default bucket: direct gets (any replica may answer) and reads through
// the stream leader's API.
func spyReads(t *testing.T, url string) (direct, get *atomic.Int64) {
	t.Helper()
	spy := natstest.Connect(t, url)
	direct, get = new(atomic.Int64), new(atomic.Int64)
	if _, err := spy.Subscribe("$JS.API.DIRECT.GET.>", func(*nats.Msg) { direct.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if _, err := spy.Subscribe("$JS.API.STREAM.MSG.GET.KV_dedupe-window", func(*nats.Msg) { get.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	return direct, get
}

// TestLosingClaimsReadFromLeader: unless a claim is a first delivery, deciding Owned/Stale/Duplicate (and a
// takeover) never uses direct gets (served by any replica).
func TestLosingClaimsReadFromLeader(t *testing.T) {
	s := natstest.Run(t)
	w := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig())
	direct, get := spyReads(t, s.URL())
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Minute, Claimant: envelope(1), Delivery: delivery(2)}
	claim(t, w, c)
	if got := claim(t, w, c); got.Status != kvwindow.Owned {
		t.Fatalf("same delivery: %v", got.Status)
	}
	c.Delivery = delivery(4)
	if got := claim(t, w, c); got.Status != kvwindow.Owned {
		t.Fatalf("later delivery: %v", got.Status)
	}
	c.Delivery = delivery(3)
	if got := claim(t, w, c); got.Status != kvwindow.Stale {
		t.Fatalf("earlier delivery: %v", got.Status)
	}
	c.Claimant = envelope(2)
	if got := claim(t, w, c); got.Status != kvwindow.Duplicate {
		t.Fatalf("other claimant: %v", got.Status)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if get.Load() < 4 {
			return fmt.Errorf("%d leader gets", get.Load())
		}
		return nil
	})
	if direct.Load() != 0 {
		t.Fatalf("%d direct gets", direct.Load())
	}
}

func TestUnavailableThenRecovers(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	cfg := kvwindow.DefaultConfig()
	cfg.Timeout = 500 * time.Millisecond
	w := newWindow(t, js, cfg)
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Hour, Claimant: envelope(1), Delivery: delivery(1)}
	first := claim(t, w, c)

	s.Shutdown()
	ctx := ctxT(t, 30*time.Second)
	c2 := c
	c2.Key = "k2"
	start := time.Now()
	out, err := w.Claim(ctx, c2, kvwindow.Known{})
	if !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("claim with the server down: %+v %v", out, err)
	}
	// The window's 500ms Timeout ended the claim, not the 30s context (a loaded machine may stretch the 500ms).
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("claim took %s with a 500ms timeout", el)
	}
	if err := w.Ping(ctx); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("ping with the server down: %v", err)
	}
	if _, _, err := w.Get(ctx, "t", "s", "k"); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("get with the server down: %v", err)
	}
	if _, err := kvwindow.ManagerOf(w).ForgetAll(ctx, "t", ""); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("forget with the server down: %v", err)
	}
	// Refused at once, not left in the reconnect buffer to land after the restart (checked below: the claim stays).
	if ok, err := w.Release(ctx, kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Hour, Claimant: envelope(1), Delivery: delivery(1)}, first.Revision, false); ok || !errors.Is(err, kvwindow.ErrUnavailable) || !errors.Is(err, nats.ErrDisconnected) {
		t.Fatalf("release with the server down: %v %v", ok, err)
	}
	t.Logf("claim while down: %v", err)

	s.Restart()
	natstest.Eventually(t, 20*time.Second, func() error { return w.Ping(ctx) })
	var got kvwindow.Outcome
	natstest.Eventually(t, 20*time.Second, func() error {
		got, err = w.Claim(ctx, c2, kvwindow.Known{})
		return err
	})
	// The claim that timed out sat in the client's reconnect buffer and may have landed after the restart: the
	// same claimant then finds it Owned. Either way this claimant holds the key.
	if got.Status != kvwindow.Won && got.Status != kvwindow.Owned {
		t.Fatalf("claim after restart: %+v", got)
	}
	t.Logf("claim after restart: %v", got.Status)
	// The file-backed bucket kept the claim made before the outage.
	c.Claimant = envelope(2)
	if got := claim(t, w, c); decision(got) != (kvwindow.Outcome{Status: kvwindow.Duplicate, Revision: first.Revision}) {
		t.Fatalf("old claim after restart: %+v, want Duplicate rev %d", got, first.Revision)
	}
}

func TestBucketFull(t *testing.T) {
	s := natstest.Run(t)
	cfg := kvwindow.DefaultConfig()
	cfg.MaxBytes = 4096
	w := newWindow(t, jsFor(t, s.URL()), cfg)
	ctx := ctxT(t, 20*time.Second)
	var fullErr error
	won := 0
	for i := 0; i < 1000 && fullErr == nil; i++ {
		out, err := w.Claim(ctx, kvwindow.Claim{Tenant: "t", Source: "s", Key: "key-" + strconv.Itoa(i), TTL: time.Hour, Claimant: envelope(uint64(i + 1))}, kvwindow.Known{})
		if err != nil {
			fullErr = err
			break
		}
		if out.Status != kvwindow.Won {
			t.Fatalf("claim %d: %+v", i, out)
		}
		won++
	}
	if won == 0 || !errors.Is(fullErr, kvwindow.ErrUnavailable) {
		t.Fatalf("after %d claims: %v, want ErrUnavailable", won, fullErr)
	}
	t.Logf("bucket full after %d claims: %v", won, fullErr)
	// Claims already held still decide.
	if got := claim(t, w, kvwindow.Claim{Tenant: "t", Source: "s", Key: "key-0", TTL: time.Hour, Claimant: envelope(99999)}); got.Status != kvwindow.Duplicate {
		t.Fatalf("held claim in a full bucket: %+v", got)
	}
}

// TestFirstDeliveryReadsAnyReplica: a first delivery's losing create may be decided by a direct get; the decision
// is the same (Duplicate for another claimant), and a redelivery still reads from the leader.
func TestFirstDeliveryReadsAnyReplica(t *testing.T) {
	s := natstest.Run(t)
	w := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig())
	direct, get := spyReads(t, s.URL())
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Minute, Claimant: envelope(1), Delivery: delivery(1)}
	if got := claim(t, w, c); got.Status != kvwindow.Won {
		t.Fatalf("first claim: %v", got.Status)
	}
	c.Claimant = envelope(2)
	if got := claim(t, w, c); got.Status != kvwindow.Duplicate {
		t.Fatalf("other claimant, first delivery: %v", got.Status)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if direct.Load() < 1 {
			return fmt.Errorf("%d direct gets", direct.Load())
		}
		return nil
	})
	// A redelivery of the winner must be recognised, through the leader.
	c.Claimant, c.Delivery = envelope(1), delivery(2)
	if got := claim(t, w, c); got.Status != kvwindow.Owned {
		t.Fatalf("redelivery: %v", got.Status)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if get.Load() < 1 {
			return fmt.Errorf("%d leader gets", get.Load())
		}
		return nil
	})
}

// lastOn reads the last message on the default bucket's subject for (tenant, source, key); nil when there is none.
func lastOn(t *testing.T, st jetstream.Stream, tenant, source, key string) *jetstream.RawStreamMsg {
	t.Helper()
	k, err := kvwindow.KVKey(tenant, source, key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctxT(t, 5*time.Second), "$KV.dedupe-window."+k)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStoredValue: the stored claim is the compact value (a version byte, varints, a flags byte, the event key
// only when the KV key holds its hash), with the TTL in the Nats-TTL header; a JSON value written by an older
// worker (with or without ts/con/dlv) still reads and is recognised by its sequence alone.
func TestStoredValue(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 20*time.Second)
	w := newWindow(t, js, kvwindow.DefaultConfig())
	st, err := js.Stream(ctx, "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	long := "order.created:" + strings.Repeat("é", 40) // hashed in the KV key: the value records it
	for _, tc := range []struct {
		name    string
		key     string
		keyInIt bool
	}{{"raw key", `new "key"`, false}, {"hashed key", long, true}} {
		c := kvwindow.Claim{Tenant: "acme", Source: "s", Key: tc.key, TTL: time.Minute,
			Claimant: kvwindow.Claimant{Seq: 18446744073709551615, Stamp: 1_717_171_717_123_456_789},
			Delivery: kvwindow.Delivery{Consumer: 1_717_000_000_000_000_001, Count: 3}}
		before := time.Now().UnixMilli()
		out := claim(t, w, c)
		m := lastOn(t, st, "acme", "s", c.Key)
		if m == nil || m.Sequence != out.Revision || m.Header.Get(jetstream.MsgTTLHeader) != "60s" || len(m.Data) == 0 || m.Data[0] != 0x01 {
			t.Fatalf("%s: stored claim: %+v", tc.name, m)
		}
		v, ok := kvwindow.DecodeValue(m.Data)
		if !ok || v.Claimant != c.Claimant || v.Delivery != c.Delivery || v.Published ||
			v.FirstMs < before || v.FirstMs > time.Now().UnixMilli() || out.FirstClaimed.UnixMilli() != v.FirstMs {
			t.Fatalf("%s: decoded %+v %v (outcome %+v)", tc.name, v, ok, out)
		}
		if tc.keyInIt != (v.Key == c.Key) || (!tc.keyInIt && v.Key != "") {
			t.Fatalf("%s: value records key %q (want it only for a hashed key)", tc.name, v.Key)
		}
		// Exactly the layout: version, seq, stamp, consumer, count, first claim relative to the stamp, flags, key.
		want := []byte{0x01}
		want = binary.AppendUvarint(want, c.Claimant.Seq)
		want = binary.AppendVarint(want, c.Claimant.Stamp)
		want = binary.AppendVarint(want, c.Delivery.Consumer)
		want = binary.AppendUvarint(want, c.Delivery.Count)
		want = binary.AppendVarint(want, v.FirstMs-c.Claimant.Stamp/1e6)
		if tc.keyInIt {
			want = append(append(want, 0x02), c.Key...)
		} else {
			want = append(want, 0x00)
		}
		if string(m.Data) != string(want) {
			t.Fatalf("%s: stored % x, want % x", tc.name, m.Data, want)
		}
		e, ok, err := w.Get(ctx, "acme", "s", c.Key)
		if err != nil || !ok || e.Key != c.Key || e.Claimant != c.Claimant || e.Delivery != c.Delivery || e.TTL != time.Minute ||
			e.FirstClaimed.UnixMilli() != v.FirstMs || e.Published {
			t.Fatalf("%s: Get: %+v %v %v", tc.name, e, ok, err)
		}
		t.Logf("%s: value %d bytes (%q)", tc.name, len(m.Data), m.Data)
	}

	// A value that is no claim (an operator's put) is someone else's, and counts as decided.
	k, _ := kvwindow.KVKey("acme", "s", "foreign")
	m := nats.NewMsg("$KV.dedupe-window." + k)
	m.Data = []byte("hello")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	c := kvwindow.Claim{Tenant: "acme", Source: "s", Key: "foreign", TTL: time.Minute, Claimant: envelope(9), Delivery: delivery(1)}
	if got := claim(t, w, c); got.Status != kvwindow.Duplicate || !got.Published {
		t.Fatalf("claim over a foreign value: %+v, want Duplicate, Published", got)
	}
}

// TestTakeoverRewritesClaim: a later delivery's takeover is one write over the claim, expected at its revision,
// carrying the full TTL; the subject keeps one message.
func TestTakeoverRewritesClaim(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 20*time.Second)
	w := newWindow(t, js, kvwindow.DefaultConfig())
	st, err := js.Stream(ctx, "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Hour, Claimant: envelope(5), Delivery: delivery(1)}
	first := claim(t, w, c)
	c.Delivery, c.TTL = delivery(2), 2*time.Hour
	took := claim(t, w, c)
	if took.Status != kvwindow.Owned || took.Revision != first.Revision+1 {
		t.Fatalf("takeover: %+v after %+v", took, first)
	}
	m := lastOn(t, st, "t", "s", "k")
	if m.Sequence != took.Revision || m.Header.Get(jetstream.MsgTTLHeader) != "7200s" {
		t.Fatalf("taken-over claim: seq %d headers %v data %s", m.Sequence, m.Header, m.Data)
	}
	if v, ok := kvwindow.DecodeValue(m.Data); !ok || v.Delivery != delivery(2) || v.FirstMs != first.FirstClaimed.UnixMilli() {
		t.Fatalf("taken-over claim: %+v %v, want delivery 2 and the first claim's time %s", v, ok, first.FirstClaimed)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV.dedupe-window.>"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d messages in the bucket, want 1", info.State.Msgs)
	}
	if n := kvwindow.Takeovers(w); n != 1 {
		t.Fatalf("%d takeovers", n)
	}
}

// TestReleaseOnServer: Release is one write of the key expected at the caller's revision: a release marker naming
// the envelope, with the claim's TTL. It is no claim (Get skips it). The same envelope's later delivery finds it
// and gets DeadLettered without writing; another envelope claims over it (Won, through the marker path), told
// whether the event may be stored, and a takeover of that claim keeps it. An expiry marker is never released.
func TestReleaseOnServer(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	w := newWindow(t, js, kvwindow.DefaultConfig())
	st, err := js.Stream(ctx, "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Hour, Claimant: envelope(1), Delivery: delivery(2)}
	first := claim(t, w, c)
	if ok, err := w.Release(ctx, c, first.Revision, true); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	marker := lastOn(t, st, "t", "s", "k")
	if marker == nil || marker.Sequence != first.Revision+1 || marker.Header.Get(jetstream.MsgTTLHeader) != "3600s" {
		t.Fatalf("release marker: %+v", marker)
	}
	if _, ok, err := w.Get(ctx, "t", "s", "k"); ok || err != nil {
		t.Fatalf("Get after release: %v %v", ok, err)
	}
	if ok, err := w.Release(ctx, c, first.Revision, true); ok || err != nil {
		t.Fatalf("release again: %v %v", ok, err)
	}

	// A later delivery of the same envelope: dead-lettered already, nothing written.
	again := c
	again.Delivery = delivery(3)
	if got := claim(t, w, again); decision(got) != (kvwindow.Outcome{Status: kvwindow.DeadLettered, Revision: marker.Sequence}) {
		t.Fatalf("claim of the released envelope: %+v", got)
	}
	if m := lastOn(t, st, "t", "s", "k"); m.Sequence != marker.Sequence {
		t.Fatalf("the claim of the released envelope wrote seq %d", m.Sequence)
	}

	// Another envelope claims over the marker, told that the event may be stored; its takeover keeps that.
	_, _, markers, _ := kvwindow.Stats(w)
	b := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Hour, Claimant: envelope(2), Delivery: delivery(1)}
	next := claim(t, w, b)
	if next.Status != kvwindow.Won || next.Revision != marker.Sequence+1 || !next.MayBeStored {
		t.Fatalf("claim over the release marker: %+v (marker %d)", next, marker.Sequence)
	}
	if _, _, m, _ := kvwindow.Stats(w); m != markers+1 {
		t.Fatal("the claim did not go through the marker path")
	}
	b.Delivery = delivery(2)
	if took := claim(t, w, b); took.Status != kvwindow.Owned || !took.MayBeStored {
		t.Fatalf("takeover of a claim made over a may-be-stored marker: %+v", took)
	}

	// A release that does not say so leaves a marker the next claim is not warned by.
	e, _, err := w.Get(ctx, "t", "s", "k")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := w.Release(ctx, b, e.Revision, false); !ok || err != nil {
		t.Fatalf("second release: %v %v", ok, err)
	}
	third := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Hour, Claimant: envelope(3), Delivery: delivery(1)}
	if got := claim(t, w, third); got.Status != kvwindow.Won || got.MayBeStored {
		t.Fatalf("claim over a plain release marker: %+v", got)
	}

	// An expired claim's marker is not the caller's claim: Release leaves it alone.
	short := kvwindow.Claim{Tenant: "t", Source: "s", Key: "short", TTL: time.Second, Claimant: envelope(3), Delivery: delivery(1)}
	expiring := claim(t, w, short)
	var expiry *jetstream.RawStreamMsg
	natstest.Eventually(t, 15*time.Second, func() error {
		expiry = lastOn(t, st, "t", "s", "short")
		if expiry == nil || expiry.Header.Get(jetstream.MarkerReasonHeader) != "MaxAge" {
			return errors.New("no expiry marker yet")
		}
		return nil
	})
	if ok, err := w.Release(ctx, short, expiring.Revision, false); ok || err != nil {
		t.Fatalf("release of an expired claim: %v %v", ok, err)
	}
	if m := lastOn(t, st, "t", "s", "short"); m != nil && m.Sequence != expiry.Sequence {
		t.Fatalf("release changed the key: seq %d, marker %d", m.Sequence, expiry.Sequence)
	}
}
