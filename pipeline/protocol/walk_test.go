package protocol_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// TestEveryPathKeepsTheInvariants walks every sequence of results Decide's plans can meet, for every kind of
// envelope and setting, with the delivery getting too old to publish at any step, and checks the package's
// invariants on each path.
func TestEveryPathKeepsTheInvariants(t *testing.T) {
	paths := 0
	for _, kind := range []Kind{Keyed, Unkeyed, Malformed} {
		for c := 0; c < 8; c++ {
			start := Facts{Kind: kind, Delivered: 1, Hold: fresh, Config: Config{
				ForwardWhenWindowDown: c&1 != 0, CopyDuplicates: c&2 != 0, InputKeeps: c&4 != 0,
				DupWindow: 2 * time.Minute, PublishTimeout: 10 * time.Second,
			}}
			for _, v := range walk(Decide, start, nil, &paths) {
				t.Error(v)
			}
		}
	}
	t.Logf("%d paths", paths)
}

// TestTheWalkCatchesAnUndoneFix wraps Decide so that a dead letter whose release found the key moved on is
// acknowledged anyway (the stale-delivery loss), and expects the walk to report it.
func TestTheWalkCatchesAnUndoneFix(t *testing.T) {
	ackAnyway := func(f Facts) Plan {
		p := Decide(f)
		if p.Do == Stop && p.Stop == Superseded {
			if f.Ack == NotAcked {
				return Plan{Do: Ack, Count: CountDeadLetter}
			}
			return Plan{Do: Stop, Stop: Done}
		}
		return p
	}
	paths := 0
	start := Facts{Kind: Keyed, Delivered: 1, Hold: fresh, Config: cfg}
	violations := walk(ackAnyway, start, nil, &paths)
	for _, v := range violations {
		if strings.HasPrefix(v, "acknowledged after the release found the key moved on") {
			t.Logf("caught:\n%s", v)
			return
		}
	}
	t.Fatalf("the walk of %d paths did not catch an ack after a release that found the key moved on (%d other violations)", paths, len(violations))
}

type step struct {
	plan  Plan
	old   bool // the delivery was too old to publish when the plan was made
	after string
}

// walk follows every path from f, deciding with decide, and returns the violations found.
func walk(decide Decider, f Facts, trace []step, paths *int) (violations []string) {
	if len(trace) > 20 {
		return []string{"no end after 20 steps:\n" + show(trace)}
	}
	for _, old := range []bool{false, true} {
		if old == f.Hold.TooOld() || old && !f.Hold.TooOld() {
			g := f
			if old {
				g.Hold.Paused = true
			}
			p := decide(g)
			results := outcomes(g, p)
			if asked(trace, p) {
				violations = append(violations, "a step asked twice:\n"+show(append(trace, step{plan: p, old: old})))
				continue
			}
			if p.Do == Stop {
				*paths++
				violations = append(violations, check(g, append(trace, step{plan: p, old: old}))...)
				continue
			}
			for _, r := range results {
				h := g
				r.apply(&h)
				violations = append(violations, walk(decide, h, append(trace, step{plan: p, old: old, after: r.name}), paths)...)
			}
		}
	}
	return violations
}

// asked reports whether p asks again for a step already taken (a Build for the window-down fallback excepted).
func asked(trace []step, p Plan) bool {
	if p.Do == Stop || p.Do == Build && p.Fallback {
		return false
	}
	for _, s := range trace {
		if s.plan.Do == p.Do {
			return true
		}
	}
	return false
}

type result struct {
	name  string
	apply func(*Facts)
}

