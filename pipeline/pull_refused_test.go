package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

func TestShapePull(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inFlight  int
		ackWait   time.Duration
		c         jetstream.ConsumerConfig
		want      pipeline.PullShape
		clampedIn []string
	}{
		{name: "no limits", inFlight: 1024, ackWait: 30 * time.Second,
			want: pipeline.PullShape{Batch: 1024, Expiry: 15 * time.Second, Heartbeat: 3750 * time.Millisecond}},
		{name: "limits above the requests", inFlight: 64, ackWait: 30 * time.Second,
			c:    jetstream.ConsumerConfig{MaxRequestBatch: 64, MaxRequestExpires: time.Minute, MaxWaiting: 512},
			want: pipeline.PullShape{Batch: 64, Expiry: 15 * time.Second, Heartbeat: 3750 * time.Millisecond}},
		{name: "batch", inFlight: 1024, ackWait: 30 * time.Second, c: jetstream.ConsumerConfig{MaxRequestBatch: 10},
			want:      pipeline.PullShape{Batch: 10, Expiry: 15 * time.Second, Heartbeat: 3750 * time.Millisecond},
			clampedIn: []string{"batch 1024 → 10 (MaxRequestBatch)"}},
		{name: "expiry, heartbeat at most half of it", inFlight: 8, ackWait: 30 * time.Second,
			c:         jetstream.ConsumerConfig{MaxRequestExpires: 500 * time.Millisecond},
			want:      pipeline.PullShape{Batch: 8, Expiry: 500 * time.Millisecond, Heartbeat: 250 * time.Millisecond},
			clampedIn: []string{"expiry 15s → 500ms (MaxRequestExpires)"}},
		{name: "one waiting request", inFlight: 8, ackWait: 2 * time.Second, c: jetstream.ConsumerConfig{MaxWaiting: 1},
			want:      pipeline.PullShape{Batch: 8, Expiry: time.Second, Heartbeat: 500 * time.Millisecond, Single: true},
			clampedIn: []string{"MaxWaiting 1"}},
		{name: "all three", inFlight: 100, ackWait: 10 * time.Second,
			c:         jetstream.ConsumerConfig{MaxRequestBatch: 1, MaxRequestExpires: 2 * time.Second, MaxWaiting: 1},
			want:      pipeline.PullShape{Batch: 1, Expiry: 2 * time.Second, Heartbeat: time.Second, Single: true},
			clampedIn: []string{"batch 100 → 1", "expiry 5s → 2s", "MaxWaiting 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pipeline.ShapePull(tc.inFlight, tc.ackWait, tc.c)
			clamped := got.Clamped
			got.Clamped = ""
			if got != tc.want {
				t.Errorf("shape %+v, want %+v", got, tc.want)
			}
			if len(tc.clampedIn) == 0 && clamped != "" {
				t.Errorf("clamped %q, want nothing", clamped)
			}
			for _, s := range tc.clampedIn {
				if !strings.Contains(clamped, s) {
					t.Errorf("clamped %q does not say %q", clamped, s)
				}
			}
		})
	}
}

func TestLimitFromRefusal(t *testing.T) {
	for _, tc := range []struct {
		descr string
		ok    bool
		batch int
		exp   time.Duration
	}{
		{"Exceeded MaxRequestBatch of 10", true, 10, 0},
		{"Exceeded MaxRequestExpires of 1.5s", true, 0, 1500 * time.Millisecond},
		{"exceeded maxrequestbatch of 3 ", true, 3, 0},
		{"Exceeded MaxRequestBatch of zero", false, 0, 0},
		{"Exceeded MaxRequestBatch of 0", false, 0, 0},
		{"Exceeded MaxWaiting", false, 0, 0},
		{"Consumer is push based", false, 0, 0},
		{"", false, 0, 0},
	} {
		c, ok := pipeline.LimitFromRefusal(tc.descr, jetstream.ConsumerConfig{})
		if ok != tc.ok || c.MaxRequestBatch != tc.batch || c.MaxRequestExpires != tc.exp {
			t.Errorf("%q: ok %v batch %d expires %s, want %v %d %s", tc.descr, ok, c.MaxRequestBatch, c.MaxRequestExpires, tc.ok, tc.batch, tc.exp)
		}
	}
}

