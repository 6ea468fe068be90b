package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestInputLimitProblems decides which of the input stream's limits delete envelopes before the worker processed
// them: an age limit always, a count or size limit only with discard old (discard new refuses the publisher).
func TestInputLimitProblems(t *testing.T) {
	old, nw := jetstream.DiscardOld, jetstream.DiscardNew
	for _, tc := range []struct {
		name string
		sc   jetstream.StreamConfig
		want []string // each in one problem, in order
	}{
		{name: "as created", sc: jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy}},
		{name: "age", sc: jetstream.StreamConfig{MaxAge: 48 * time.Hour}, want: []string{"MaxAge"}},
		{name: "age with discard new", sc: jetstream.StreamConfig{MaxAge: time.Hour, Discard: nw}, want: []string{"MaxAge"}},
		{name: "count discard old", sc: jetstream.StreamConfig{MaxMsgs: 5, Discard: old}, want: []string{"MaxMsgs"}},
		{name: "count discard new", sc: jetstream.StreamConfig{MaxMsgs: 5, Discard: nw}},
		{name: "bytes discard old", sc: jetstream.StreamConfig{MaxBytes: 1 << 30, Discard: old}, want: []string{"MaxBytes"}},
		{name: "bytes discard new", sc: jetstream.StreamConfig{MaxBytes: 1 << 30, Discard: nw}},
		{name: "per subject discard old", sc: jetstream.StreamConfig{MaxMsgsPerSubject: 10, Discard: old}, want: []string{"MaxMsgsPerSubject"}},
		{name: "per subject discard new", sc: jetstream.StreamConfig{MaxMsgsPerSubject: 10, Discard: nw}, want: []string{"MaxMsgsPerSubject"}},
		{name: "per subject discard new per subject", sc: jetstream.StreamConfig{MaxMsgsPerSubject: 10, Discard: nw, DiscardNewPerSubject: true}},
		{name: "unlimited (-1)", sc: jetstream.StreamConfig{MaxMsgs: -1, MaxBytes: -1, MaxMsgsPerSubject: -1, Discard: old}},
		{name: "all", sc: jetstream.StreamConfig{MaxAge: time.Hour, MaxMsgs: 1, MaxBytes: 1, MaxMsgsPerSubject: 1, Discard: old},
			want: []string{"MaxAge", "MaxMsgs", "MaxBytes", "MaxMsgsPerSubject"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pipeline.InputLimitProblems(tc.sc)
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], "("+tc.want[i]+")")
			}
			if !ok {
				t.Fatalf("problems %q, want one naming each of %q", got, tc.want)
			}
		})
	}
}

// TestDroppedUndelivered: the envelopes between the consumer's last delivered sequence and the stream's first are
// gone without a delivery; none when the consumer is at or past the stream's first.
func TestDroppedUndelivered(t *testing.T) {
	for _, tc := range []struct{ first, delivered, want uint64 }{
		{first: 1, delivered: 0, want: 0},   // nothing stored, nothing delivered
		{first: 6, delivered: 0, want: 5},   // 1-5 dropped while the worker was down
		{first: 6, delivered: 5, want: 0},   // 1-5 delivered and acknowledged (work queue)
		{first: 3, delivered: 9, want: 0},   // 3-9 delivered, not yet acknowledged
		{first: 11, delivered: 10, want: 0}, // empty: everything acknowledged
		{first: 21, delivered: 10, want: 10},
	} {
		if got := pipeline.DroppedUndelivered(tc.first, tc.delivered); got != tc.want {
			t.Errorf("DroppedUndelivered(%d, %d) = %d, want %d", tc.first, tc.delivered, got, tc.want)
		}
	}
}

