package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/keys"
)

// envelope is what inspection decides about one delivery, before any network round trip.
type envelope struct {
	seq            uint64        // sequence in the input stream
	stamp          int64         // the input stream's timestamp of the message (unix ns): with seq, the envelope's identity
	received       time.Duration // when the consume handler received the delivery (p.clock)
	tenant, source string
	tail           string // the input subject after its prefix: "<tenant>.<source>[.<more>...]"
	src            *sourceState
	key            string      // the event key ("" when unkeyed)
	reason         keys.Reason // why there is no key ("" when keyed)
	dead           string      // dead-letter reason token ("" when the envelope can be processed)
	deadErr        string      // readable dead-letter reason
}

// inspect parses the subject, checks the ids and finds the key: everything that needs no network.
func (p *Pipeline) inspect(e *envelope, subject string, hdr nats.Header, body []byte, seq uint64, stamp int64) {
	*e = envelope{seq: seq, stamp: stamp, src: p.other}
	// Extra tokens after the source (an event type, say) are kept on the output subject; the window's scope stays
	// tenant and source.
	in, err := contract.ParseInput(p.cfg.InputPrefix, subject)
	e.tenant, e.source, e.tail = in.Tenant, in.Source, in.Tail
	if in.Tail != "" { // the subject has the form: its source's counters, valid ids or not
		e.src = p.source(in.Source)
	}
	if err != nil {
		var se *contract.SubjectError
		errors.As(err, &se)
		e.dead, e.deadErr = se.Reason, err.Error()
		return
	}
	if contract.ControlShaped(hdr, body) {
		// Published as it is, every NATS client reading the output would take it for a status message of the
		// server and drop it (or stop consuming). The dead letter keeps the two headers under other names.
		e.dead = contract.DeadControlHeader
		e.deadErr = fmt.Sprintf("the envelope has an empty body and a Status header (%q), which NATS clients take for a server "+
			"status message; kept here as %s/%s", hdr.Get(contract.NATSStatus), contract.HeaderOriginalStatus, contract.HeaderOriginalDescription)
		return
	}
	if contract.Unverified(hdr) {
		e.reason = contract.ReasonUnverified
		return
	}
	if !e.src.spec.Enabled() {
		e.reason = keys.ReasonNoDedupe
		return
	}
	e.key, e.reason = p.cfg.Extractor.Extract(e.src.spec, keys.NATSHeaders(hdr), body)
	if e.key == "" && e.reason == keys.ReasonNone {
		e.reason = keys.ReasonMissing
	}
}

// ttl is the claim TTL of a spec: its own or the default, in whole seconds, at least one.
func (p *Pipeline) ttl(spec keys.Spec) time.Duration {
	d := spec.TTL(p.cfg.DefaultTTL)
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}
