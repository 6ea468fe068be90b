package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// An age limit set on the window's bucket under a running worker, shorter than the claims' TTL, is a
// misconfiguration, not an outage: the envelope is handed back (never forwarded unkeyed, even with
// ForwardWhenWindowDown) and the worker stays unready until the limit is lifted. Before, the refused claim counted
// as "window down": the envelope went out unkeyed, and the next status poll's Ping said the window was up again.
func TestBucketAgeLimitNotForwarded(t *testing.T) {
	e := newEnv(t)
	// The worker's window knows the longest TTL its claims carry (the dedupeworker command sets it).
	wcfg := kvwindow.DefaultConfig()
	wcfg.Timeout = 2 * time.Second
	wcfg.MaxTTL = keys.DefaultTTL
	w, err := kvwindow.New(ctx(t), e.js, wcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(w)
	cfg.ForwardWhenWindowDown = true
	r := e.start(cfg)

	stream := "KV_" + kvwindow.DefaultConfig().Bucket
	setAge := func(age time.Duration) {
		t.Helper()
		s, err := e.js.Stream(ctx(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		sc := s.CachedInfo().Config
		sc.MaxAge = age
		if _, err := e.js.UpdateStream(ctx(t), sc); err != nil {
			t.Fatal(err)
		}
	}
	setAge(time.Hour)
	// The edit is seen at the next status poll (a claim in between is stored as before: the edit's own window).
	natstest.Eventually(t, 10*time.Second, func() error {
		if r.p.Ready(context.Background()) == nil {
			return fmt.Errorf("ready while the bucket's age limit refuses claims")
		}
		return nil
	})
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "age-1"), []byte("1"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if n := e.metric("dedupeworker_naks_total", "reason", pipeline.NakWindow); n < 1 {
			return fmt.Errorf("%v window NAKs", n)
		}
		return nil
	})
	if n := e.count(pipeline.DefaultOutputStream); n != 0 {
		t.Fatalf("output holds %d messages: a claim refused for the bucket's age limit was forwarded", n)
	}
	// Steadily unready: twenty status intervals in a row, never one ready answer in between.
	for i := range 20 {
		if err := r.p.Ready(context.Background()); err == nil {
			t.Fatalf("ready again %d status intervals later while the age limit still refuses claims", i)
		}
		time.Sleep(cfg.StatusInterval) // pacing the samples over status polls, not waiting for a condition
	}

	setAge(0)
	e.drained(30 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Fatalf("output holds %d messages after the limit was lifted, want the one event", n)
	}
}
