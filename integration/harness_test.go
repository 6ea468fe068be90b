package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Envelope is one delivery the harness publishes, with the outcome it predicts for it.
type Envelope struct {
	Subject string
	Header  nats.Header
	Body    []byte
	Exp     Expect // Seq is filled in from the PubAck
	ID      string // the harness's id (X-Test-Envelope, Nats-Msg-Id of the publish); set by Publish when empty
}

func (e *Envelope) msg(id string) *nats.Msg {
	h := nats.Header{}
	for k, v := range e.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set(HdrEnvelope, id)
	h.Set(nats.MsgIdHdr, id) // publish retries collapse in INGEST
	return &nats.Msg{Subject: e.Subject, Header: h, Data: e.Body}
}

// Client is the harness's own connection.
type Client struct {
	t    *testing.T
	NC   *nats.Conn
	JS   jetstream.JetStream
	run  string // distinguishes this client's Nats-Msg-Ids
	next atomic.Int64
}

// NewID returns a fresh envelope id.
func (c *Client) NewID() string { return c.run + "-" + strconv.FormatInt(c.next.Add(1), 10) }

// NewClient connects the harness to url (reconnecting for ever).
func NewClient(t *testing.T, url string, opts ...nats.Option) *Client {
	t.Helper()
	nc := natstest.Connect(t, url, append([]nats.Option{nats.ReconnectBufSize(64 << 20)}, opts...)...)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second), jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		t.Fatal(err)
	}
	return &Client{t: t, NC: nc, JS: js, run: strconv.FormatInt(rand.Int64N(1<<40), 36)}
}

// PublishStats describes one Publish.
type PublishStats struct {
	Published int
	Retries   int64
	Elapsed   time.Duration
}

func (s PublishStats) String() string {
	return fmt.Sprintf("%d envelopes in %s (%d publish retries)", s.Published, s.Elapsed.Round(time.Millisecond), s.Retries)
}

// Publish publishes envs in order with at most window asynchronous publishes outstanding, checks every PubAck
// (stream INGEST, a sequence) and retries a failed or timed-out publish with the same Nats-Msg-Id until it is
// acknowledged or ctx ends. rate > 0 paces publishing to about rate envelopes per second. onProgress, if set, is
// called from the publishing goroutine after each envelope is handed to the client.
func (c *Client) Publish(ctx context.Context, envs []*Envelope, window int, rate float64, onProgress func(i int)) (PublishStats, error) {
	start := time.Now()
	type pending struct {
		i   int
		fut jetstream.PubAckFuture
	}
	queue := make(chan pending, window)
	var retries atomic.Int64
	collectErr := make(chan error, 1)
	go func() {
		var first error
		for p := range queue {
			if first != nil {
				continue
			}
			var ack *jetstream.PubAck
			select {
			case ack = <-p.fut.Ok():
			case err := <-p.fut.Err():
				retries.Add(1)
				ack, err = c.publishSync(ctx, envs[p.i], p.i, err, &retries)
				if err != nil {
					first = err
					continue
				}
			}
			if err := c.recordAck(envs[p.i], p.i, ack); err != nil {
				first = err
			}
		}
		collectErr <- first
	}()
	var sendErr error
	for _, e := range envs {
		if e.ID == "" {
			e.ID = c.NewID()
		}
	}
	for i, e := range envs {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d) // pacing the publisher, not waiting for a condition
			}
		}
		var fut jetstream.PubAckFuture
		var err error
		for attempt := 0; ; attempt++ {
			fut, err = c.JS.PublishMsgAsync(e.msg(e.ID))
			if err == nil || ctx.Err() != nil {
				break
			}
			retries.Add(1)
			backoff(attempt)
		}
		if err != nil {
			sendErr = fmt.Errorf("publish envelope %d (%s): %w", i, e.Subject, err)
			break
		}
		queue <- pending{i, fut}
		if onProgress != nil {
			onProgress(i)
		}
	}
	close(queue)
	err := errors.Join(sendErr, <-collectErr)
	return PublishStats{Published: len(envs), Retries: retries.Load(), Elapsed: time.Since(start)}, err
}

func (c *Client) publishSync(ctx context.Context, e *Envelope, i int, cause error, retries *atomic.Int64) (*jetstream.PubAck, error) {
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("publish envelope %d (%s): gave up: %w (last error %v)", i, e.Subject, ctx.Err(), cause)
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ack, err := c.JS.PublishMsg(pctx, e.msg(e.ID))
		cancel()
		if err == nil {
			return ack, nil
		}
		cause = err
		// 400 (header or message too large, ...) will never succeed; 503 (no leader) and 409 (the same
		// Nats-Msg-Id still in process during a leader change) are worth another try.
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code == 400 {
			return nil, fmt.Errorf("publish envelope %d (%s): refused for good: %w", i, e.Subject, err)
		}
		retries.Add(1)
		backoff(attempt)
	}
}

