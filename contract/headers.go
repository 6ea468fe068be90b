package contract

import "strings"

// Headers of the events (unique and unkeyed) the worker publishes on the output subject.
const (
	// HeaderIdempotencyKey is what a consumer deduplicates on: "<tenant>:<source>:<key>" for a keyed event (the key
	// in header form, keys.HeaderValue), "msg/<envelope>" (UnkeyedIDPrefix) for an unkeyed one.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderMsgID is JetStream's duplicate-detection id (nats.go's jetstream.MsgIDHeader): derived from the
	// envelope alone, so that every delivery of one envelope publishes under one id.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderKey is the event key in header form, when there is one.
	HeaderKey = "Dedupe-Key"
	// HeaderStatus is StatusUnique, StatusUnkeyed or (on duplicate copies) StatusDuplicate.
	HeaderStatus = "Dedupe-Status"
	// HeaderReason says why an unkeyed event has no key: one of UnkeyedReasons.
	HeaderReason = "Dedupe-Reason"
	// HeaderInputStream and HeaderInputSeq say where an event, a duplicate copy or a dead letter came from: the
	// input stream and the envelope's sequence in it.
	HeaderInputStream = "Dedupe-Input-Stream"
	HeaderInputSeq    = "Dedupe-Input-Seq"
	// HeaderPossibleDuplicate ("true") marks an event that may be a second copy of one already stored: consumers
	// that must never act twice check it against their own records.
	HeaderPossibleDuplicate = "Dedupe-Possible-Duplicate"
)

// Headers of dead letters.
const (
	HeaderError     = "Dedupe-Error"     // why the envelope was dead-lettered, for a person
	HeaderSubject   = "Dedupe-Subject"   // the envelope's subject
	HeaderTruncated = "Dedupe-Truncated" // what was dropped of an envelope too large to keep whole
	// HeaderOriginalStatus and HeaderOriginalDescription keep the NATSStatus and NATSDescription headers of a
	// control-shaped envelope (DeadControlHeader), so that the dead letter is not shaped like a status message.
	HeaderOriginalStatus      = "Dedupe-Original-Status"
	HeaderOriginalDescription = "Dedupe-Original-Description"
)

// HeaderVerified is set by the ingest service on an envelope, VerifiedTrue or VerifiedFalse: whether the delivery's
// signature verified. An envelope that is Unverified never claims a key.
const HeaderVerified = "Ingest-Verified"

// Values of HeaderVerified.
const (
	VerifiedTrue  = "true"
	VerifiedFalse = "false"
)

// NATSStatus and NATSDescription are the headers NATS clients read a server status from: a message with an empty
// body and a NATSStatus header is taken for a status message (ControlShaped).
const (
	NATSStatus      = "Status"
	NATSDescription = "Description"
)

// Values of HeaderStatus.
const (
	StatusUnique    = "unique"    // the first copy of a keyed event
	StatusUnkeyed   = "unkeyed"   // an event without a key (HeaderReason says why), never deduplicated
	StatusDuplicate = "duplicate" // a duplicate copy, on the duplicates subject only
)

// Values of HeaderReason: why an event is unkeyed.
const (
	ReasonNoDedupe          = "no-dedupe"          // the source is undeclared, or declared without dedupe
	ReasonMissing           = "missing"            // the key's header or JSON member is absent, empty or not a string or integer
	ReasonTooLarge          = "too-large"          // the body is over the JSON size limit (json and payload keys)
	ReasonNotJSON           = "not-json"           // the body is not valid JSON (json and payload keys)
	ReasonUnverified        = "unverified"         // the envelope is Unverified
	ReasonWindowUnavailable = "window-unavailable" // forwarded while the claim window was down (opt-in)
)

// UnkeyedReasons are the values of HeaderReason.
func UnkeyedReasons() []string {
	return []string{ReasonNoDedupe, ReasonMissing, ReasonTooLarge, ReasonNotJSON, ReasonUnverified, ReasonWindowUnavailable}
}

// Dead-letter reasons: the last token of the dead-letter subject.
const (
	DeadBadSubject    = "bad-subject"    // not "<input prefix>.<tenant>.<source>[.<more>...]"
	DeadBadTenant     = "bad-tenant"     // the tenant is not a valid id
	DeadBadSource     = "bad-source"     // the source is not a valid id
	DeadBadClaim      = "bad-claim"      // the window refused the claim as invalid
	DeadOutputReject  = "output-reject"  // the output stream refused the event for good (e.g. too large)
	DeadControlHeader = "control-header" // ControlShaped: NATS clients would take it for a server status message
)

// DeadReasons are the dead-letter reasons.
func DeadReasons() []string {
	return []string{DeadBadSubject, DeadBadTenant, DeadBadSource, DeadBadClaim, DeadOutputReject, DeadControlHeader}
}

