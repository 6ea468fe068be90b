package model_test

import (
	"os"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol/model"
)

// mutation undoes one earlier fix: a wrapper around the decision core (or a change of the world, for a fix that
// lives in the window). The model must find each as a break of its rule that the core with the fix does not make.
type mutation struct {
	name string // the fix undone
	wrap func(model.Decider) model.Decider
	cfg  func(*model.Config)
	rule string // the invariant the model must find broken
}

// wrap makes a decider of f, which decides with the decider d it wraps.
func wrap(f func(d model.Decider, fs model.Facts) model.Action) func(model.Decider) model.Decider {
	return func(d model.Decider) model.Decider {
		return model.DeciderFunc(func(fs model.Facts) model.Action { return f(d, fs) })
	}
}

// told makes the decider decide on facts changed by edit: it is told what did not happen.
func told(edit func(*model.Facts)) func(model.Decider) model.Decider {
	return wrap(func(d model.Decider, f model.Facts) model.Action {
		edit(&f)
		return d.Next(f)
	})
}

// planned changes the decider's next step by edit.
func planned(edit func(*model.Action)) func(model.Decider) model.Decider {
	return wrap(func(d model.Decider, f model.Facts) model.Action {
		a := d.Next(f)
		edit(&a)
		return a
	})
}

// skip makes the decider believe an action succeeded without doing it.
func skip(k model.Kind, set func(*model.Facts)) func(model.Decider) model.Decider {
	return wrap(func(d model.Decider, f model.Facts) model.Action {
		a := d.Next(f)
		for a.Kind == k {
			set(&f)
			a = d.Next(f)
		}
		return a
	})
}

var mutations = []mutation{
	{
		name: "ack after a release that found the key moved on (deadLetterAndRelease ignored Release's false)",
		wrap: told(func(f *model.Facts) {
			if f.Release == model.Moved {
				f.Release = model.OK
			}
		}),
		rule: model.RuleLost,
	},
	{
		name: "dead letter of a first delivery without a claim",
		wrap: wrap(func(d model.Decider, f model.Facts) model.Action {
			if f.Inspected && f.Unpublishable && f.First && f.Claim == model.ClaimNone {
				return model.Legacy.Next(f)
			}
			return d.Next(f)
		}),
		rule: model.RuleLost,
	},
	{
		name: "ack after a failed release",
		wrap: told(func(f *model.Facts) {
			if f.Release == model.Failed {
				f.Release = model.OK
			}
		}),
		rule: model.RuleLost,
	},
	{
		name: "no release on dead letter",
		wrap: skip(model.Release, func(f *model.Facts) { f.Release = model.OK }),
		rule: model.RuleLost,
	},
	{
		name: "no confirmed ack (an unconfirmed ack taken for done: the lost first ack)",
		wrap: told(func(f *model.Facts) {
			if f.Ack == model.Failed {
				f.Ack = model.OK
			}
		}),
		rule: model.RuleMarkedUnexcused,
	},
	{
		name: "no record of the publish",
		wrap: skip(model.Record, func(f *model.Facts) { f.Record = model.OK }),
		rule: model.RuleMarkedUnexcused,
	},
	{
		name: "a recorded publish published again (Owned and published not taken for done)",
		wrap: told(func(f *model.Facts) {
			if f.Claim == model.Owned {
				f.Published = false
			}
		}),
		rule: model.RuleMarkedUnexcused,
	},
	{
		name: "no takeover check (every delivery of the claimant Owned, none Stale)",
		cfg:  func(c *model.Config) { c.NoTakeover = true },
		rule: model.RuleTwiceAfterDeadLetter,
	},
	{
		name: "no wait for an undecided holder (a copy acked as a duplicate at once)",
		wrap: told(func(f *model.Facts) {
			if f.Claim == model.Duplicate {
				f.Published = true
			}
		}),
		rule: model.RuleLost,
	},
	{
		name: "no second read of the key when the holder left the input (a copy acked on the holder's absence alone)",
		wrap: skip(model.Recheck, func(f *model.Facts) { f.Recheck = model.StillHeld }),
		rule: model.RuleLost,
	},
	{
		name: "no possible-duplicate marking",
		wrap: planned(func(a *model.Action) { a.Marked = false }),
		rule: model.RuleTwice,
	},
	{
		name: "no hold bound or pause detector (a delivery held too long still publishes)",
		wrap: told(func(f *model.Facts) { f.TooOld = false }),
		rule: model.RuleTwice,
	},
	{
		name: "an anonymous release marker (a later delivery of a dead-lettered envelope claims the key again)",
		wrap: planned(func(a *model.Action) { a.Named = false }),
		cfg:  func(c *model.Config) { c.Deliveries = 3 },
		rule: model.RuleLost,
	},
	{
		name: "a release marker that never says the event may be stored (the copy admitted next published unmarked)",
		wrap: planned(func(a *model.Action) { a.MayBeStored = false }),
		cfg:  func(c *model.Config) { c.Deliveries = 3 },
		rule: model.RuleTwiceAfterDeadLetter,
	},
	{
		name: "no connection fence (a frozen replica's buffered publish sent when it resumes)",
		cfg:  func(c *model.Config) { c.NoFence, c.Faults = true, 3 },
		rule: model.RuleTwice,
	},
	{
		name: "a keyed envelope forwarded while the window is down, unstorable, dead-lettered and acked (not handed back)",
		// Before the fix the fallback's unkeyed output was decided as an unkeyed envelope's: dead-lettered without
		// a release when the output could never store it.
		wrap: func(model.Decider) model.Decider {
			return model.Protocol(func(f protocol.Facts) protocol.Plan {
				if f.Kind == protocol.Keyed && f.Output.Built == protocol.BuiltUnkeyed {
					f.Kind = protocol.Unkeyed
				}
				return protocol.Decide(f)
			})
		},
		cfg:  func(c *model.Config) { c.Forward = true },
		rule: model.RuleLost,
	},
	{
		name: "a forwarded event published under its own Nats-Msg-Id (msg/<envelope>), not its keyed one",
		cfg:  func(c *model.Config) { c.Forward, c.ForwardOwnID = true, true },
		rule: model.RuleTwice,
	},
}

// mutationBound is where every mutation is found: two copies of one event, two deliveries each, two replicas,
// two faults.
var mutationBound = model.Config{Envelopes: 2, Deliveries: 2, Replicas: 2, Faults: 2}

func TestModelFindsEachFixUndone(t *testing.T) {
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			c := mutationBound
			if m.cfg != nil {
				m.cfg(&c)
			}
			// The baseline: the core in the same world, with the world's own fixes in place.
			base := c
			base.NoFence, base.NoTakeover, base.ForwardOwnID = false, false, false
			d := core
			if m.wrap != nil {
				d = m.wrap(d)
			}
			r := model.Explore(c, d, model.Options{StopAtFirst: true, Rule: m.rule, Baseline: core, BaselineConfig: &base})
			if r.First == nil {
				t.Fatalf("%s: the model found no %q violation (%s)", m.name, m.rule, r)
			}
			if testing.Verbose() || os.Getenv("DEDUPE_MODEL_TRACES") != "" {
				t.Logf("%s — %s\n%s", m.name, r, r.First)
			}
		})
	}
}