func (c *Client) recordAck(e *Envelope, i int, ack *jetstream.PubAck) error {
	if ack == nil || ack.Stream != InputStream || ack.Sequence == 0 {
		return fmt.Errorf("envelope %d (%s): bad PubAck %+v", i, e.Subject, ack)
	}
	e.Exp.Seq = ack.Sequence
	e.Exp.Subject = e.Subject
	return nil
}

func backoff(attempt int) {
	d := 20 * time.Millisecond << min(attempt, 5)
	time.Sleep(d) // retry backoff
}

// poll calls cond every 100ms until it reports done, failing the test with its last status after timeout.
func poll(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, status := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %s", timeout, status)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// Progress is the state of the pipeline as the streams show it.
type Progress struct {
	Pending     uint64 // consumer: not yet delivered + delivered and not acked
	AckPending  int
	Redelivered int
	Deliveries  uint64 // deliveries so far, redeliveries included (consumer sequence)
	Outputs     uint64 // messages in DEDUPED
	DeadLetter  uint64 // messages in DEDUPE_DLQ
	Input       uint64 // last sequence of INGEST
}

func (p Progress) String() string {
	return fmt.Sprintf("INGEST last seq %d, consumer pending %d (ack pending %d, redelivered %d), deliveries %d, DEDUPED %d, DEDUPE_DLQ %d",
		p.Input, p.Pending, p.AckPending, p.Redelivered, p.Deliveries, p.Outputs, p.DeadLetter)
}

// Progress reads the consumer and stream states (errors while NATS is down are returned).
func (c *Client) Progress(ctx context.Context) (Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var p Progress
	cons, err := c.JS.Consumer(ctx, InputStream, "dedupeworker")
	if err != nil {
		return p, fmt.Errorf("consumer: %w", err)
	}
	ci := cons.CachedInfo()
	p.Pending = ci.NumPending + uint64(ci.NumAckPending)
	p.AckPending = ci.NumAckPending
	p.Redelivered = ci.NumRedelivered
	p.Deliveries = ci.Delivered.Consumer
	for _, s := range []struct {
		name string
		n    *uint64
		last bool
	}{{OutputStream, &p.Outputs, false}, {DLQStream, &p.DeadLetter, false}, {InputStream, &p.Input, true}} {
		st, err := c.JS.Stream(ctx, s.name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return p, fmt.Errorf("stream %s: %w", s.name, err)
		}
		if s.last {
			*s.n = st.CachedInfo().State.LastSeq
		} else {
			*s.n = st.CachedInfo().State.Msgs
		}
	}
	return p, nil
}

// WaitQuiet waits until the consumer has nothing pending or unacknowledged, every published envelope reached
// INGEST, and the output counts stayed the same for three polls in a row.
func (c *Client) WaitQuiet(t *testing.T, published uint64, timeout time.Duration) Progress {
	t.Helper()
	var last Progress
	stable := 0
	poll(t, timeout, func() (bool, string) {
		p, err := c.Progress(context.Background())
		if err != nil {
			stable = 0
			return false, err.Error()
		}
		if p.Pending == 0 && p.Input >= published && p.Outputs == last.Outputs && p.DeadLetter == last.DeadLetter {
			stable++
		} else {
			stable = 0
		}
		last = p
		return stable >= 3, "not quiet: " + p.String()
	})
	return last
}

// Expects gathers the predictions of envs.
func Expects(envs []*Envelope) []Expect {
	out := make([]Expect, len(envs))
	for i, e := range envs {
		out[i] = e.Exp
	}
	return out
}

// Ledger reads DEDUPED and DEDUPE_DLQ, balances them against envs (plus records the test purged from DEDUPED),
// checks that the window holds exactly one claim per distinct key, logs the report and fails the test when it
// does not balance.
func (c *Client) Ledger(t *testing.T, envs []*Envelope, purged []Record) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outs, err := ReadStream(ctx, c.JS, OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := ReadStream(ctx, c.JS, DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	r := Balance(Expects(envs), append(append([]Record(nil), purged...), outs...), dlq)
	r.Purged = len(purged)
	if got, err := c.windowClaims(ctx); err != nil {
		r.problem("window bucket: %v", err)
	} else if got != uint64(r.WantUnique) {
		r.problem("window holds %d claims, want one per distinct key: %d", got, r.WantUnique)
	}
	t.Log(r.String())
	if !r.OK() {
		t.Errorf("ledger does not balance: %s", r.Summary())
	}
	return r
}

// Workers is a set of replicas.
type Workers []*Worker

// StartWorkers starts n replicas with the same variables and waits until each is ready.
func StartWorkers(t *testing.T, n int, vars map[string]string) Workers {
	t.Helper()
	ws := make(Workers, n)
	for i := range ws {
		ws[i] = StartWorker(t, fmt.Sprintf("w%d", i+1), vars)
	}
	for _, w := range ws {
		w.WaitReady(60 * time.Second)
	}
	return ws
}

// Kills is the number of SIGKILLs sent.
func (ws Workers) Kills() int {
	n := 0
	for _, w := range ws {
		w.mu.Lock()
		n += w.Kills
		w.mu.Unlock()
	}
	return n
}

// WaitIdle waits until no worker has an envelope in flight (dedupeworker_in_flight 0). A worker counts an envelope
// only once its ack is confirmed, which is after the consumer shows it acknowledged: counters read as soon as
// WaitQuiet returns can still miss the last envelopes. Call it after WaitQuiet, before reading them.
func (ws Workers) WaitIdle(t *testing.T, timeout time.Duration) {
	t.Helper()
	for _, w := range ws {
		poll(t, timeout, func() (bool, string) {
			m, err := w.Metrics()
			if err != nil {
				return false, fmt.Sprintf("worker %s: /metrics: %v", w.Name, err)
			}
			n, ok := m["dedupeworker_in_flight"]
			return ok && n == 0, fmt.Sprintf("worker %s: dedupeworker_in_flight %v (exported: %v)", w.Name, n, ok)
		})
	}
}

// Outcomes adds dedupeworker_envelopes_total over every worker, by outcome.
func (ws Workers) Outcomes(t *testing.T) map[string]float64 {
	t.Helper()
	total := map[string]float64{}
	for _, w := range ws {
		m, err := w.Metrics()
		if err != nil {
			t.Errorf("worker %s: /metrics: %v", w.Name, err)
			continue
		}
		for k, v := range SumMetric(m, "dedupeworker_envelopes_total", "outcome") {
			total[k] += v
		}
	}
	return total
}

// Env is the worker environment common to every scenario.
func baseEnv(url string) map[string]string {
	return map[string]string{
		"DEDUPE_NATS_URL": url,
		"DEDUPE_SOURCES":  StandardSources,
	}
}

// publishMarked publishes envs in the background, spread over d, and closes marks[k] once the publisher reaches
// envelope at(k) = len(envs)·(k+1)/(points+1): the points at which a test breaks (and mends) something mid-stream.
func publishMarked(ctx context.Context, t *testing.T, c *Client, envs []*Envelope, d time.Duration, points int) (marks []chan struct{}, at func(int) int, done <-chan PublishStats) {
	t.Helper()
	n := len(envs)
	marks = make([]chan struct{}, points)
	for i := range marks {
		marks[i] = make(chan struct{})
	}
	at = func(k int) int { return n * (k + 1) / (points + 1) }
	pubDone := make(chan PublishStats, 1)
	go func() {
		next := 0
		st, err := c.Publish(ctx, envs, 512, float64(n)/d.Seconds(), func(i int) {
			if next < points && i == at(next) {
				close(marks[next])
				next++
			}
		})
		if err != nil {
			t.Error(err)
		}
		pubDone <- st
	}()
	return marks, at, pubDone
}

// finish waits for the background publisher, then for the worker fleet to go quiet, and balances the ledger.
func (c *Client) finish(t *testing.T, envs []*Envelope, pubDone <-chan PublishStats) (Progress, *Report) {
	t.Helper()
	t.Logf("published %s", <-pubDone)
	q := c.WaitQuiet(t, uint64(len(envs)), 2*time.Minute)
	t.Logf("quiet: %s", q)
	return q, c.Ledger(t, envs, nil)
}

// windowClaims counts the messages of the window's bucket, or of all its shards (KV_dedupe-window-NN).
func (c *Client) windowClaims(ctx context.Context) (uint64, error) {
	var total uint64
	found := false
	names := c.JS.StreamNames(ctx)
	for name := range names.Name() {
		if name != "KV_dedupe-window" && !strings.HasPrefix(name, "KV_dedupe-window-") {
			continue
		}
		st, err := c.JS.Stream(ctx, name)
		if err != nil {
			return 0, err
		}
		total += st.CachedInfo().State.Msgs
		found = true
	}
	if err := names.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, errors.New("no window bucket")
	}
	return total, nil
}
