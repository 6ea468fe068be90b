package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A dead letter published by hand into DEDUPE_DLQ (headers copied from dlq show --json, the body edited) can carry
// another letter's Nats-Msg-Id. Its replay is its own (the replay id carries a digest of the body): both letters are
// stored in INGEST and removed. Before, the edited one collapsed in INGEST's duplicate window into the other's
// envelope, was reported already-stored and removed: the edit was lost.
func TestDlqReplayCollidingMsgIDStoresBoth(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnvWith(t, srv.URL(), []jetstream.StreamConfig{
		{Name: "INGEST", Subjects: []string{"ingest.>"}, Retention: jetstream.WorkQueuePolicy},
		// A short duplicate window, so that the test can store the second letter with the same Nats-Msg-Id.
		{Name: "DEDUPE_DLQ", Subjects: []string{"dedupe.dlq.>"}, Duplicates: 100 * time.Millisecond},
	})
	id := fmt.Sprintf("dlq/INGEST/7/%d", time.Now().UnixNano())
	publish := func(body string) (*jetstream.PubAck, error) {
		m := nats.NewMsg("dedupe.dlq.output-reject")
		m.Header.Set("X-GitHub-Delivery", "d7")
		m.Header.Set("Dedupe-Error", "too large")
		m.Header.Set("Dedupe-Subject", "ingest.acme.gh")
		m.Header.Set("Dedupe-Input-Stream", "INGEST")
		m.Header.Set("Dedupe-Input-Seq", "7")
		m.Header.Set("Nats-Msg-Id", id)
		m.Data = []byte(body)
		return e.js.PublishMsg(e.ctx, m)
	}
	if _, err := publish("seven"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		ack, err := publish("seven, edited")
		switch {
		case err != nil:
			return err
		case ack.Duplicate:
			return fmt.Errorf("still within DEDUPE_DLQ's duplicate window")
		}
		return nil
	})
	if n := e.state("DEDUPE_DLQ").Msgs; n != 2 {
		t.Fatalf("DEDUPE_DLQ holds %d dead letters, want 2", n)
	}

	code, out, stderr := runCLI(t, "", "dlq", "replay", "--yes")
	if code != 0 || strings.Contains(out+stderr, "already-stored") {
		t.Errorf("replay: %d\n%s\n%s", code, out, stderr)
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 2 || dlq.Msgs != 0 {
		t.Fatalf("after the replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
	in, _ := e.js.Stream(e.ctx, "INGEST")
	var bodies []string
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := in.GetMsg(e.ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(m.Data))
	}
	if bodies[0] != "seven" || bodies[1] != "seven, edited" {
		t.Errorf("INGEST holds %q, want both letters' bodies", bodies)
	}
}
