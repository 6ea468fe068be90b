package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// Through ingest and the worker: a GitHub delivery, its genuine retry and two replays of its signed body under
// fresh ids are one event in DEDUPED; the replays are answered 202 without being published, and `dedupeworker
// window get --tenant acme --source gh --key 'body sha256:<hex>'` with DEDUPE_BUCKET=dedupe-window-replay
// finds the guard's claim, naming the first id's fingerprint.
func TestIngestReplayGuardEndToEnd(t *testing.T) {
	srv := natstest.Run(t)
	base, js, _, _, stopIngest := ingestSetup(t, srv)
	body := `{"action":"opened","hook_id":9}`
	sig := ingestGitHubSig(ingestGhNew, body)
	for _, c := range []struct{ id, want string }{
		{"g-1", "accepted: INGEST seq "}, {"g-1", "accepted: INGEST seq "},
		{"forged-1", "accepted, not published"}, {"forged-2", "accepted, not published"},
	} {
		code, _, answer := hookPost(t, base, "/hooks/acme/gh", body, "X-GitHub-Delivery", c.id, "X-Hub-Signature-256", sig)
		if code != 202 || !strings.HasPrefix(answer, c.want) {
			t.Fatalf("%s: %d %q, want 202 %q", c.id, code, answer, c.want)
		}
	}
	waitDrained(t, js)
	out := readOutputs(t, js, 1)
	if len(out) != 1 || out[0].Header.Get("Idempotency-Key") != "acme:gh:g-1" {
		t.Fatalf("DEDUPED: %d events, first %v", len(out), out[0].Header)
	}
	t.Setenv("DEDUPE_BUCKET", "dedupe-window-replay") // the guard's own bucket, beside the worker's dedupe-window
	code, stdout, stderr := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", receiver.ReplayKey([]byte(body)))
	if code != 0 {
		t.Fatalf("window get: %d %s", code, stderr)
	}
	var got struct {
		Claimed     bool   `json:"claimed"`
		ClaimantSeq uint64 `json:"claimant_seq"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || !got.Claimed || got.ClaimantSeq != receiver.IDFingerprint("g-1") {
		t.Fatalf("window get: %s (%v), want claimant_seq %d", stdout, err, receiver.IDFingerprint("g-1"))
	}
	if err := stopIngest(); err != nil {
		t.Fatal(err)
	}
}
