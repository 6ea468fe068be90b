package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

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

	reads := e.requestsInOnePoll(p, "$JS.API.STREAM.INFO.*")
	if err := p.Ready(ctx(t)); err != nil {
		t.Errorf("not ready after the poll: %v", err)
	}
	per := map[string]int{}
	for _, subj := range reads {
		if strings.HasPrefix(subj, "$JS.API.STREAM.INFO.KV_") {
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
