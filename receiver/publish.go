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
)

// errStoredElsewhere: a PubAck from another stream than the input stream (Nats-Expected-Stream makes the server
// refuse that; checked again all the same).
var errStoredElsewhere = errors.New("receiver: acknowledged by another stream")

// publishFailure classifies why JetStream did not store an envelope.
type publishFailure int

const (
	failUnavailable publishFailure = iota // retry later: 503
	failTooLarge                          // this envelope never fits: 413
	failMisrouted                         // the subject belongs to another stream: 503, and an operator must act
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

// publishFailed answers a delivery JetStream did not store: 413 when it can never fit, else 503 (logged, at most
// once per 10 s per kind).
func (r *Receiver) publishFailed(w http.ResponseWriter, label, subject string, err error) {
	switch classify(err) {
	case failTooLarge:
		r.answer(w, label, OutcomeTooLarge, http.StatusRequestEntityTooLarge, "too large for the input stream: "+err.Error())
	case failMisrouted:
		r.logSometimes(slog.LevelError, "misrouted", "input stream does not capture the subject: deliveries are answered 503 until it is fixed",
			"stream", r.cfg.InputStream, "subject", subject, "err", err)
		r.unavailable(w, label, OutcomeUnavailable, "not stored: the input stream does not capture this subject; retry later")
	default:
		r.logSometimes(slog.LevelWarn, "unavailable", "delivery not stored: JetStream did not acknowledge it; answered 503",
			"stream", r.cfg.InputStream, "subject", subject, "err", err)
		r.unavailable(w, label, OutcomeUnavailable, "not stored: JetStream is unavailable; retry later")
	}
}

// classify says what a publish error means for the client.
func classify(err error) publishFailure {
	if errors.Is(err, nats.ErrMaxPayload) {
		return failTooLarge
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return failTooLarge
		case jsErrCodeStreamNotMatch:
			return failMisrouted
		}
	}
	if errors.Is(err, errStoredElsewhere) {
		return failMisrouted
	}
	return failUnavailable
}

// jsErrCodeStreamNotMatch is the server's answer to a publish whose Nats-Expected-Stream is not the stream that
// captures the subject ("expected stream does not match").
const jsErrCodeStreamNotMatch jetstream.ErrorCode = 10060
