package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// The dead-letter stream the worker creates has the output's duplicate window: the redelivery of an envelope
// dead-lettered by a worker that died before its ack writes its dead letter again under the same Nats-Msg-Id, and
// that one must collapse as late as a republished event does. Before, DEDUPE_DLQ was created without a window
// (the server's 2 minutes) whatever the output's.
func TestProvisionDLQDuplicateWindow(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.OutputDuplicates = 5 * time.Minute // longer than the server's default of 2 minutes
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pipeline.DefaultOutputStream, pipeline.DefaultDLQStream} {
		s, err := e.js.Stream(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != cfg.OutputDuplicates {
			t.Errorf("stream %s: duplicate window %s, want the output's %s", name, got, cfg.OutputDuplicates)
		}
	}
	if strings.Contains(e.log.String(), "duplicate window is shorter") {
		t.Errorf("created streams warned about their duplicate window:\n%s", e.log.String())
	}
}

// A dead-letter age limit shorter than the output's duplicate window bounds the dead-letter stream's window: the
// server refuses a duplicate window over the age limit.
func TestProvisionDLQDuplicateWindowWithinAge(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.OutputDuplicates = 5 * time.Minute
	cfg.DLQMaxAge = 3 * time.Minute
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := e.js.Stream(ctx(t), pipeline.DefaultDLQStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != cfg.DLQMaxAge {
		t.Errorf("stream %s: duplicate window %s, want its age limit %s", pipeline.DefaultDLQStream, got, cfg.DLQMaxAge)
	}
}

// An existing dead-letter stream whose duplicate window is shorter than the ack wait is left as it is, with a
// warning naming it, as an output stream's is. Before: nothing was said.
func TestProvisionWarnsShortDLQDuplicateWindow(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow()) // ack wait 5s
	e.createStream(jetstream.StreamConfig{Name: pipeline.DefaultDLQStream, Subjects: []string{"dedupe.dlq.>"},
		Duplicates: 2 * time.Second})
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	var warned bool
	for line := range strings.Lines(e.log.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "dead-letter stream's duplicate window is shorter than the ack wait") &&
			strings.Contains(line, "stream="+pipeline.DefaultDLQStream) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning about %s's duplicate window of 2s against the ack wait of 5s:\n%s", pipeline.DefaultDLQStream, e.log.String())
	}
	s, err := e.js.Stream(ctx(t), pipeline.DefaultDLQStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != 2*time.Second {
		t.Errorf("Provision changed %s's duplicate window to %s", pipeline.DefaultDLQStream, got)
	}
}
