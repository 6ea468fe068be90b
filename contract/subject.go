package contract

import (
	"fmt"
	"strings"

	"github.com/dedupeworker/dedupeworker/internal/ident"
)

// The default subject prefixes: envelopes on "ingest.<tenant>.<source>[.<more>...]", events on
// "deduped.<tenant>.<source>[.<more>...]", dead letters on "dedupe.dlq.<reason>". Duplicate copies have no default
// prefix: they are published only when one is set.
const (
	DefaultInputPrefix  = "ingest"
	DefaultOutputPrefix = "deduped"
	DefaultDLQPrefix    = "dedupe.dlq"
)

// Input is what an input subject "<prefix>.<tenant>.<source>[.<more>...]" names. Tokens after the source (an event
// type, say) are kept on the output subject; the dedupe scope stays tenant and source.
type Input struct {
	Tenant, Source string
	// Tail is the subject after the prefix and its dot, "<tenant>.<source>[.<more>...]": the output and duplicate
	// subjects repeat it after their own prefix.
	Tail string
}

// SubjectError says why a subject is not a valid input subject; Reason is the dead-letter reason it earns.
type SubjectError struct {
	Reason  string // DeadBadSubject, DeadBadTenant or DeadBadSource
	Subject string
	Prefix  string
	Input   Input // the tokens read, when the subject has the form
}

func (e *SubjectError) Error() string {
	switch e.Reason {
	case DeadBadTenant:
		return fmt.Sprintf("tenant %q must be 1-%d characters of [A-Za-z0-9_-]", e.Input.Tenant, ident.MaxLen)
	case DeadBadSource:
		return fmt.Sprintf("source %q must be 1-%d characters of [A-Za-z0-9_-]", e.Input.Source, ident.MaxLen)
	}
	return fmt.Sprintf("subject %q is not of the form %s.<tenant>.<source>[.<more>...]", e.Subject, e.Prefix)
}

// ParseInput reads an input subject published under prefix. The error, a *SubjectError, says which dead letter the
// envelope earns: DeadBadSubject when the subject is not of the form (another prefix, no source token),
// DeadBadTenant or DeadBadSource when a token is not a valid id (1-64 characters of [A-Za-z0-9_-]). Input is
// filled whenever the subject has the form, valid ids or not. It does not allocate unless the subject is invalid.
func ParseInput(prefix, subject string) (Input, error) {
	if len(subject) <= len(prefix) || subject[len(prefix)] != '.' || subject[:len(prefix)] != prefix {
		return Input{}, &SubjectError{Reason: DeadBadSubject, Subject: subject, Prefix: prefix}
	}
	tail := subject[len(prefix)+1:]
	dot := strings.IndexByte(tail, '.')
	if dot < 0 {
		return Input{}, &SubjectError{Reason: DeadBadSubject, Subject: subject, Prefix: prefix}
	}
	in := Input{Tenant: tail[:dot], Source: tail[dot+1:], Tail: tail}
	if end := strings.IndexByte(in.Source, '.'); end >= 0 {
		in.Source = in.Source[:end]
	}
	switch {
	case !ident.Valid(in.Tenant):
		return in, &SubjectError{Reason: DeadBadTenant, Subject: subject, Prefix: prefix, Input: in}
	case !ident.Valid(in.Source):
		return in, &SubjectError{Reason: DeadBadSource, Subject: subject, Prefix: prefix, Input: in}
	}
	return in, nil
}

// InputSubject is the subject an ingest service publishes a delivery of tenant and source on.
func InputSubject(prefix, tenant, source string) string { return prefix + "." + tenant + "." + source }

// Republish is the subject an envelope's event (prefix: the output prefix) or its duplicate copy (the duplicates
// prefix) is published on: the prefix, then the input subject's tail (Input.Tail).
func Republish(prefix, tail string) string { return prefix + "." + tail }

// DeadLetterSubject is the subject of a dead letter for reason.
func DeadLetterSubject(prefix, reason string) string { return prefix + "." + reason }

// ParseDeadLetter returns the reason a dead-letter subject names: its tokens after prefix. ok is false when the
// subject is not under prefix.
func ParseDeadLetter(prefix, subject string) (reason string, ok bool) {
	if len(subject) <= len(prefix)+1 || subject[len(prefix)] != '.' || subject[:len(prefix)] != prefix {
		return "", false
	}
	return subject[len(prefix)+1:], true
}

// All is the subject filter of everything published under prefix: "<prefix>.>".
func All(prefix string) string { return prefix + ".>" }
