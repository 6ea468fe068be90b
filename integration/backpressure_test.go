package integration

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// waitStall waits until the pipeline stops moving with work still pending (the same progress for 2s), then
// checks the safety property of backpressure: every acknowledged envelope has its outcome in DEDUPED, in the
// records purged from it, or in the dead-letter stream. It holds only for workloads without duplicates.
func waitStall(t *testing.T, c *Client, what string, purged int, cond func(Progress) bool) Progress {
	t.Helper()
	var last Progress
	since := time.Now()
	poll(t, time.Minute, func() (bool, string) {
		p, err := c.Progress(context.Background())
		if err != nil {
			return false, err.Error()
		}
		// Redeliveries go on during a stall (NAKs with backoff): only the outcomes and the backlog must hold still.
		if p.Pending != last.Pending || p.Outputs != last.Outputs || p.DeadLetter != last.DeadLetter || p.Input != last.Input {
			since = time.Now()
		}
		last = p
		return cond(p) && p.Pending > 0 && time.Since(since) >= 2*time.Second, "not stalled (" + what + "): " + p.String()
	})
	acked := last.Input - last.Pending
	outcomes := last.Outputs + uint64(purged) + last.DeadLetter
	t.Logf("stalled (%s): %s; acknowledged %d, outcomes %d", what, last, acked, outcomes)
	if acked > outcomes {
		t.Errorf("%s: %d envelopes acknowledged but only %d outcomes are durable: %d acknowledged without being republished",
			what, acked, outcomes, acked-outcomes)
	}
	return last
}

func naks(t *testing.T, w *Worker, reason string) float64 {
	m, err := w.Metrics()
	if err != nil {
		t.Errorf("metrics: %v", err)
		return 0
	}
	return SumMetric(m, "dedupeworker_naks_total", "reason")[reason]
}

func publishAll(t *testing.T, c *Client, envs []*Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Publish(ctx, envs, 512, 0, nil); err != nil {
		t.Fatal(err)
	}
}

// Scenario 5a: the output stream is full (MaxMsgs, discard new), then purged, then unlimited, then unavailable
// (no stream listens on deduped.>) for a while.
func TestBackpressureOutput(t *testing.T) {
	needWorker(t)
	const limit = 300
	n1, n2 := scale(1_000, 10_000), scale(2_000, 20_000)
	start := time.Now()
	srv := natstest.Run(t)
	c := NewClient(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name: OutputStream, Subjects: []string{OutputPrefix + ".>"}, Storage: jetstream.FileStorage,
		MaxMsgs: limit, Discard: jetstream.DiscardNew, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ws := StartWorkers(t, 1, baseEnv(srv.URL()))
	w := ws[0]

	// Phase 1: no duplicates, no dead letters: every acknowledged envelope must have an output.
	phase1 := Mixed(MixOptions{N: n1, Tenants: []string{"acme", "globex"}, Seed: uint64(seed) + 51})
	publishAll(t, c, phase1)
	waitStall(t, c, "output full", 0, func(p Progress) bool { return p.Outputs == limit })
	if v := naks(t, w, "publish"); v == 0 {
		t.Errorf("output full: dedupeworker_naks_total{reason=\"publish\"} is 0")
	}
	// Purge: count what was removed into the ledger.
	purged, err := ReadStream(ctx, c.JS, OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("purged %d outputs", len(purged))
	waitStall(t, c, "output full after purge", len(purged), func(p Progress) bool { return p.Outputs == limit })

	// Raise the limit: everything flows.
	info, err := out.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxMsgs = -1
	if _, err := c.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	c.WaitQuiet(t, uint64(n1), time.Minute)

	// Phase 2: the output stream stops listening on deduped.> while a mixed workload (with duplicates and dead
	// letters) arrives; nothing may be lost, and work resumes when it listens again.
	paused := cfg
	paused.Subjects = []string{"deduped-paused.>"}
	if _, err := c.JS.UpdateStream(ctx, paused); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Progress(ctx)
	naksBefore := naks(t, w, "publish")
	phase2 := Mixed(MixOptions{N: n2, Tenants: []string{"acme", "globex", "hooli"}, DupFrac: 0.3, FarFrac: 0.3, BadFrac: 0.01, Seed: uint64(seed) + 52})
	publishAll(t, c, phase2)
	if !within(20*time.Second, func() bool { return naks(t, w, "publish") > naksBefore+10 }) {
		t.Errorf("output unavailable: no publish NAKs within 20s")
	}
	if p, _ := c.Progress(ctx); p.Outputs != before.Outputs {
		t.Errorf("output unavailable, yet DEDUPED grew from %d to %d", before.Outputs, p.Outputs)
	}
	if _, err := c.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	q := c.WaitQuiet(t, uint64(n1+n2), 2*time.Minute)
	t.Logf("quiet %s after the output came back: %s", time.Since(resumed).Round(time.Millisecond), q)
	r := c.Ledger(t, append(append([]*Envelope(nil), phase1...), phase2...), purged)
	t.Logf("FIGURES scenario=backpressure-output envelopes=%d limit=%d purged=%d elapsed=%s ledger=%q",
		n1+n2, limit, len(purged), time.Since(start).Round(time.Second), r.Summary())
}

// Scenario 5b: the window bucket is full (MaxBytes): keyed envelopes wait, unkeyed ones flow, nothing is acked
// without its outcome; raising MaxBytes lets everything through.
func TestBackpressureWindow(t *testing.T) {
	needWorker(t)
	const maxBytes = 48 << 10
	n1, n2 := scale(1_500, 15_000), scale(1_500, 15_000)
	start := time.Now()
	srv := natstest.Run(t)
	c := NewClient(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: "dedupe-window", History: 1, LimitMarkerTTL: time.Minute, MaxBytes: maxBytes, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	ws := StartWorkers(t, 1, baseEnv(srv.URL()))
	w := ws[0]

	phase1 := Mixed(MixOptions{N: n1, Tenants: []string{"acme", "globex"}, Seed: uint64(seed) + 53})
	publishAll(t, c, phase1)
	stalled := waitStall(t, c, "window full", 0, func(Progress) bool { return true })
	kv, err := c.JS.Stream(ctx, "KV_dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	kvInfo := kv.CachedInfo()
	t.Logf("window full: %d claims, %d of %d bytes; window NAKs %v", kvInfo.State.Msgs, kvInfo.State.Bytes, maxBytes, naks(t, w, "window-unavailable"))
	if stalled.Pending == 0 {
		t.Fatalf("the window never filled up: grow the workload")
	}
	cfg := kvInfo.Config
	cfg.MaxBytes = -1
	if _, err := c.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	c.WaitQuiet(t, uint64(n1), time.Minute)
	t.Logf("window raised: drained in %s", time.Since(resumed).Round(time.Millisecond))

	phase2 := Mixed(MixOptions{N: n2, Tenants: []string{"acme", "globex", "hooli"}, DupFrac: 0.3, FarFrac: 0.3, BadFrac: 0.01, Seed: uint64(seed) + 54})
	publishAll(t, c, phase2)
	q := c.WaitQuiet(t, uint64(n1+n2), 2*time.Minute)
	t.Logf("quiet: %s", q)
	r := c.Ledger(t, append(append([]*Envelope(nil), phase1...), phase2...), nil)
	t.Logf("FIGURES scenario=backpressure-window envelopes=%d max_bytes=%d claims_when_full=%d elapsed=%s ledger=%q",
		n1+n2, maxBytes, kvInfo.State.Msgs, time.Since(start).Round(time.Second), r.Summary())
}
