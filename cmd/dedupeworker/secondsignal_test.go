package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The first SIGINT or SIGTERM stops the process in order (its context ends, the signal as the cause); a second one,
// while that stop still waits (an embedded server cannot be stopped before it has recovered its streams), exits at
// once with status 1 and a line saying so. Before, a second signal was ignored and the stop waited in silence.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	clock := time.Unix(0, 0)
	go stopOnSignals(sigs, cancel, &stderr, func(code int) { exited <- code }, func() time.Time {
		clock = clock.Add(2 * time.Second) // every signal comes well after the one before it
		return clock
	})

	sigs <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not end the context")
	}
	var cause signalCause
	if !errors.As(context.Cause(ctx), &cause) || context.Cause(ctx).Error() != "received SIGINT" {
		t.Errorf("context ended with %v; want the signal as its cause, 'received SIGINT'", context.Cause(ctx))
	}
	select {
	case code := <-exited:
		t.Fatalf("the first signal exited the process (status %d); want an orderly stop", code)
	default:
	}

	sigs <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code == 0 {
			t.Errorf("the second signal exited with status 0; want a failure")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not exit the process")
	}
	if want := "received SIGTERM while stopping: exiting now"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr.String(), want)
	}
}

// A signal within a second of the first is the same stop delivered twice (make passes a SIGTERM on to the worker
// that a kill of the process group has already reached), not a second one: it does not exit; one after that does.
// Before, the doubled SIGTERM turned every such stop into a crash.
func TestSameStopDeliveredTwiceIsOneStop(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal) // unbuffered: a send returns once the handler takes the signal
	var stderr bytes.Buffer
	exited := make(chan int, 2)
	// The handler reads the clock once per signal: at the first, the doubled one 300 ms later, and a Ctrl-C later.
	times := []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond}
	var read atomic.Int32
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		stopOnSignals(sigs, cancel, &stderr, func(code int) { exited <- code }, func() time.Time {
			return time.Unix(0, 0).Add(times[min(int(read.Add(1))-1, len(times)-1)])
		})
	}()

	sigs <- syscall.SIGTERM // the kill of the process group
	sigs <- syscall.SIGTERM // make passing it on
	// Taken only if the handler is still there: the second SIGTERM did not exit.
	select {
	case sigs <- os.Interrupt: // a person's Ctrl-C, later
	case <-handled:
		t.Fatalf("the handler returned at the doubled SIGTERM; stderr %q", stderr.String())
	}
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		t.Fatalf("the handler did not return after the Ctrl-C; stderr %q", stderr.String())
	}
	if n := len(exited); n != 1 {
		t.Fatalf("exited %d times; want once, at the later signal", n)
	}
	if want := "received SIGINT while stopping"; !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "SIGTERM") {
		t.Errorf("stderr %q; want only %q", stderr.String(), want)
	}
	if ctx.Err() == nil {
		t.Error("the first signal did not end the context")
	}
}
