package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// backgroundRun is a command run in the background until it returns or the test ends.
type backgroundRun struct {
	args   []string
	stderr io.Writer
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once run has returned
	err    error         // run's error, once done is closed
}

// startRun runs the command args in the background, its log on stderr; it is stopped when the test ends.
func startRun(t *testing.T, stderr io.Writer, args ...string) *backgroundRun {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	b := &backgroundRun{args: args, stderr: stderr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.err = run(ctx, args, strings.NewReader(""), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		if _, stuck := b.stopFor(errTestOver, 30*time.Second); stuck != nil {
			t.Error(stuck)
		}
	})
	return b
}

var errTestOver = fmt.Errorf("test over")

// stop cancels the command's context with cause (nil: context.Canceled, as a plain cancel), as main does when a
// signal arrives, and returns run's error; safe to call again.
func (b *backgroundRun) stop(cause error) error {
	err, stuck := b.stopFor(cause, 30*time.Second)
	if stuck != nil {
		return stuck
	}
	return err
}

// stopFor is stop waiting at most d; stuck says that run had not returned by then.
func (b *backgroundRun) stopFor(cause error, d time.Duration) (err, stuck error) {
	b.cancel(cause)
	select {
	case <-b.done:
		return b.err, nil
	case <-time.After(d):
		logs := ""
		if s, ok := b.stderr.(fmt.Stringer); ok {
			logs = "; logs:\n" + s.String()
		}
		return nil, fmt.Errorf("%s did not stop within %s%s", strings.Join(b.args, " "), d, logs)
	}
}

// runInBackground runs the command args until the test ends; the returned stop cancels it and returns its error.
func runInBackground(t *testing.T, args ...string) (logs *natstest.Buffer, stop func() error) {
	t.Helper()
	logs = &natstest.Buffer{}
	b := startRun(t, logs, args...)
	return logs, func() error { return b.stop(nil) }
}

// waitConsuming waits until the worker whose log is logs has bound its consumer ("pipeline: consuming", in
// either log format).
func waitConsuming(t *testing.T, logs fmt.Stringer) {
	t.Helper()
	natstest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(logs.String(), "pipeline: consuming") {
			return fmt.Errorf("not consuming yet:\n%s", logs.String())
		}
		return nil
	})
}

// startWorker runs the worker command (run) in the background: runInBackground(t, "run").
func startWorker(t *testing.T) (logs *natstest.Buffer, stop func() error) {
	t.Helper()
	return runInBackground(t, "run")
}

// workerEnv configures the worker for srv, with JSON logs, sources and an HTTP port of its own; it returns the
// HTTP base URL.
func workerEnv(t *testing.T, srv *natstest.Server, sources string) (base string) {
	t.Helper()
	return workerEnvURL(t, srv.URL(), sources)
}

// workerEnvURL is workerEnv for the server(s) at url (a cluster's URLs).
func workerEnvURL(t *testing.T, url, sources string) (base string) {
	t.Helper()
	httpPort := natstest.FreePort(t)
	t.Setenv("DEDUPE_NATS_URL", url)
	t.Setenv("DEDUPE_HTTP_ADDR", fmt.Sprintf("127.0.0.1:%d", httpPort))
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	t.Setenv("DEDUPE_SOURCES", sources)
	return fmt.Sprintf("http://127.0.0.1:%d", httpPort)
}
