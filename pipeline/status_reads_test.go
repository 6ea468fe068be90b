package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestStatusPollReadsEachBucketOnce: one status poll sends one stream info request per bucket of a sharded
// window, for the window's health and the buckets' leaders alike. Before, it read each bucket's stream for the
// leaders and the window's Ping read each again: 128 requests per worker every poll with 64 shards.
func TestStatusPollReadsEachBucketOnce(t *testing.T) {
	const shards = 4
	e := newEnv(t)
	wcfg := kvwindow.DefaultConfig()
	wcfg.Timeout = 2 * time.Second
	wcfg.Shards = shards
	var w *kvwindow.Window
	natstest.Eventually(t, 30*time.Second, func() error {
		var err error
		w, err = kvwindow.New(ctx(t), e.js, wcfg)
		if err != nil && !errors.Is(err, kvwindow.ErrUnavailable) {
			t.Fatal(err)
		}
		return err
	})
	t.Cleanup(func() { _ = w.Close() })
	cfg := e.config(w)
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Standing(cfg)
	if err != nil {
		t.Fatal(err)
	}

	reads := make(chan *nats.Msg, 1000)
	sub, err := e.nc.ChanSubscribe("$JS.API.STREAM.INFO.*", reads)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pipeline.RefreshStatus(p, context.Background())
	if err := e.nc.Flush(); err != nil { // the poll's requests, sent on the same connection, have come back to us
		t.Fatal(err)
	}
	if err := p.Ready(ctx(t)); err != nil {
		t.Errorf("not ready after the poll: %v", err)
	}
	per := map[string]int{}
	for len(reads) > 0 {
		if subj := (<-reads).Subject; strings.HasPrefix(subj, "$JS.API.STREAM.INFO.KV_") {
			per[subj]++
		}
	}
	if len(per) != shards {
		t.Errorf("the poll read %d buckets' streams (%v), want %d", len(per), per, shards)
	}
	for subj, n := range per {
		if n != 1 {
			t.Errorf("%s: %d requests in one poll, want 1", subj, n)
		}
	}
}
