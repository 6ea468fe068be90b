package model_test

import (
	"os"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline/protocol/model"
)

// The bounds. make test explores the small one; make model (DEDUPE_MODEL=full) the full one.
var (
	smallBound = model.Config{Envelopes: 2, Deliveries: 2, Replicas: 2, Faults: 1}
	fullBound  = model.Config{Envelopes: 2, Deliveries: 3, Replicas: 2, Faults: 2}
)

// residual are the invariants the core is known to break within the bound, each a documented residual.
var residual = map[string]bool{}

func TestModelCore(t *testing.T) {
	bounds := []model.Config{smallBound}
	if os.Getenv("DEDUPE_MODEL") == "full" {
		bounds = []model.Config{fullBound, withKeeps(fullBound)}
	}
	for _, c := range bounds {
		r := model.Explore(c, core, model.Options{})
		t.Logf("model: %s", r)
		for rule, n := range r.Rules {
			if !residual[rule] {
				t.Errorf("%d × %s; the first:\n%s", n, rule, r.Firsts[rule])
			}
		}
	}
}

func withKeeps(c model.Config) model.Config {
	c.InputKeeps = true
	return c
}
