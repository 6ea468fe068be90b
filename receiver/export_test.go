package receiver

import (
	"net/http"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// DecideKey is the binding decision of a source verified with scheme and keyed by spec, for the table tests: the
// header the id is published under ("" when the key is not bound), the value, and the refusal.
func DecideKey(scheme string, spec keys.Spec, h http.Header, d verify.Delivery) (header, value string, set bool, err error) {
	b := newKeyBinding(scheme, spec)
	value, set, err = b.decide(h, d)
	if b.bind {
		header = b.header
	}
	return header, value, set, err
}

// HeldByClaim is the guard's decision, after a claim of a delivery without an id failed and was made again,
// that the claim is the delivery's own to release.
func HeldByClaim(o kvwindow.Outcome) bool { return heldByClaim(o) }

// ClaimMayHaveLanded is the guard's decision, after a claim of a delivery without an id failed, that its write may
// have been stored with only the answer lost, so that the claim is settled (made again and released if its own).
func ClaimMayHaveLanded(err error) bool { return claimMayHaveLanded(err) }

// GuardReadiness is what the replay guard's state (guard: nil when it answers) does to readiness, with served
// sources of which guarded are guarded.
func GuardReadiness(served, guarded int, guard error) error {
	return guardReadiness(served, guarded, guard)
}

// Verifier returns the verifier of a delivery for tenant and source, and whether the receiver serves it at all.
func (p *Policy) Verifier(tenant, source string) (verify.Verifier, bool) {
	sp, v := p.lookup(tenant, source)
	return v, sp != nil
}

// LogThrottle is the receiver's log throttle with one line per kind every interval: its allow.
func LogThrottle(every time.Duration) func(kind string, now time.Time) (ok bool, skipped int) {
	t := &throttle{every: every}
	return t.allow
}
