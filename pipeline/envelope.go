package pipeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/keys"
)

// Headers the pipeline reads and writes.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderMsgID          = jetstream.MsgIDHeader // Nats-Msg-Id
	HeaderKey            = "Dedupe-Key"
	HeaderStatus         = "Dedupe-Status"
	HeaderReason         = "Dedupe-Reason"
	HeaderError          = "Dedupe-Error"
	HeaderSubject        = "Dedupe-Subject"
	HeaderInputSeq       = "Dedupe-Input-Seq"
	HeaderInputStream    = "Dedupe-Input-Stream"
	HeaderTruncated      = "Dedupe-Truncated"
	HeaderVerified       = "Ingest-Verified"
	// HeaderPossibleDuplicate marks an output that may be a second copy of its event (docs/failures.md, "When never
	// published twice holds"): consumers that must never act twice check it against their own records.
	HeaderPossibleDuplicate = "Dedupe-Possible-Duplicate"
	// HeaderOriginalStatus and HeaderOriginalDescription keep, in a dead letter, the Status and Description headers
	// of an envelope shaped like a server status message (DeadControlHeader).
	HeaderOriginalStatus      = "Dedupe-Original-Status"
	HeaderOriginalDescription = "Dedupe-Original-Description"
)

// Values of the Dedupe-Status header.
const (
	StatusUnique    = "unique"
	StatusUnkeyed   = "unkeyed"
	StatusDuplicate = "duplicate"
)

// Dead-letter reasons: the last token of the dead-letter subject.
const (
	DeadBadSubject   = "bad-subject"
	DeadBadTenant    = "bad-tenant"
	DeadBadSource    = "bad-source"
	DeadBadClaim     = "bad-claim"     // the window refused the claim as invalid (kvwindow.ErrInvalid)
	DeadOutputReject = "output-reject" // the output stream refused the event for good (e.g. too large)
	// DeadControlHeader: an empty body with a Status header, which NATS clients take for a server status message.
	DeadControlHeader = "control-header"
)

// envelope is what inspection decides about one delivery, before any network round trip.
type envelope struct {
	seq            uint64        // sequence in the input stream
	stamp          int64         // the input stream's timestamp of the message (unix ns): with seq, the envelope's identity
	received       time.Duration // when the consume handler received the delivery (p.clock)
	tenant, source string
	src            *sourceState
	key            string      // the event key ("" when unkeyed)
	reason         keys.Reason // why there is no key ("" when keyed)
	dead           string      // dead-letter reason token ("" when the envelope can be processed)
	deadErr        string      // readable dead-letter reason
}

// inspect parses the subject, checks the ids and finds the key: everything that needs no network.
func (p *Pipeline) inspect(e *envelope, subject string, hdr nats.Header, body []byte, seq uint64, stamp int64) {
	*e = envelope{seq: seq, stamp: stamp, src: p.other}
	// <prefix>.<tenant>.<source>[.<more>...]: extra tokens (an event type, say) are kept on the output subject; the
	// window's scope stays tenant and source.
	rest, ok := strings.CutPrefix(subject, p.inPrefixDot)
	dot := strings.IndexByte(rest, '.')
	if !ok || dot < 0 {
		e.dead = DeadBadSubject
		e.deadErr = fmt.Sprintf("subject %q is not of the form %s<tenant>.<source>[.<more>...]", subject, p.inPrefixDot)
		return
	}
	e.tenant, e.source = rest[:dot], rest[dot+1:]
	if end := strings.IndexByte(e.source, '.'); end >= 0 {
		e.source = e.source[:end]
	}
	e.src = p.source(e.source)
	if !keys.ValidID(e.tenant) {
		e.dead = DeadBadTenant
		e.deadErr = fmt.Sprintf("tenant %q must be 1-64 characters of [A-Za-z0-9_-]", e.tenant)
		return
	}
	if !keys.ValidID(e.source) {
		e.dead = DeadBadSource
		e.deadErr = fmt.Sprintf("source %q must be 1-64 characters of [A-Za-z0-9_-]", e.source)
		return
	}
	if controlShaped(hdr, body) {
		// Published as it is, every NATS client reading the output would take it for a status message of the
		// server and drop it (or stop consuming). The dead letter keeps the two headers under other names.
		e.dead = DeadControlHeader
		e.deadErr = fmt.Sprintf("the envelope has an empty body and a Status header (%q), which NATS clients take for a server "+
			"status message; kept here as %s/%s", hdr.Get(statusHeader), HeaderOriginalStatus, HeaderOriginalDescription)
		return
	}
	if unverified(hdr) {
		e.reason = ReasonUnverified
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

// unverified reports whether the delivery may not claim a key: some value of Ingest-Verified, under any letter
// case of the name, says anything but "true". A sender that adds "Ingest-Verified: true" beside the ingest
// service's "false" (a second value, or another spelling of the name) must not win; a delivery without the header
// counts as verified (the ingest service did not mark it).
func unverified(hdr nats.Header) bool {
	for name, vals := range hdr {
		if len(name) != len(HeaderVerified) || !strings.EqualFold(name, HeaderVerified) {
			continue
		}
		if len(vals) == 0 {
			return true
		}
		for _, v := range vals {
			if !strings.EqualFold(strings.TrimSpace(v), "true") {
				return true
			}
		}
	}
	return false
}

// ttl is the claim TTL of a spec: its own or the default, in whole seconds, at least one.
func (p *Pipeline) ttl(spec keys.Spec) time.Duration {
	d := spec.TTL(p.cfg.DefaultTTL)
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}
