package pipeline_test

import (
	"testing"

	"github.com/dedupeworker/dedupeworker/contract"
)

// The network-free handler that BenchmarkHandle measures: it must build without a JetStream connection (make
// bench's go benchmarks panicked in New when it read the connection of a stand-in) and build what the pipeline
// would publish.
func TestHandlerPrepare(t *testing.T) {
	h := newHandler(t)
	body := []byte(`{"id":"evt_1","data":{"object":{"id":"ch_1"}}}`)
	for _, tc := range []struct{ name, subject, wantSubject, status, key string }{
		{"header key", "ingest.acme.gh", "deduped.acme.gh", contract.StatusUnique, "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"json key", "ingest.acme.orders", "deduped.acme.orders", contract.StatusUnique, "evt_1"},
		{"unkeyed", "ingest.acme.legacy", "deduped.acme.legacy", contract.StatusUnkeyed, ""},
		{"dead letter", "ingest.acme.bad+source", "dedupe.dlq.bad-source", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := h.Prepare(tc.subject, webhookHeaders(), body, 7, 1700000000000000000)
			if m.Subject != tc.wantSubject {
				t.Fatalf("subject %q, want %q", m.Subject, tc.wantSubject)
			}
			if got := m.Header.Get(contract.HeaderStatus); got != tc.status {
				t.Errorf("%s = %q, want %q", contract.HeaderStatus, got, tc.status)
			}
			if got := m.Header.Get(contract.HeaderKey); got != tc.key {
				t.Errorf("%s = %q, want %q", contract.HeaderKey, got, tc.key)
			}
		})
	}
}
