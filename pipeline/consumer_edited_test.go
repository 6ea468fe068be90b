package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A consumer edited in place under the running worker (nats consumer edit: a delivery limit, another ack wait)
// is warned about as a consumer found so at the start is: the status poll reads its configuration. Before, the
// warnings were logged only when a consumer was first bound, and an edit that lets envelopes be dropped went
// unsaid. A warning is logged once per edit, not on every poll.
func TestConsumerEditedInPlaceWarned(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.start(cfg)
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	edited := info.Config
	edited.MaxDeliver = 5
	edited.AckWait = 2 * cfg.AckWait
	if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, edited); err != nil {
		t.Fatal(err)
	}
	warned := func() error {
		log := e.log.String()
		for _, want := range []string{"pipeline: consumer has a delivery limit", "pipeline: consumer ack wait differs from the configured one"} {
			if !strings.Contains(log, want) {
				return errors.New("no warning " + want)
			}
		}
		return nil
	}
	natstest.Eventually(t, 10*time.Second, warned)
	// Edited again: its new limit is warned about, by a later poll; the first is not repeated meanwhile.
	edited.MaxDeliver = 7
	if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, edited); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(e.log.String(), "max_deliver=7") {
			return errors.New("no warning of the second edit")
		}
		return nil
	})
	log := e.log.String()
	if n := strings.Count(log, "max_deliver=5"); n != 1 {
		t.Errorf("the first delivery limit warned %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "ack wait differs"); n != 1 {
		t.Errorf("the ack wait warned %d times, want once (unchanged by the second edit):\n%s", n, log)
	}
}
