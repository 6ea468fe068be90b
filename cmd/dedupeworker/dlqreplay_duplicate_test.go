package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A replay answered as a duplicate removes its dead letter only when the input stream holds what it published.
func TestDlqOnDuplicate(t *testing.T) {
	sent := &nats.Msg{Subject: "ingest.acme.gh", Data: []byte("seven")}
	for _, tc := range []struct {
		name    string
		stored  *jetstream.RawStreamMsg
		err     error
		remove  bool
		result  string
		contain string
	}{
		{"same subject and body", &jetstream.RawStreamMsg{Subject: "ingest.acme.gh", Data: []byte("seven")}, nil,
			true, dlqAlreadyStored, "already stored as message 4 of INGEST"},
		{"other body", &jetstream.RawStreamMsg{Subject: "ingest.acme.gh", Data: []byte("seven, edited")}, nil,
			false, dlqFailed, "the replay id collides with message 4 of INGEST of other content (a different subject or body): not stored, kept in DEDUPE_DLQ"},
		{"other subject", &jetstream.RawStreamMsg{Subject: "ingest.acme.other", Data: []byte("seven")}, nil,
			false, dlqFailed, "collides with message 4 of INGEST of other content"},
		{"empty body stored, body sent", &jetstream.RawStreamMsg{Subject: "ingest.acme.gh"}, nil,
			false, dlqFailed, "of other content"},
		{"read failed", nil, errors.New("message not found"),
			false, dlqFailed, "could not be read to compare (message not found): kept in DEDUPE_DLQ; if it is the same envelope (the worker may have processed it), remove the letter with dedupeworker dlq rm --seq 9 --yes"},
		{"nothing read, no error", nil, nil, false, dlqFailed, "could not be read to compare (no message)"},
	} {
		remove, result, detail := dlqOnDuplicate(sent, tc.stored, tc.err, 4, "INGEST", "DEDUPE_DLQ", 9)
		if remove != tc.remove || result != tc.result || !strings.Contains(detail, tc.contain) {
			t.Errorf("%s: %v %s %q, want %v %s containing %q", tc.name, remove, result, detail, tc.remove, tc.result, tc.contain)
		}
	}
}

// Only a Nats-Msg-Id of the form the worker gives a dead letter names its replay; any other falls back to where
// the dead-letter stream holds the letter.
func TestDlqWorkerID(t *testing.T) {
	for id, want := range map[string]bool{
		"dlq/INGEST/7/1764880000000000000": true,
		"dlq/IN-2_x/0/0":                   true,
		"":                                 false,
		"dlq/":                             false,
		"dlq//7/1":                         false,
		"dlq/INGEST/7":                     false,
		"dlq/INGEST/7/":                    false,
		"dlq/INGEST/7/1/2":                 false,
		"dlq/INGEST/x7/1":                  false,
		"dlq/INGEST/7/-1":                  false,
		"DLQ/INGEST/7/1":                   false,
		"msg/INGEST/7/1":                   false,
		"my-edited-letter":                 false,
	} {
		if got := dlqWorkerID(id); got != want {
			t.Errorf("dlqWorkerID(%q) = %v, want %v", id, got, want)
		}
	}
}