func TestPullsStuck(t *testing.T) {
	const s = time.Second
	bound := pipeline.PullStuckAfter(625 * time.Millisecond) // the tests' ack wait of 5s
	if bound != 5*s {
		t.Fatalf("bound %s, want the 5s floor", bound)
	}
	if b := pipeline.PullStuckAfter(3750 * time.Millisecond); b != 15*s {
		t.Fatalf("bound at the default ack wait %s, want 15s", b)
	}
	for _, tc := range []struct {
		name                string
		now, answered, refd time.Duration
		busy                bool
		maxWaiting          int
		want                string // "" = not stuck
	}{
		{name: "answered lately", now: 10 * s, answered: 6 * s, refd: -1},
		{name: "at the bound", now: 10 * s, answered: 5 * s, refd: -1},
		{name: "silent past the bound", now: 10 * s, answered: 4 * s, refd: -1, want: "unanswered for 6s"},
		{name: "silent, MaxWaiting named", now: 10 * s, answered: 4 * s, refd: -1, maxWaiting: 1, want: "once 1 requests wait"},
		{name: "refused since the answer", now: 10 * s, answered: 4 * s, refd: 9 * s, want: "refused for 6s: 409 Consumer is push based"},
		{name: "refusal older than the answer", now: 10 * s, answered: 4 * s, refd: 3 * s, want: "unanswered"},
		{name: "refused, within the bound", now: 10 * s, answered: 8 * s, refd: 9 * s},
		{name: "handler busy", now: 10 * s, answered: 1 * s, refd: 9 * s, busy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pipeline.PullsStuck(tc.now, tc.answered, tc.busy, tc.refd, bound, tc.maxWaiting)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("stuck: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// replaceConsumer provisions everything, then re-creates the consumer as an operator's tool would, with edit
// applied to the configuration Provision gave it.
func (e *env) replaceConsumer(cfg pipeline.Config, edit func(*jetstream.ConsumerConfig)) {
	e.t.Helper()
	if err := pipeline.Provision(ctx(e.t), e.js, cfg); err != nil {
		e.t.Fatal(err)
	}
	c, err := e.js.Consumer(ctx(e.t), pipeline.DefaultInputStream, pipeline.DefaultConsumer)
	if err != nil {
		e.t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	if err := e.js.DeleteConsumer(ctx(e.t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		e.t.Fatal(err)
	}
	edit(&cc)
	if _, err := e.js.CreateConsumer(ctx(e.t), pipeline.DefaultInputStream, cc); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) sendEvents(prefix string, n int) {
	e.t.Helper()
	for i := range n {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", prefix+strconv.Itoa(i)), []byte(`{"n":`+strconv.Itoa(i)+`}`))
	}
}

// TestPullsWithinConsumerLimits: a consumer created (and later edited) by an operator with request limits below
// what the worker asks for (MaxInFlight 64, a 2.5s expiry) refuses every larger pull with a 409. The worker cuts
// its requests down to the limits and consumes everything. Before, it asked again at every heartbeat, consumed
// nothing and stayed ready.
func TestPullsWithinConsumerLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*jetstream.ConsumerConfig)
	}{
		{"MaxRequestBatch", func(c *jetstream.ConsumerConfig) { c.MaxRequestBatch = 4 }},
		{"MaxRequestExpires", func(c *jetstream.ConsumerConfig) { c.MaxRequestExpires = 400 * time.Millisecond }},
		{"MaxWaiting 1", func(c *jetstream.ConsumerConfig) { c.MaxWaiting = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config(memWindow())
			e.replaceConsumer(cfg, tc.edit)
			r := e.start(cfg)
			e.sendEvents("a-", 20)
			e.waitCount(pipeline.DefaultOutputStream, 20, 15*time.Second)
			e.drained(10 * time.Second)
			if err := r.p.Ready(context.Background()); err != nil {
				t.Errorf("not ready after consuming everything: %v", err)
			}
		})
	}
	t.Run("edited while running", func(t *testing.T) {
		e := newEnv(t)
		cfg := e.config(memWindow())
		e.start(cfg)
		e.sendEvents("a-", 5)
		e.waitCount(pipeline.DefaultOutputStream, 5, 10*time.Second)
		c, err := e.js.Consumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer)
		if err != nil {
			t.Fatal(err)
		}
		cc := c.CachedInfo().Config
		cc.MaxRequestBatch, cc.MaxRequestExpires = 3, 300*time.Millisecond
		if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, cc); err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, 10*time.Second, func() error {
			if !strings.Contains(e.log.String(), "cut down to the consumer's limits") {
				return fmt.Errorf("the cut is not logged")
			}
			return nil
		})
		e.sendEvents("b-", 20)
		e.waitCount(pipeline.DefaultOutputStream, 25, 15*time.Second)
		e.drained(10 * time.Second)
	})
}

