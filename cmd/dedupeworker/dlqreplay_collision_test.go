package main

import (
	"strings"
	"testing"
)

// A dead letter published by hand into DEDUPE_DLQ (headers copied from dlq show --json, the body edited) can carry
// another letter's Nats-Msg-Id. Its replay is its own (the replay id carries a digest of the body): both letters are
// stored in INGEST and removed. Before, the edited one collapsed in INGEST's duplicate window into the other's
// envelope, was reported already-stored and removed: the edit was lost.
func TestDlqReplayCollidingMsgIDStoresBoth(t *testing.T) {
	e, _ := twoLettersOneID(t, "seven", "seven, edited")

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
