package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A worker whose cluster cannot place the window's bucket with 3 replicas yet (its third node takes no replicas:
// server tag "!jetstream", as a server not yet heard from since its route came up) waits, saying why in the log
// and in /readyz, rather than exiting; once the node is back without the tag it creates the bucket and the
// streams and deduplicates.
func TestWorkerStartWaitsForPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunClusterWith(t, 3, func(i int, o *server.Options) {
		if i == 2 {
			o.Tags = []string{"!jetstream"}
		}
	})
	excluded := c.Servers[2]
	base := workerEnvURL(t, c.URLs(), "sources: {gh: {dedupe: github}}")
	t.Setenv("DEDUPE_REPLICAS", "3")
	logs := &natstest.Buffer{}
	b := startRun(t, logs, "run")

	const says = "the cluster cannot place bucket dedupe-window with 3 replicas"
	waitStartWaiting(t, b, logs, base, []string{says}, []string{says, "DEDUPE_REPLICAS"}, nil)

	excluded.Opts.Tags = nil
	excluded.Restart()
	natstest.Eventually(t, 60*time.Second, func() error {
		if code, _, ready, err := httpGet(base + "/readyz"); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %q (%v)", code, ready, err)
		}
		return nil
	})
	nc := natstest.Connect(t, c.URLs())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		natstest.Eventually(t, 10*time.Second, func() error {
			m := nats.NewMsg("ingest.acme.gh")
			m.Header.Set("X-GitHub-Delivery", "d-1")
			_, err := js.PublishMsg(context.Background(), m)
			return err
		})
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		in, err := js.Stream(ctx, "INGEST")
		if err != nil {
			return err
		}
		out, err := js.Stream(ctx, "DEDUPED")
		if err != nil {
			return err
		}
		if n := in.CachedInfo().State.Msgs; n != 0 {
			return fmt.Errorf("INGEST still holds %d deliveries", n)
		}
		if n := out.CachedInfo().State.Msgs; n != 1 {
			return fmt.Errorf("DEDUPED holds %d events, want 1: the second delivery is a duplicate", n)
		}
		return nil
	})
}

// A window placed where no server is (DEDUPE_WINDOW_PLACEMENT=cluster=nope, one replica, two shards) is refused for
// good; the start waits, and the log and /readyz name the refused shard's bucket and the setting that is wrong,
// with its value and the server's text.
func TestWorkerStartNamesWindowPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunCluster(t, 3)
	base := workerEnvURL(t, c.URLs(), "sources: {gh: {dedupe: github}}")
	t.Setenv("DEDUPE_REPLICAS", "1")
	t.Setenv("DEDUPE_WINDOW_SHARDS", "2")
	t.Setenv("DEDUPE_WINDOW_PLACEMENT", "cluster=nope")
	logs := &natstest.Buffer{}
	b := startRun(t, logs, "run")

	waitStartWaiting(t, b, logs, base,
		[]string{"the cluster cannot place bucket dedupe-window-00 with 1 replicas (no suitable peers for placement",
			`DEDUPE_WINDOW_PLACEMENT (\"cluster=nope\") may name a cluster or tags no server has`},
		[]string{"dedupe-window-00", `DEDUPE_WINDOW_PLACEMENT ("cluster=nope")`}, []string{"servers available"})
}

// waitStartWaiting waits until the worker b, still running, has logged every inLog and answers /readyz with 503
// saying every inReady and none of notInReady: a start that waits for the cluster and says why.
func waitStartWaiting(t *testing.T, b *backgroundRun, logs *natstest.Buffer, base string,
	inLog, inReady, notInReady []string) {
	t.Helper()
	natstest.Eventually(t, 30*time.Second, func() error {
		select {
		case <-b.done:
			t.Fatalf("the worker exited while the cluster could not place its bucket: %v\n%s", b.err, logs)
		default:
		}
		for _, want := range inLog {
			if !strings.Contains(logs.String(), want) {
				return fmt.Errorf("no warning saying %q in the log yet", want)
			}
		}
		code, _, ready, err := httpGet(base + "/readyz")
		if err != nil || code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz: %d %q (%v); want 503", code, ready, err)
		}
		for _, want := range inReady {
			if !strings.Contains(ready, want) {
				return fmt.Errorf("/readyz %q does not say %q", ready, want)
			}
		}
		for _, not := range notInReady {
			if strings.Contains(ready, not) {
				return fmt.Errorf("/readyz %q says %q", ready, not)
			}
		}
		return nil
	})
}
