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

// One envelope dead-lettered twice (the worker stopped between the dead letter and the input ack, and the
// redelivery came after DEDUPE_DLQ's duplicate window) is two dead letters with the same Nats-Msg-Id. Their
// replays carry that identity, so INGEST stores the envelope once: the second is already-stored, and both dead
// letters go. Before, each replay was named by its dead letter's own sequence, and INGEST stored both.
func TestDlqReplayEnvelopeDeadLetteredTwiceStoresOnce(t *testing.T) {
	e, id := twoLettersOneID(t, "seven", "seven")

	code, out, stderr := runCLI(t, "", "dlq", "replay", "--yes")
	if code != 0 || !strings.Contains(out, "replayed 2 of the 2 selected dead letters of DEDUPE_DLQ to stream INGEST and removed them from DEDUPE_DLQ (1 already stored, by an earlier replay or from another dead letter of the same envelope)") {
		t.Errorf("replay: %d\n%s\n%s", code, out, stderr)
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 0 {
		t.Fatalf("after the replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
	ingest, _ := e.js.Stream(e.ctx, "INGEST")
	m, err := ingest.GetMsg(e.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Nats-Msg-Id"); !strings.HasPrefix(got, "replay/"+id+"/") {
		t.Errorf("INGEST message 1 has Nats-Msg-Id %q, want %q and the content's tag", got, "replay/"+id)
	}
}

// twoLettersOneID is a dlq environment whose DEDUPE_DLQ holds two dead letters with one Nats-Msg-Id of the worker's
// form (dlq/INGEST/7/<stamp>), the given bodies: one envelope dead-lettered twice, or a letter published again by
// hand. DEDUPE_DLQ's duplicate window is short, so that the second can be stored after it; INGEST is a work queue.
func twoLettersOneID(t *testing.T, first, second string) (e *dlqEnv, id string) {
	t.Helper()
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e = newDlqEnvWith(t, srv.URL(), []jetstream.StreamConfig{
		{Name: "INGEST", Subjects: []string{"ingest.>"}, Retention: jetstream.WorkQueuePolicy},
		{Name: "DEDUPE_DLQ", Subjects: []string{"dedupe.dlq.>"}, Duplicates: 100 * time.Millisecond},
	})
	id = fmt.Sprintf("dlq/INGEST/7/%d", time.Now().UnixNano())
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
	if _, err := publish(first); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		ack, err := publish(second)
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
	return e, id
}
