package embedded_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/embedded"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A stop that comes while the server still recovers its streams waits for the recovery (a server cannot be stopped
// halfway through its start). The wait says so once, with how to exit at once, and keeps saying that the server is
// still recovering, until the server's start returns. Before, the stop waited without a word: a worker stopped
// during a long recovery seemed to hang.
func TestStopDuringRecoverySaysWhyItWaits(t *testing.T) {
	var logs natstest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		embedded.AwaitStart(started, log, "/store", true, time.Now(), 10*time.Millisecond, 10*time.Millisecond)
	}()
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "still recovering its streams") {
			return fmt.Errorf("the wait logged:\n%s\nwant the stop explained, then the recovery still going", logs.String())
		}
		return nil
	})
	select {
	case <-done:
		t.Fatal("the wait ended before the server's start returned")
	default:
	}
	close(started)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end 10s after the server's start returned")
	}
	out := logs.String()
	if n := strings.Count(out, "a second signal (Ctrl-C) exits now"); n != 1 {
		t.Errorf("the stop is explained %d times; want once:\n%s", n, out)
	}
	if first, recovering := strings.Index(out, "stops once it has recovered its streams"), strings.Index(out, "still recovering"); first < 0 || first > recovering {
		t.Errorf("the stop is not explained before the recovery lines:\n%s", out)
	}
}

// A server whose start returns within the grace is stopped without a word; a wait that is not a stop (a server
// given up for another reason) does not speak of signals.
func TestAwaitStartQuietUnlessItLasts(t *testing.T) {
	var logs natstest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	started := make(chan struct{})
	close(started)
	embedded.AwaitStart(started, log, "/store", true, time.Now(), time.Hour, time.Hour)
	if logs.String() != "" {
		t.Errorf("a start that returned at once logged:\n%s", logs.String())
	}

	started = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		embedded.AwaitStart(started, log, "/store", false, time.Now(), time.Millisecond, time.Hour)
	}()
	natstest.Eventually(t, 10*time.Second, func() error {
		if logs.String() == "" {
			return errors.New("the wait logged nothing")
		}
		return nil
	})
	close(started)
	<-done
	if out := logs.String(); !strings.Contains(out, "stops once it has recovered its streams") || strings.Contains(out, "signal") {
		t.Errorf("a wait that is not a stop logged:\n%s\nwant the wait explained, without a second signal", out)
	}
}
