package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
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
	go stopOnSignals(sigs, cancel, &stderr, func(code int) { exited <- code })

	sigs <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not end the context")
	}
	var cause signalCause
	if !errors.As(context.Cause(ctx), &cause) || stopReason(ctx) != "received SIGINT" {
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