func outcomes(f Facts, p Plan) []result {
	var rs []result
	add := func(name string, apply func(*Facts)) { rs = append(rs, result{name, apply}) }
	switch p.Do {
	case Build:
		built := BuiltUnkeyed
		if p.Keyed {
			built = BuiltKeyed
		}
		for _, u := range []bool{false, true} {
			add(fmt.Sprintf("built %s unstorable=%v", built, u), func(f *Facts) { f.Output = Output{Built: built, Unstorable: u} })
		}
	case Claim:
		for s := Won; s <= DeadLettered; s++ {
			for _, pub := range []bool{false, true} {
				for _, known := range []bool{false, true} {
					for _, age := range []time.Duration{0, time.Hour} {
						for _, may := range []bool{false, true} {
							c := ClaimResult{Status: s, Published: pub, HolderKnown: known, FirstClaimAge: age, AgeKnown: true, MayBeStored: may}
							add(fmt.Sprintf("claim %+v", c), func(f *Facts) { f.Claim = c })
						}
					}
				}
			}
		}
	case WaitHolder:
		for r := HolderNotHere; r <= HolderTimedOut; r++ {
			add("holder "+r.String(), func(f *Facts) { f.Holder = r })
		}
	case LookupInput:
		for r := InputGone; r <= InputFailed; r++ {
			add("input "+r.String(), func(f *Facts) { f.Input = r })
		}
	case Recheck:
		for r := StillHeld; r <= RecheckFailed; r++ {
			add("recheck "+r.String(), func(f *Facts) { f.Recheck = r })
		}
	case Publish, PublishCopy, DeadLetter:
		for r := PublishStored; r <= PublishCancelled; r++ {
			add(p.Do.String()+" "+r.String(), func(f *Facts) {
				switch p.Do {
				case Publish:
					f.Publish = r
				case PublishCopy:
					f.Copy = r
				default:
					f.DeadLetter = r
				}
			})
		}
	case Release:
		for r := Released; r <= ReleaseFailed; r++ {
			add("release "+r.String(), func(f *Facts) { f.Release = r })
		}
	case Record:
		for r := Recorded; r <= RecordFailed; r++ {
			add("record "+r.String(), func(f *Facts) { f.Record = r })
		}
	case Ack:
		for r := AckConfirmed; r <= AckUnconfirmed; r++ {
			add("ack "+r.String(), func(f *Facts) { f.Ack = r })
		}
	case Nak:
		add("naked", func(f *Facts) { f.Naked = true })
	}
	return rs
}

func show(trace []step) string {
	var b strings.Builder
	for i, s := range trace {
		fmt.Fprintf(&b, "  %2d. %v", i+1, s.plan)
		if s.after != "" {
			fmt.Fprintf(&b, " → %s", s.after)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// check verifies one finished path; f is the final facts.
func check(f Facts, trace []step) (violations []string) {
	fail := func(why string) { violations = append(violations, why+":\n"+show(trace)) }
	var acks, naks int
	seen := map[Action]bool{}
	holds := f.Kind == Keyed && f.Output.Built == BuiltKeyed &&
		(f.Claim.Status == Won || f.Claim.Status == Owned && !f.Claim.Published)
	for _, s := range trace {
		p := s.plan
		if p.Do != Stop && seen[p.Do] && !(p.Do == Build && p.Fallback) {
			fail("a step asked twice")
		}
		seen[p.Do] = true
		switch p.Do {
		case Ack:
			acks++
		case Nak:
			naks++
		case Publish:
			// Invariant 4: publish a keyed output only while holding the claim, never too old.
			if f.Kind == Keyed && f.Output.Built == BuiltKeyed && !holds {
				fail("published without holding the claim")
			}
			if s.old {
				fail("published when too old")
			}
		}
	}
	// Invariant 1: one end.
	end := trace[len(trace)-1].plan
	switch {
	case acks+naks > 1:
		fail("more than one ack or nak")
	case acks+naks == 0 && end.Stop != StaleDelivery && end.Stop != Superseded:
		fail("ended without ack or nak, and not stale")
	case acks+naks == 1 && end.Stop != Done:
		fail("acked or naked, then stopped as stale")
	}
	if acks == 0 {
		return violations
	}
	// Invariant 2 and 3: ack only a durable outcome, and only as the holder.
	durable := false
	switch {
	case f.Publish == PublishStored:
		durable = true
	case f.DeadLetter == PublishStored:
		durable = !holds || f.Release == Released
	case f.Kind == Keyed && f.Claim.Status == Owned && f.Claim.Published:
		durable = true
	case f.Kind == Keyed && f.Claim.Status == DeadLettered:
		durable = true // an earlier delivery's dead letter, stored before it left the release marker
	case f.Kind == Keyed && f.Claim.Status == Duplicate:
		durable = f.Claim.Published || f.Holder == HolderPublished ||
			f.Input == InputGone && f.Recheck == StillHeld && !f.Config.InputKeeps && f.Claim.HolderKnown
	}
	if !durable {
		fail("acknowledged an outcome that is not durable")
	}
	if f.Kind == Keyed && f.Output.Built == BuiltKeyed && f.Claim.Status == Stale {
		fail("a stale delivery acknowledged")
	}
	if f.Release == ReleaseMoved {
		fail("acknowledged after the release found the key moved on")
	}
	// Invariant 6: the record comes before the ack when the input keeps envelopes.
	if f.Publish == PublishStored && f.Kind == Keyed && f.Output.Built == BuiltKeyed && f.Config.InputKeeps && f.Record != Recorded && f.Record != RecordMoved {
		fail("acknowledged before recording, with an input that keeps envelopes")
	}
	return violations
}
