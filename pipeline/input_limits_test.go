package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

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

// TestUndeliveredGap: the envelopes between the last sequence the consumer is known to have delivered (as read
// now, the highest this worker saw it deliver, the last already counted) and the stream's first are gone without a
// delivery; none when the consumer is at or past the stream's first.
func TestUndeliveredGap(t *testing.T) {
	for _, tc := range []struct {
		name                            string
		first, delivered, high, through uint64
		from, n                         uint64
	}{
		{name: "nothing stored, nothing delivered", first: 1},
		{name: "dropped while the worker was down", first: 6, from: 1, n: 5},
		{name: "delivered and acknowledged (work queue)", first: 6, delivered: 5},
		{name: "delivered, not yet acknowledged", first: 3, delivered: 9},
		{name: "empty: everything acknowledged", first: 11, delivered: 10},
		{name: "dropped after a delivery", first: 21, delivered: 10, from: 11, n: 10},
		// An operator's consumer reset (nats consumer reset) sets the delivered sequence back without clamping it to
		// the stream's first: what was delivered before is not lost.
		{name: "consumer reset below the stream's first", first: 1000, delivered: 0, high: 999},
		// A purge advances the delivered sequence on the consumer's leader only: a new leader restores the one from
		// before the purge.
		{name: "purge, then a new consumer leader", first: 1000, delivered: 400, high: 999},
		{name: "dropped past the highest delivered", first: 1000, delivered: 0, high: 900, from: 901, n: 99},
		{name: "counted already", first: 21, delivered: 10, through: 20},
		{name: "more dropped since counted", first: 31, delivered: 10, high: 12, through: 20, from: 21, n: 10},
	} {
		from, n := pipeline.UndeliveredGap(tc.first, tc.delivered, tc.high, tc.through)
		if from != tc.from || n != tc.n {
			t.Errorf("%s: UndeliveredGap(%d, %d, %d, %d) = %d from %d, want %d from %d",
				tc.name, tc.first, tc.delivered, tc.high, tc.through, n, from, tc.n, tc.from)
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

// TestInputLimitPollReadsConsumerOnce: on an INGEST with limits whose envelopes were all processed, one status poll
// reads the consumer once: what it read of it before the stream shows no gap. Before, every poll read it a second
// time once the work-queue stream's first sequence had passed the last one counted as dropped.
func TestInputLimitPollReadsConsumerOnce(t *testing.T) {
	e := newEnv(t)
	cfg := e.drainedLimitedInput(3)

	p, err := pipeline.Standing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reads := e.requestsInOnePoll(p, "$JS.API.CONSUMER.INFO.>"); len(reads) != 1 {
		t.Errorf("the poll read the consumer %d times (%v), want once", len(reads), reads)
	}
	if got := e.metric("dedupeworker_input_dropped_total"); got != 0 {
		t.Errorf("dedupeworker_input_dropped_total %v, want 0", got)
	}
}

// TestInputLimitDropNotCountedAgainOnRestart: envelopes aged out of an idle INGEST while no worker ran leave a gap
// at its head until the next delivery. The first worker to start counts them; a second one, started while the first
// pulls (a rolling deploy), does not count them again, and says why.
func TestInputLimitDropNotCountedAgainOnRestart(t *testing.T) {
	e := newEnv(t)
	e.createStream(jetstream.StreamConfig{
		Name:      pipeline.DefaultInputStream,
		Subjects:  []string{"ingest.>"},
		Retention: jetstream.WorkQueuePolicy,
		MaxAge:    time.Second,
	})
	cfg := e.config(memWindow())
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.publish("ingest.acme.gh", hdr("X-GitHub-Delivery", fmt.Sprintf("d-%d", i)), []byte(`{}`))
	}
	natstest.Eventually(t, 20*time.Second, func() error {
		s, err := e.js.Stream(ctx(t), pipeline.DefaultInputStream)
		if err != nil {
			return err
		}
		if st := s.CachedInfo().State; st.Msgs != 0 || st.FirstSeq != 6 {
			return fmt.Errorf("INGEST holds %d envelopes from %d, want none from 6", st.Msgs, st.FirstSeq)
		}
		return nil
	})
	e.start(cfg)
	natstest.Eventually(t, 20*time.Second, func() error {
		if got := e.metric("dedupeworker_input_dropped_total"); got != 5 {
			return fmt.Errorf("first worker: dedupeworker_input_dropped_total %v, want 5", got)
		}
		return nil
	})

	second := cfg
	reg := prometheus.NewRegistry()
	second.Metrics = pipeline.NewMetrics(reg)
	log := &natstest.Buffer{}
	second.Logger = slog.New(slog.NewTextHandler(log, nil))
	e.start(second)
	natstest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(log.String(), "no longer holds 5 envelopes its consumer never delivered") {
			return fmt.Errorf("the second worker did not report the gap")
		}
		return nil
	})
	if !strings.Contains(log.String(), "other workers pulling from it were watching") {
		t.Errorf("the second worker did not say the others count the gap:\n%s", log)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "dedupeworker_input_dropped_total" && mf.GetMetric()[0].GetCounter().GetValue() != 0 {
			t.Errorf("second worker: dedupeworker_input_dropped_total %v, want 0: the first counted these",
				mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
}

// TestInputLimitConsumerResetNotCounted: an operator resets the consumer of a drained INGEST with limits to sequence
// 1 (nats consumer reset), below the stream's first: its delivered sequence goes back to 0, the processed envelopes
// 1-5 now between it and the stream's first. They are no loss: the next poll counts none.
func TestInputLimitConsumerResetNotCounted(t *testing.T) {
	e := newEnv(t)
	cfg := e.drainedLimitedInput(5)

	p, err := pipeline.Standing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pipeline.RefreshStatus(p, context.Background())
	if _, err := e.js.ResetConsumerToSequence(ctx(t), pipeline.DefaultInputStream, cfg.Consumer, 1); err != nil {
		t.Fatal(err)
	}
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Stream != 0 {
		t.Fatalf("after the reset the consumer's delivered stream sequence is %d, want 0", info.Delivered.Stream)
	}
	pipeline.RefreshStatus(p, context.Background())
	if got := e.metric("dedupeworker_input_dropped_total"); got != 0 {
		t.Errorf("dedupeworker_input_dropped_total %v after a consumer reset, want 0: nothing was lost", got)
	}
}
