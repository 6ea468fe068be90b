package pipeline

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
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

func (noWindow) Claim(context.Context, kvwindow.Claim) (kvwindow.Outcome, error) {
	return kvwindow.Outcome{}, kvwindow.ErrUnavailable
}
func (noWindow) Release(context.Context, string, string, string, uint64) (bool, error) {
	return false, kvwindow.ErrUnavailable
}
func (noWindow) MarkPublished(context.Context, kvwindow.Claim, uint64) (uint64, bool, error) {
	return 0, false, kvwindow.ErrUnavailable
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
	return w.buildOutput(subject, hdr, body, w.e.key != "")
}

// WindowDown and WindowUp report the window unreachable and reachable again, as a claim's answer does.
func WindowDown(p *Pipeline, err error) { p.windowDown(err) }
func WindowUp(p *Pipeline)              { p.windowUp() }
