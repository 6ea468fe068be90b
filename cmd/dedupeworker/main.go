// Command dedupeworker turns a JetStream stream of raw webhook deliveries into a stream of unique events.
// See the README for the commands, settings and wire contract.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go stopOnSignals(sigs, cancel, os.Stderr, os.Exit, time.Now)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	cancel(nil)
	os.Exit(exitCode(err, os.Stderr))
}

// stopOnSignals stops the process on signals: the first ends the context with its signal as the cause, and the
// worker stops in order and logs it ("stopping: received SIGTERM"); a second one exits at once with status 1 and a
// line saying so. A stop can wait long: an embedded server recovering its streams cannot be stopped before it has
// recovered them. An exit leaves nothing locked: the kernel releases the store directory's lock with the process.
// A signal within sameStop of the first is the same stop delivered twice, not a second one: make, for one, passes
// a SIGTERM on to the worker that a kill of the process group has already reached.
func stopOnSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, stderr io.Writer, exit func(code int), now func() time.Time) {
	cancel(signalCause{<-sigs})
	first := now()
	for sig := range sigs {
		if now().Sub(first) < sameStop {
			continue
		}
		fmt.Fprintf(stderr, "dedupeworker: received %s while stopping: exiting now, without waiting for the stop to finish\n", signalName(sig))
		exit(exitFailure)
		return
	}
}

// sameStop is how soon after the first a signal is taken for the same stop delivered twice.
const sameStop = time.Second

// signalCause is the cause of the context main cancels when a signal arrives, so that the shutdown can say which.
type signalCause struct{ sig os.Signal }

func (c signalCause) Error() string { return "received " + signalName(c.sig) }

// signalName is a signal's conventional name (SIGTERM), where Go's String gives its description ("terminated").
func signalName(sig os.Signal) string {
	names := map[os.Signal]string{os.Interrupt: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT"}
	return cmp.Or(names[sig], sig.String())
}

// logStopping logs why the process stops, ctx's cause ("stopping: received SIGTERM", a signalCause, or the
// context's error, "stopping: context canceled", when it ended without a cause), as soon as
// ctx ends; logged is closed once the line is written. wait, deferred, waits for it when a stop ended the start at
// once (a connect interrupted): the line is written before the caller's own last lines, not raced.
func logStopping(ctx context.Context, log *slog.Logger) (logged <-chan struct{}, wait func()) {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		log.Info("stopping: " + context.Cause(ctx).Error())
	})
	return done, func() {
		if ctx.Err() != nil || !stop() {
			<-done
		}
	}
}