// TestSeesAll: the gap says envelopes were dropped only when the consumer is offered every subject the stream stores.
func TestSeesAll(t *testing.T) {
	for _, tc := range []struct {
		subjects, filters []string
		want              bool
	}{
		{[]string{"ingest.>"}, nil, true},
		{[]string{"ingest.>"}, []string{"ingest.>"}, true},
		{[]string{"ingest.>", "other.>"}, []string{"ingest.>"}, false},
		{[]string{"ingest.*.*"}, []string{"ingest.>"}, true},
		{[]string{"ingest.>"}, []string{"ingest.*.*"}, false},
	} {
		if got := pipeline.SeesAll(tc.subjects, tc.filters); got != tc.want {
			t.Errorf("SeesAll(%q, %q) = %v, want %v", tc.subjects, tc.filters, got, tc.want)
		}
	}
}

// TestInputLimitDropsWarned: an operator's INGEST keeps at most 5 messages with discard old. While the worker is
// down 10 envelopes arrive, and the server deletes the first 5 unprocessed. The worker, started, warns about the
// limit, logs and counts the 5 envelopes lost, and processes the 5 left.
func TestInputLimitDropsWarned(t *testing.T) {
	e := newEnv(t)
	e.createStream(jetstream.StreamConfig{
		Name:      pipeline.DefaultInputStream,
		Subjects:  []string{"ingest.>"},
		Retention: jetstream.WorkQueuePolicy,
		MaxMsgs:   5,
		Discard:   jetstream.DiscardOld,
	})
	cfg := e.config(memWindow())
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e.publish("ingest.acme.gh", hdr("X-GitHub-Delivery", fmt.Sprintf("d-%d", i)), []byte(`{}`))
	}
	e.start(cfg)
	natstest.Eventually(t, 20*time.Second, func() error {
		log := e.log.String()
		switch {
		case !strings.Contains(log, "deletes envelopes not yet processed") || !strings.Contains(log, "(MaxMsgs)"):
			return fmt.Errorf("no warning about the limit")
		case !strings.Contains(log, "dropped=5"):
			return fmt.Errorf("no error about the 5 envelopes dropped")
		case e.metric("dedupeworker_input_dropped_total") != 5:
			return fmt.Errorf("dedupeworker_input_dropped_total %v, want 5", e.metric("dedupeworker_input_dropped_total"))
		}
		return nil
	})
	e.waitCount(pipeline.DefaultOutputStream, 5, 20*time.Second)
	if n := strings.Count(e.log.String(), "deletes envelopes not yet processed"); n != 1 {
		t.Errorf("warned %d times about the limit, want once", n)
	}
	if got := e.metric("dedupeworker_input_dropped_total"); got != 5 {
		t.Errorf("dedupeworker_input_dropped_total %v after processing, want 5", got)
	}
}

// TestInputLimitNoDropsWhileProcessing: an INGEST with a limit it never reaches, under a worker processing a steady
// flow. The acknowledged envelopes leave the work-queue stream, its first sequence racing ahead of what the status
// poll read of the consumer a moment before: none of them counts as dropped.
func TestInputLimitNoDropsWhileProcessing(t *testing.T) {
	e := newEnv(t)
	e.createStream(jetstream.StreamConfig{
		Name:      pipeline.DefaultInputStream,
		Subjects:  []string{"ingest.>"},
		Retention: jetstream.WorkQueuePolicy,
		MaxMsgs:   100_000,
		Discard:   jetstream.DiscardOld,
	})
	cfg := e.config(memWindow())
	cfg.StatusInterval = 10 * time.Millisecond // as many polls as can be while envelopes are acknowledged
	e.start(cfg)
	const n = 400
	for i := range n {
		e.publish("ingest.acme.gh", hdr("X-GitHub-Delivery", fmt.Sprintf("d-%d", i)), []byte(`{}`))
	}
	e.waitCount(pipeline.DefaultOutputStream, n, 30*time.Second)
	e.drained(20 * time.Second)
	if !strings.Contains(e.log.String(), "(MaxMsgs)") {
		t.Error("no warning about the limit")
	}
	if got := e.metric("dedupeworker_input_dropped_total"); got != 0 {
		t.Fatalf("dedupeworker_input_dropped_total %v, want 0: nothing was dropped", got)
	}
}
