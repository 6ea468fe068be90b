package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A window bucket created by hand with an age limit shorter than a source's TTL (nats kv add --ttl 1h while the
// source keeps claims a week) would drop every claim after an hour and let the next copy through: the worker
// refuses it at start, and ingest does not open such a replay guard bucket, each saying why and how to fix it.
// Before the fix both bound to the bucket.
func TestWindowBucketAgeLimitRefused(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	t.Setenv("DEDUPE_SOURCES", "sources: {gh: {dedupe: {preset: github, ttl: 168h}, verify: github}}")
	t.Setenv("DEDUPE_INGEST_SECRET_GH", ingestGhNew)
	t.Setenv("DEDUPE_INGEST_ADDR", fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t)))
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range []string{"dedupe-window", "dedupe-window-replay"} {
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, History: 1, TTL: time.Hour, LimitMarkerTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}

	var logs natstest.Buffer
	err = run(ctx, []string{"run"}, strings.NewReader(""), io.Discard, &logs)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("worker over a bucket of max_age 1h for claims of 168h: %v (ctx %v)\n%s", err, ctx.Err(), logs.String())
	}
	for _, want := range []string{`bucket "dedupe-window"`, "max_age 1h0m0s", "168h0m0s", "nats stream edit KV_dedupe-window --max-age=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("worker start: %v\nwant it to say %q", err, want)
		}
	}

	ingestLogs, _ := runInBackground(t, "ingest")
	natstest.Eventually(t, 20*time.Second, func() error {
		if l := ingestLogs.String(); !strings.Contains(l, `bucket \"dedupe-window-replay\"`) || !strings.Contains(l, "max_age 1h0m0s") {
			return fmt.Errorf("ingest does not say why it cannot open the replay guard bucket:\n%s", l)
		}
		return nil
	})
}
