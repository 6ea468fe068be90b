package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A dead letter the dead-letter stream refuses whole (its maximum message size) is stored trimmed: none of the
// sender's headers, what fits of the body, and Dedupe-Truncated saying how many bytes of headers and body went.
func TestDeadLetterTrimmedSaysWhatWasDropped(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 1024, Duplicates: time.Minute})
	e.createStream(jetstream.StreamConfig{Name: pipeline.DefaultDLQStream, Subjects: []string{"dedupe.dlq.>"},
		MaxMsgSize: 1536, Duplicates: time.Minute})
	e.start(cfg)
	long := strings.Repeat("v", 100)
	seq := e.publish("ingest.t1.legacy", hdr("X-A", "b", "X-Long", long), make([]byte, 2048))
	e.drained(10 * time.Second)
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	m := dl[0]
	// Each sender header counts as its "Name: value\r\n" line.
	sent := len("X-A: b\r\n") + len("X-Long: "+long+"\r\n")
	want := fmt.Sprintf("sender headers (%d bytes) dropped; body 0 of 2048 bytes kept; the original is message %d of "+
		"stream %s", sent, seq, pipeline.DefaultInputStream)
	if got := header(t, m, "Dedupe-Truncated"); got != want {
		t.Errorf("Dedupe-Truncated: %q\nwant %q", got, want)
	}
	if m.Subject != "dedupe.dlq.output-reject" || len(m.Data) != 0 || m.Header.Get("X-A") != "" ||
		m.Header.Get("X-Long") != "" {
		t.Errorf("dead letter %s %v (%d bytes)", m.Subject, m.Header, len(m.Data))
	}
}
