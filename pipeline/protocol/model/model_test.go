package model_test

import (
	"os"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol/model"
)

// core is the decision core the model checks.
var core = model.Protocol(protocol.Decide)

// The bounds. make test explores the small one; make model (DEDUPE_MODEL=full) the full one.
var (
	smallBound = model.Config{Envelopes: 2, Deliveries: 2, Replicas: 2, Faults: 1}
	fullBound  = model.Config{Envelopes: 2, Deliveries: 3, Replicas: 2, Faults: 2}
)

func full() bool { return os.Getenv("DEDUPE_MODEL") == "full" }

// TestModelCore explores protocol.Decide: within the bound no invariant may break, at the small bound (make test)
// as at the full one (make model), each with both kinds of input stream, without and with forwarding while the
// window is down. A second store that forwarding caused is excused (model.RuleTwiceForwarded): counted, not failed.
func TestModelCore(t *testing.T) {
	b := smallBound
	if full() {
		b = fullBound
	}
	for _, c := range []model.Config{b, keeps(b), forward(b), forward(keeps(b))} {
		r := model.Explore(c, core, model.Options{})
		t.Logf("model: protocol.Decide, %s", r)
		for rule, n := range r.Rules {
			t.Errorf("%d × %s; the first:\n%s", n, rule, r.Firsts[rule])
		}
		if testing.Verbose() {
			for rule := range r.Excused {
				t.Logf("the first excused (%s):\n%s", rule, r.Firsts[rule])
			}
		}
	}
}

// keeps is c with an input stream that keeps acknowledged envelopes.
func keeps(c model.Config) model.Config {
	c.InputKeeps = true
	return c
}

// forward is c with DEDUPE_FORWARD_WHEN_WINDOW_DOWN.
func forward(c model.Config) model.Config {
	c.Forward = true
	return c
}

// TestModelFindsHolesInOldDecisions: the worker's decisions before the decision core (Legacy) lose an event
// within the small bound.
func TestModelFindsHolesInOldDecisions(t *testing.T) {
	r := model.Explore(smallBound, model.Legacy, model.Options{StopAtFirst: true, Rule: model.RuleLost})
	if r.First == nil {
		t.Fatalf("no loss found in the old decisions: %s", r)
	}
	if testing.Verbose() {
		t.Logf("old decisions: %s\n%s", r, r.First)
	}
}

// TestModelFindsAckWithoutOutcome: an envelope acked before its delivery decided anything breaks RuleNoOutcome.
// No fix undone in TestModelFindsEachFixUndone reaches that invariant; this shows the model can.
func TestModelFindsAckWithoutOutcome(t *testing.T) {
	ackFirst := planned(func(a *model.Action) {
		if a.Kind == model.Claim {
			a.Kind = model.Ack
		}
	})
	r := model.Explore(smallBound, ackFirst(core), model.Options{StopAtFirst: true, Rule: model.RuleNoOutcome, Baseline: core})
	if r.First == nil {
		t.Fatalf("no ack without an outcome found: %s", r)
	}
	if testing.Verbose() {
		t.Logf("ack before the claim: %s\n%s", r, r.First)
	}
}
