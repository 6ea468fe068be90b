package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// errStoredElsewhere: a PubAck from another stream than the input stream (Nats-Expected-Stream makes the server
// refuse that; checked again all the same).
var errStoredElsewhere = errors.New("receiver: acknowledged by another stream")

// publishFailure classifies why JetStream did not store an envelope.
type publishFailure int

const (
	failUnavailable     publishFailure = iota // not stored, retry later: 503
	failUnconfirmed                           // no answer in time: it may have been stored, retry later: 503
	failTooLarge                              // this envelope never fits: 413
	failHeadersTooLarge                       // its header block never fits (10097): 431
	failMisrouted                             // the subject belongs to another stream: 503, and an operator must act
)

// publish stores one envelope in the input stream and returns its sequence there.
func (r *Receiver) publish(ctx context.Context, subject string, hdr nats.Header, body []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	msg := &nats.Msg{Subject: subject, Header: hdr, Data: body}
	start := time.Now()
	ack, err := r.cfg.JetStream.PublishMsg(ctx, msg, jetstream.WithExpectStream(r.cfg.InputStream))
	r.metrics.publishDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return 0, err
	}
	if ack.Stream != r.cfg.InputStream {
		return 0, fmt.Errorf("%w: stream %s, expected %s", errStoredElsewhere, ack.Stream, r.cfg.InputStream)
	}
	return ack.Sequence, nil
}

// publishFailed answers a delivery JetStream did not acknowledge: 413 or 431 when it can never fit, else 503
// (logged, at most once per 10 s per kind), saying whether it was certainly not stored.
func (r *Receiver) publishFailed(w http.ResponseWriter, label, subject string, err error) string {
	switch classify(err) {
	case failTooLarge:
		return r.answer(w, label, OutcomeTooLarge, http.StatusRequestEntityTooLarge, "too large for the input stream: "+err.Error())
	case failHeadersTooLarge:
		return r.answer(w, label, OutcomeHeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge, "headers too large for the input stream: "+err.Error())
	case failMisrouted:
		r.logSometimes(slog.LevelError, "misrouted", "input stream does not capture the subject: deliveries are answered 503 until it is fixed",
			"stream", r.cfg.InputStream, "subject", subject, "err", err)
		return r.unavailable(w, label, OutcomeUnavailable, "not stored: the input stream does not capture this subject; retry later")
	case failUnconfirmed:
		r.logSometimes(slog.LevelWarn, "unconfirmed", "delivery not confirmed: no acknowledgement within the publish timeout; answered 503 (it may be stored: a retry can store it twice)",
			"stream", r.cfg.InputStream, "subject", subject, "timeout", r.cfg.PublishTimeout.String(), "err", err)
		return r.unavailable(w, label, OutcomeUnconfirmed, fmt.Sprintf(
			"storage not confirmed: JetStream did not acknowledge within %s (the delivery may be stored); retry later: a retry is safe for keyed sources", r.cfg.PublishTimeout))
	default:
		if nc := r.notConnected(); nc != "" {
			err = fmt.Errorf("%s: %w", nc, err)
		}
		r.logSometimes(slog.LevelWarn, "unavailable", "delivery not stored: JetStream did not acknowledge it; answered 503",
			"stream", r.cfg.InputStream, "subject", subject, "err", err)
		return r.unavailable(w, label, OutcomeUnavailable, "not stored: JetStream is unavailable; retry later")
	}
}

// classify says what a publish error means for the client.
func classify(err error) publishFailure {
	if errors.Is(err, nats.ErrMaxPayload) {
		return failTooLarge
	}
	if api := jserr.API(err); api != nil {
		switch api.ErrorCode {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return failTooLarge
		case jserr.CodeHeaderTooLarge:
			return failHeadersTooLarge
		case jserr.CodeExpectedStreamMismatch:
			return failMisrouted
		}
		return failUnavailable // the server answered: it did not store it
	}
	if errors.Is(err, errStoredElsewhere) {
		return failMisrouted
	}
	// The publish went out and no answer came in time (or the client went away first): the server may have
	// stored it. A publish that could not be sent fails with another error (connection closed, no responders).
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrTimeout) {
		return failUnconfirmed
	}
	return failUnavailable
}
