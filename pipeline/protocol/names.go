package protocol

import (
	"fmt"
	"strings"
)

// Names for traces and test failures.

func name(names []string, i uint8) string {
	if int(i) < len(names) && names[i] != "" {
		return names[i]
	}
	return fmt.Sprintf("%d", i)
}

func (a Action) String() string {
	return name([]string{"stop", "build", "claim", "wait-holder", "lookup-input", "publish", "publish-copy",
		"dead-letter", "release", "record", "ack", "nak", "recheck"}, uint8(a))
}

func (k Kind) String() string { return name([]string{"", "keyed", "unkeyed", "malformed"}, uint8(k)) }

func (b Built) String() string { return name([]string{"not-built", "keyed", "unkeyed"}, uint8(b)) }

func (s ClaimStatus) String() string {
	return name([]string{"not-claimed", "won", "owned", "duplicate", "stale", "invalid", "unavailable", "lost",
		"cancelled", "unknown", "dead-lettered"}, uint8(s))
}

func (r HolderResult) String() string {
	return name([]string{"not-asked", "not-here", "published", "unpublished", "timed-out"}, uint8(r))
}

func (r InputResult) String() string {
	return name([]string{"not-asked", "gone", "present", "failed"}, uint8(r))
}

func (r PublishResult) String() string {
	return name([]string{"not-published", "stored", "failed", "refused", "cancelled"}, uint8(r))
}

func (r ReleaseResult) String() string {
	return name([]string{"not-released", "released", "moved", "failed"}, uint8(r))
}

func (r RecordResult) String() string {
	return name([]string{"not-recorded", "recorded", "moved", "failed"}, uint8(r))
}

func (r AckResult) String() string {
	return name([]string{"not-acked", "confirmed", "unconfirmed"}, uint8(r))
}

func (d Dead) String() string {
	return name([]string{"", "malformed", "bad-claim", "output-reject"}, uint8(d))
}

func (c Count) String() string {
	return name([]string{"", "unique", "unkeyed", "duplicate", "dead-letter"}, uint8(c))
}

// String is the reason's label value of dedupeworker_naks_total.
func (r NakReason) String() string {
	return name([]string{"", "shutdown", "window-unavailable", "publish", "dead-letter", "held-too-long",
		"holder-undecided", "record-failed"}, uint8(r))
}

func (r StopReason) String() string { return name([]string{"done", "stale", "superseded"}, uint8(r)) }

func (n Note) String() string {
	return name([]string{"", "possible-duplicate", "stored-twice", "moved-on", "unrecorded", "copy-refused",
		"unknown-status", "held"}, uint8(n))
}

// String is the plan as one line: the action and the fields it uses.
func (p Plan) String() string {
	var b strings.Builder
	b.WriteString(p.Do.String())
	switch p.Do {
	case Build:
		if p.Keyed {
			b.WriteString(" keyed")
		} else {
			b.WriteString(" unkeyed")
		}
		if p.Fallback {
			b.WriteString(" (window-unavailable)")
		}
	case Publish:
		if p.Mark&PossibleDuplicate != 0 {
			b.WriteString(" marked possible-duplicate")
		}
	case DeadLetter:
		b.WriteString(" " + p.Dead.String())
	case Release:
		if p.MayBeStored {
			b.WriteString(" may-be-stored")
		}
	case Ack:
		b.WriteString(" as " + p.Count.String())
	case Nak:
		fmt.Fprintf(&b, " %s delay %s", p.Nak, p.Delay)
	case Stop:
		b.WriteString(" " + p.Stop.String())
	}
	if p.Note != 0 {
		b.WriteString(" [" + p.Note.String() + "]")
	}
	return b.String()
}

func (r RecheckResult) String() string {
	return name([]string{"not-rechecked", "still-held", "no-longer-held", "failed"}, uint8(r))
}
