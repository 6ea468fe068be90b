package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/jsapi"
)

// errJetStreamOff is wrapped by the start error of a server that has no JetStream, or none for the account;
// offOnServer and offForAccount say which, and what to do.
var errJetStreamOff = errors.New("JetStream is not enabled")

const (
	offForAccount = " for this account (the server has JetStream, the account has no JetStream limits)"
	offOnServer   = " on this server (start nats-server with -js, or jetstream {} in its configuration)"
)

// jetStreamGrace bounds how long a JetStream API that nobody answers is asked again before the start fails. A
// server without JetStream never answers, but a leaf node whose hub is still connecting, or routes still forming,
// may not for a moment.
const jetStreamGrace = 10 * time.Second

// probeJetStream looks the input stream up (the one JetStream request both roles may make under their narrowest
// permissions) to tell a server without JetStream from a slow one, which the worker would otherwise wait for, and
// ingest answer 503, for ever. No responders is asked again for at most grace; then, or at once for an account
// without JetStream, the error wraps errJetStreamOff. Any other lookup error is returned for the caller to judge.
func probeJetStream(ctx context.Context, js jetstream.JetStream, stream, server string, grace time.Duration, log *slog.Logger, st *startStatus) error {
	subject := jsapi.Prefix(js.Options()) + "STREAM.INFO." + stream
	start := time.Now()
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 2 * time.Second}
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Stream(lctx, stream)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return fmt.Errorf("dedupeworker: %s: %w"+offForAccount+": %w", server, errJetStreamOff, err)
		case !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrJetStreamNotEnabled):
			return err
		}
		took := time.Since(start)
		left := grace - took
		if left <= 0 {
			return fmt.Errorf("dedupeworker: %s: %w"+offOnServer+": no responders on %s for %s",
				server, errJetStreamOff, subject, took.Round(100*time.Millisecond))
		}
		wait := min(bo.Next(), left)
		st.wait("JetStream not enabled on the server at %s: no responders on %s (asked again for %s before the start fails)",
			server, subject, left.Round(time.Second))
		log.Warn("JetStream does not answer: no responders; JetStream is not enabled on the server, or not reachable yet",
			"server", server, "subject", subject, "in", wait, "gives_up_in", left.Round(time.Millisecond))
		if err := backoff.Wait(ctx, wait); err != nil {
			return err
		}
	}
}

// explainJetStream rewords what a one-shot command (window …, dlq …) meets on a server or account without
// JetStream, where the client only sees "no responders", into the same words run and ingest use. cmd names the
// command ("window get"); the exit status err carries is kept.
func explainJetStream(cmd string, err error) error {
	var why string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		why = errJetStreamOff.Error() + offForAccount
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		why = errJetStreamOff.Error() + offOnServer
	default:
		return err
	}
	return failErr(fmt.Errorf("%s: %s: %w", cmd, why, err)) // the status err carries, else 1
}
