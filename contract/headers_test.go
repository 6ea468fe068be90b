package contract_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
)

func TestReserved(t *testing.T) {
	for _, tc := range []struct {
		name            string
		reserved, event bool
	}{
		{"Nats-Msg-Id", true, true},
		{"nats-expected-stream", true, true},
		{"NATS-TTL", true, true},
		{"Nats-", true, true},
		{"Dedupe-Status", true, true},
		{"dedupe-original-status", true, true},
		{"Idempotency-Key", false, true},
		{"idempotency-key", false, true},
		{"Idempotency-Keys", false, false},
		{"X-Idempotency-Key", false, false},
		{"Ingest-Verified", false, false}, // the ingest service's: carried on to the event
		{"Nats", false, false},
		{"Nats_Msg_Id", false, false}, // '_' is the receiver's business (it drops it), not the worker's
		{"X-Nats-Foo", false, false},
		{"Content-Type", false, false},
		{"", false, false},
	} {
		if got := contract.Reserved(tc.name); got != tc.reserved {
			t.Errorf("Reserved(%q) = %v, want %v", tc.name, got, tc.reserved)
		}
		if got := contract.ReservedOnEvent(tc.name); got != tc.event {
			t.Errorf("ReservedOnEvent(%q) = %v, want %v", tc.name, got, tc.event)
		}
	}
}

func TestHasPrefixFold(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		want         bool
	}{
		{"Dedupe-Key", "dedupe-", true}, {"DEDUPE-KEY", "Dedupe-", true}, {"Dedupe", "Dedupe-", false},
		{"X-Dedupe-Key", "Dedupe-", false}, {"anything", "", true}, {"", "Nats-", false},
	} {
		if got := contract.HasPrefixFold(tc.name, tc.prefix); got != tc.want {
			t.Errorf("HasPrefixFold(%q, %q) = %v", tc.name, tc.prefix, got)
		}
	}
}

func TestUnverified(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    nats.Header
		want bool
	}{
		{"no header", nats.Header{"A": {"1"}}, false},
		{"nil", nil, false},
		{"true", nats.Header{"Ingest-Verified": {"true"}}, false},
		{"TRUE, blanks", nats.Header{"Ingest-Verified": {" TRUE "}}, false},
		{"false", nats.Header{"Ingest-Verified": {"false"}}, true},
		{"empty value", nats.Header{"Ingest-Verified": {""}}, true},
		{"no values", nats.Header{"Ingest-Verified": {}}, true},
		{"a true beside a false", nats.Header{"Ingest-Verified": {"false", "true"}}, true},
		{"another spelling says false", nats.Header{"Ingest-Verified": {"true"}, "ingest-verified": {"false"}}, true},
		{"lower case true", nats.Header{"ingest-verified": {"true"}}, false},
		{"underscore is another header", nats.Header{"Ingest_Verified": {"false"}}, false},
		{"yes is not true", nats.Header{"Ingest-Verified": {"yes"}}, true},
	} {
		if got := contract.Unverified(tc.h); got != tc.want {
			t.Errorf("%s: Unverified(%v) = %v, want %v", tc.name, tc.h, got, tc.want)
		}
	}
}

func TestControlShaped(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    nats.Header
		body string
		want bool
	}{
		{"status, empty body", nats.Header{"Status": {"409"}}, "", true},
		{"status and description", nats.Header{"Status": {"404"}, "Description": {"No Messages"}}, "", true},
		{"status with a body", nats.Header{"Status": {"409"}}, "x", false},
		{"empty status", nats.Header{"Status": {""}}, "", false},
		{"no values", nats.Header{"Status": {}}, "", false},
		{"other case: nats.go reads Status only", nats.Header{"status": {"409"}}, "", false},
		{"renamed in a dead letter", nats.Header{"Dedupe-Original-Status": {"409"}}, "", false},
		{"no headers", nil, "", false},
	} {
		if got := contract.ControlShaped(tc.h, []byte(tc.body)); got != tc.want {
			t.Errorf("%s: ControlShaped = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The names the contract shares with nats.go are nats.go's.
func TestNamesAgreeWithNATS(t *testing.T) {
	if contract.HeaderMsgID != jetstream.MsgIDHeader {
		t.Errorf("HeaderMsgID %q, nats.go's %q", contract.HeaderMsgID, jetstream.MsgIDHeader)
	}
	if !contract.Reserved(jetstream.ExpectedStreamHeader) || !contract.Reserved(jetstream.MsgTTLHeader) {
		t.Error("JetStream's control headers are not reserved")
	}
}

func TestHeaders(t *testing.T) {
	var names []string
	for _, h := range contract.Headers() {
		if h.Where == 0 {
			t.Errorf("%s appears nowhere", h.Name)
		}
		if slices.Contains(names, h.Name) {
			t.Errorf("%s listed twice", h.Name)
		}
		names = append(names, h.Name)
		// What the worker writes is reserved: a publisher cannot forge it on an envelope.
		if h.Where&(contract.OnEvent|contract.OnDuplicate|contract.OnDeadLetter) != 0 && !contract.ReservedOnEvent(h.Name) {
			t.Errorf("%s is written by the worker but not reserved", h.Name)
		}
		if h.Where == contract.OnEnvelope && !strings.HasPrefix(h.Name, contract.PrefixIngest) {
			t.Errorf("%s is an envelope header outside %s*", h.Name, contract.PrefixIngest)
		}
	}
	if len(contract.UnkeyedReasons()) != 6 || len(contract.DeadReasons()) != 6 {
		t.Errorf("reasons: %v, %v", contract.UnkeyedReasons(), contract.DeadReasons())
	}
}