// TestPullsRefusedUnready: pulls the consumer refuses for good (here a consumer re-created by a tool with priority
// groups, which refuses every request that names none) make the pipeline unready within the bound (four
// heartbeats, at least 5s), with the refusal as the reason and dedupeworker_ready 0. Before, each refusal ended
// the subscription and the next binding started over: ready, but for the moments between them.
func TestPullsRefusedUnready(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.replaceConsumer(cfg, func(c *jetstream.ConsumerConfig) {
		c.PriorityPolicy, c.PriorityGroups = jetstream.PriorityPolicyOverflow, []string{"jobs"}
	})
	start := time.Now()
	r := e.start(cfg)
	e.waitUnready(r, start, "refused", "Priority Group missing")
}

// TestPullsDroppedUnready: a consumer that lets one pull request wait (MaxWaiting 1) while another client's request
// holds the place drops the worker's requests without a word (they ask for heartbeats). The pipeline reports the
// silence as not ready within the bound, and is ready again once the place is free.
func TestPullsDroppedUnready(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.replaceConsumer(cfg, func(c *jetstream.ConsumerConfig) { c.MaxWaiting = 1 })
	other := natstest.Connect(t, e.srv.URL())
	inbox := other.NewInbox()
	sub, err := other.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf(`{"batch":1,"expires":%d}`, int64(5*time.Minute))
	if err := other.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.INGEST.dedupeworker", inbox, []byte(req)); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.start(cfg)
	e.waitUnready(r, start, "unanswered", "MaxWaiting")
	// The other client goes away: its request loses its interest and the server lets the worker's in.
	_ = sub.Unsubscribe()
	other.Close()
	natstest.Eventually(t, 20*time.Second, func() error { return r.p.Ready(context.Background()) })
	e.sendEvents("a-", 3)
	e.waitCount(pipeline.DefaultOutputStream, 3, 15*time.Second)
}

// waitUnready waits until r is not ready for a reason saying each of want, and dedupeworker_ready says so, within
// the bound of a pull refusal (5s at the tests' ack wait) and the status poll, with room for a loaded machine.
func (e *env) waitUnready(r *running, start time.Time, want ...string) {
	e.t.Helper()
	natstest.Eventually(e.t, 20*time.Second, func() error {
		err := r.p.Ready(context.Background())
		if err == nil {
			return fmt.Errorf("still ready %s after the start", time.Since(start).Round(time.Millisecond))
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				return fmt.Errorf("not ready, but for another reason: %v", err)
			}
		}
		if g := e.metric("dedupeworker_ready"); g != 0 {
			return fmt.Errorf("dedupeworker_ready %v while Ready says %v", g, err)
		}
		return nil
	})
	e.t.Logf("not ready %s after the start: %v", time.Since(start).Round(time.Millisecond), r.p.Ready(context.Background()))
}