// Prefixes of reserved header names, each owned by one party: a header under one of them is set by its owner only.
const (
	PrefixNats   = "Nats-"   // the NATS server's and JetStream's (Nats-Msg-Id, Nats-Expected-Stream, Nats-TTL, …)
	PrefixDedupe = "Dedupe-" // the worker's
	PrefixIngest = "Ingest-" // the ingest service's (HeaderVerified)
)

// HasPrefixFold reports whether the header name starts with prefix, ignoring ASCII case.
func HasPrefixFold(name, prefix string) bool {
	return len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix)
}

// Reserved reports whether a header of an envelope or a dead letter is never copied onto what the worker or a
// replay publishes: Nats-* (JetStream's control headers: an inbound Nats-Expected-Stream must not steer the
// republish) and Dedupe-* (the worker's own: a publisher cannot forge them), under any letter case.
func Reserved(name string) bool {
	return HasPrefixFold(name, PrefixNats) || HasPrefixFold(name, PrefixDedupe)
}

// ReservedOnEvent reports whether an envelope's header is left off its event and duplicate copy: Reserved, or
// Idempotency-Key (the worker sets it; a dead letter keeps the sender's, so that a replay carries it).
func ReservedOnEvent(name string) bool {
	return Reserved(name) || len(name) == len(HeaderIdempotencyKey) && strings.EqualFold(name, HeaderIdempotencyKey)
}

// Unverified reports whether an envelope may not claim a key: some value of HeaderVerified, under any letter case
// of the name, says anything but "true" (ignoring case and outer blanks). A sender that adds "Ingest-Verified: true"
// beside the ingest service's "false" (a second value, or another spelling of the name) must not win; an envelope
// without the header counts as verified (its ingest service did not mark it).
func Unverified(h map[string][]string) bool {
	for name, vals := range h {
		if len(name) != len(HeaderVerified) || !strings.EqualFold(name, HeaderVerified) {
			continue
		}
		if len(vals) == 0 {
			return true
		}
		for _, v := range vals {
			if !strings.EqualFold(strings.TrimSpace(v), VerifiedTrue) {
				return true
			}
		}
	}
	return false
}

// ControlShaped reports whether a message with headers h and this body is what NATS clients take for a status
// message of the server: an empty body and a NATSStatus header. Such an envelope is dead-lettered
// (DeadControlHeader); no event or dead letter ever has that shape.
func ControlShaped(h map[string][]string, body []byte) bool {
	if len(body) != 0 || len(h) == 0 {
		return false
	}
	v := h[NATSStatus]
	return len(v) > 0 && v[0] != ""
}

// Nats-Msg-Id prefixes of what is not a keyed event: each is followed by the envelope's identity,
// "<input stream>/<stream sequence>/<stored at, unix ns>"; a replay's is followed by the dead letter's own Nats-Msg-Id
// ("dlq/<input stream>/…", so that two dead letters of one envelope replay once) and a digest of its subject and
// body, or by the dead letter's "<dlq stream>/<seq>/<stored at>" when it has none.
const (
	UnkeyedIDPrefix    = "msg/"    // an unkeyed event (one forwarded while the window is down keeps its keyed id); also its Idempotency-Key
	DuplicateIDPrefix  = "dup/"    // a duplicate copy
	DeadLetterIDPrefix = "dlq/"    // a dead letter
	ReplayIDPrefix     = "replay/" // a dead letter replayed into the input stream (dlq replay)
)

// Where says on which messages a header appears.
type Where uint8

const (
	OnEnvelope   Where = 1 << iota // envelopes in the input stream (and, carried over, their events)
	OnEvent                        // events on the output subject
	OnDuplicate                    // duplicate copies on the duplicates subject
	OnDeadLetter                   // dead letters
)

// Header is one header of the contract and the messages it appears on.
type Header struct {
	Name  string
	Where Where
}

// Headers lists every header the contract names, with where each appears.
func Headers() []Header {
	const ev, dup, dl = OnEvent, OnDuplicate, OnDeadLetter
	return []Header{
		{HeaderIdempotencyKey, ev | dup},
		{HeaderMsgID, ev | dup | dl},
		{HeaderKey, ev | dup},
		{HeaderStatus, ev | dup},
		{HeaderReason, ev},
		{HeaderInputStream, ev | dup | dl},
		{HeaderInputSeq, ev | dup | dl},
		{HeaderPossibleDuplicate, ev},
		{HeaderError, dl},
		{HeaderSubject, dl},
		{HeaderTruncated, dl},
		{HeaderOriginalStatus, dl},
		{HeaderOriginalDescription, dl},
		{HeaderVerified, OnEnvelope},
	}
}
