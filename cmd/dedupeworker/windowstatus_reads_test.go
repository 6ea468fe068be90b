package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// streamInfoReads counts the stream info requests on the window's buckets that a command makes, by a subscriber
// on the JetStream API subject (it sees every request the server answers).
func streamInfoReads(t *testing.T, url string, args ...string) int {
	t.Helper()
	nc := natstest.Connect(t, url)
	sub, err := nc.SubscribeSync("$JS.API.STREAM.INFO.>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "", args...); code != 0 {
		t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	// Every request was answered before the command returned: the server delivered it to sub before this one.
	const sentinel = "$JS.API.STREAM.INFO.end-of-count"
	if err := natstest.Connect(t, url).Publish(sentinel, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the end of the count: %v", err)
		}
		if m.Subject == sentinel {
			return n
		}
		if strings.HasPrefix(m.Subject, "$JS.API.STREAM.INFO.KV_dedupe-window") {
			n++
		}
	}
}

// window status reads each bucket's stream info once (its keys, bytes, leader and replicas' states from one
// answer), beyond what binding to the window reads (as window get does). Before the fix it read it twice, the
// second time without a timeout of its own.
func TestWindowStatusReadsEachBucketOnce(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_WINDOW_SHARDS", "4")
	js, err := jetstream.New(natstest.Connect(t, srv.URL(), nats.Name("setup")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := kvwindow.DefaultConfig()
	cfg.Shards = 4
	if _, err := kvwindow.New(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	bind := streamInfoReads(t, srv.URL(), "window", "get", "--tenant", "acme", "--source", "gh", "--key", "none")
	status := streamInfoReads(t, srv.URL(), "window", "status", "--json")
	if status-bind != 4 {
		t.Errorf("window status read the 4 buckets' stream info %d times beyond binding (%d reads), want 4", status-bind, bind)
	}
}
