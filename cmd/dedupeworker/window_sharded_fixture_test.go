package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// shardedWindow starts a server the window commands use (DEDUPE_NATS_URL, DEDUPE_WINDOW_SHARDS=shards), and claims
// keys of acme/gh in a window of that many shard buckets. It returns a JetStream handle on the server, the window
// and the bucket each key's claim is in.
func shardedWindow(t *testing.T, shards int, keys ...string) (js jetstream.JetStream, w *kvwindow.Window, bucketOf map[string]string) {
	t.Helper()
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_WINDOW_SHARDS", strconv.Itoa(shards))
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := kvwindow.DefaultConfig()
	cfg.Shards = shards
	w, err = kvwindow.New(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bucketOf = map[string]string{}
	for _, k := range keys {
		if _, err := w.Claim(ctx, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: k, TTL: time.Hour, Claimant: kvwindow.Claimant{Seq: 1}}, kvwindow.Known{}); err != nil {
			t.Fatal(err)
		}
		if bucketOf[k], err = w.BucketOf("acme", "gh", k); err != nil {
			t.Fatal(err)
		}
	}
	return js, w, bucketOf
}
