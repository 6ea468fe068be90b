package pipeline

import (
	"context"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// Handler exposes the network-free part of handling an envelope (subject parsing, key extraction dispatch,
// outbound header building) to the black-box tests and benchmarks.
type Handler struct{ w *worker }

// noJetStream stands in for a JetStream handle that is never used. New reads its connection and options (no
// connection: nil; no API prefix: the default); every other method is the nil interface's and panics if called.
type noJetStream struct{ jetstream.JetStream }

func (noJetStream) Conn() *nats.Conn                    { return nil }
func (noJetStream) Options() jetstream.JetStreamOptions { return jetstream.JetStreamOptions{} }

// noWindow stands in for a window that is never used.
type noWindow struct{}

func (noWindow) Claim(context.Context, kvwindow.Claim, kvwindow.Known) (kvwindow.Outcome, error) {
	return kvwindow.Outcome{}, kvwindow.ErrUnavailable
}
func (noWindow) Release(context.Context, kvwindow.Claim, uint64, bool) (bool, error) {
	return false, kvwindow.ErrUnavailable
}
func (noWindow) MarkPublished(context.Context, kvwindow.Claim, uint64, time.Time) (uint64, bool, error) {
	return 0, false, kvwindow.ErrUnavailable
}
func (noWindow) Get(context.Context, string, string, string) (kvwindow.Entry, bool, error) {
	return kvwindow.Entry{}, false, kvwindow.ErrUnavailable
}
func (noWindow) Ping(context.Context) error { return kvwindow.ErrUnavailable }

// NewHandler builds a pipeline from cfg (JetStream and Window may be nil) and returns one worker of it.
func NewHandler(cfg Config) (*Handler, error) {
	if cfg.JetStream == nil {
		cfg.JetStream = noJetStream{}
	}
	if cfg.Window == nil {
		cfg.Window = noWindow{}
	}
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Handler{w: p.newWorker(context.Background())}, nil
}

// Prepare inspects a delivery with stream sequence seq (stored at unix nanoseconds stamp) and builds the message
// the pipeline would publish for it. The message is reused by the next call.
func (h *Handler) Prepare(subject string, hdr nats.Header, body []byte, seq uint64, stamp int64) *nats.Msg {
	w := h.w
	w.p.inspect(&w.e, subject, hdr, body, seq, stamp)
	if w.e.dead != "" {
		return w.buildDeadLetter(subject, hdr, body, w.e.dead, w.e.deadErr)
	}
	return w.buildOutput(hdr, body, w.e.key != "")
}

// Standing builds a pipeline of cfg that is never run but counts as running and bound: its readiness changes only
// by the test's own calls, with no status poll or consume loop changing it meanwhile.
func Standing(cfg Config) (*Pipeline, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	p.running.Store(true)
	p.bound.Store(true)
	p.updateReady()
	return p, nil
}

// WindowDown and WindowUp report the window unreachable and reachable again, as a claim's answer does.
func WindowDown(p *Pipeline, err error) { p.windowDown(err) }
func WindowUp(p *Pipeline)              { p.windowUp() }

// Holders is this process's record of the claims its workers hold, for the benchmarks.
type Holders struct{ h *holders }

func NewHolders() *Holders { return &Holders{newHolders()} }

// Hold begins and finishes a published holding of key k by envelope seq, as a worker that wins a claim does.
func (h *Holders) Hold(k string, seq uint64) {
	hd := h.h.begin(k, seq, 1, math.MaxInt64)
	h.h.finish(k, hd, true, seq)
}

// Begin records that envelope seq holds k's claim; the function returned finishes the holding.
func (h *Holders) Begin(k string, seq uint64) (finish func(published bool)) {
	return h.BeginUntil(k, seq, math.MaxInt64)
}

// BeginUntil is Begin of a claim whose TTL runs out at expires (on the clock KnownAt reads).
func (h *Holders) BeginUntil(k string, seq uint64, expires time.Duration) (finish func(published bool)) {
	hd := h.h.begin(k, seq, 1, expires)
	return func(published bool) { h.h.finish(k, hd, published, seq) }
}

// Wait is what a copy finding k claimed by envelope seq waits for: found reports a holding of it here, and wait
// returns (once it finished) whether it published.
func (h *Holders) Wait(k string, seq uint64) (found bool, wait func() bool) {
	hd, done := h.h.lookup(k, seq, 1)
	if hd == nil {
		return false, nil
	}
	return true, func() bool { <-done; return hd.published }
}

// Known is the revision a claim of k may be decided by without a read (0: none).
func (h *Holders) Known(k string) uint64 { return h.h.known(k, 0).Revision }

// KnownAt is Known at now.
func (h *Holders) KnownAt(k string, now time.Duration) uint64 { return h.h.known(k, now).Revision }

// FinishedHoldings is how many finished holdings are remembered.
const FinishedHoldings = finishedHoldings

// SetDecide makes p's workers execute decide instead of protocol.Decide (a wrapper that alters plans: a test shows
// that undoing a rule is caught). Call it before Run.
func SetDecide(p *Pipeline, decide protocol.Decider) { p.decide = decide }

// Clock is p's clock (the time since New), in which the hooks below take a request's send time.
func Clock(p *Pipeline) time.Duration { return p.clock() }

// PublishFailed records an output publish sent at sent that failed with err, as the executor does.
func PublishFailed(p *Pipeline, err error, sent time.Duration) { p.publishDown(err, sent) }

// PublishStored records an output publish JetStream stored.
func PublishStored(p *Pipeline) { p.publishUp() }

// AckFailed records an ack sent at sent that got no answer.
func AckFailed(p *Pipeline, err error, sent time.Duration) { p.ackFailed(AckUnconfirmed, err, sent) }

// AckConfirmed records an ack the server confirmed.
func AckConfirmed(p *Pipeline) { p.ackUp() }

// Label values of dedupeworker_envelopes_total{outcome} and dedupeworker_naks_total{reason} (the names of
// protocol.Count and protocol.NakReason) and of dedupeworker_unkeyed_total{reason}, as the tests expect them.
const (
	OutcomeDuplicate = "duplicate"

	ReasonUnverified = contract.ReasonUnverified

	NakWindow          = "window-unavailable"
	NakPublish         = "publish"
	NakDeadLetter      = "dead-letter"
	NakShutdown        = "shutdown"
	NakHeld            = "held-too-long"
	NakHolderUndecided = "holder-undecided"
)

// WarningsToLog is warningsToLog over warning texts: of the warnings read now (of the consumer created at created),
// the texts logged, given the record (none when recorded is false; provisioned: a record without warnings read, as
// provisioning leaves it).
func WarningsToLog(recorded, provisioned bool, recCreated int64, recWarns []string, created int64, now []string) []string {
	var prev *seenConsumer
	if recorded {
		prev = &seenConsumer{created: recCreated}
		if !provisioned {
			prev.warns = warningKeys(textWarnings(recWarns))
		}
	}
	warns := textWarnings(now)
	var out []string
	for _, w := range warningsToLog(prev, created, warns, warningKeys(warns)) {
		out = append(out, w.msg)
	}
	return out
}

func textWarnings(texts []string) []consumerWarning {
	warns := make([]consumerWarning, len(texts))
	for i, t := range texts {
		warns[i] = consumerWarning{msg: t}
	}
	return warns
}

// DupWindowReach is dupWindowReach.
var DupWindowReach = dupWindowReach

// DupWindowShort is dupWindowShort.
var DupWindowShort = dupWindowShort
