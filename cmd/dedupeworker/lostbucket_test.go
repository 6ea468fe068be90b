package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Every bucket the worker creates is logged; one created beside an output stream that already holds events (a
// lost bucket: its claims are gone) is a WARN that says what it costs.
func TestLostBucketIsNotSilent(t *testing.T) {
	cleanNATSEnv(t)
	embeddedEnv(t)
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	start := func() string {
		t.Helper()
		logs, stop := startWorker(t)
		waitConsuming(t, logs)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	if l := start(); !strings.Contains(l, `"msg":"created window bucket","bucket":"dedupe-window"`) {
		t.Errorf("first start: no line for the bucket it created:\n%s", l)
	}
	if l := start(); strings.Contains(l, "window bucket") {
		t.Errorf("second start logs a bucket it did not create:\n%s", l)
	}
	js, _ := jetstream.New(natstest.Connect(t, srv.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "deduped.acme.gh", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, "dedupe-window"); err != nil {
		t.Fatal(err)
	}
	l := start()
	if !strings.Contains(l, `"level":"WARN","msg":"window bucket dedupe-window did not exist and was created empty, while stream DEDUPED holds 1 events`) {
		t.Errorf("a lost bucket re-created without a WARN:\n%s", l)
	}
}
