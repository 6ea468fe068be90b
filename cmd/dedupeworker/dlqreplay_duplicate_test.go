package main

import "testing"

// A replay's content tag tells apart what it publishes: the same subject and body give one tag, a changed byte of
// either another, and the subject's and the body's bytes cannot trade places.
func TestDlqContentTag(t *testing.T) {
	base := dlqContentTag("ingest.acme.gh", []byte("seven"))
	if len(base) != 32 || base != dlqContentTag("ingest.acme.gh", []byte("seven")) {
		t.Fatalf("tag %q: want 32 hex digits, the same for the same content", base)
	}
	for _, other := range []struct {
		subject, body string
	}{{"ingest.acme.gh", "seven, edited"}, {"ingest.acme.gl", "seven"}, {"ingest.acme.g", "hseven"}, {"ingest.acme.gh", ""}} {
		if dlqContentTag(other.subject, []byte(other.body)) == base {
			t.Errorf("%q %q: the same tag as ingest.acme.gh seven", other.subject, other.body)
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
