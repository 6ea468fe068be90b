package receiver

import (
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// keyBinding says how a source's event key is bound to what its verification found (docs/sources.md, "Keys bound
// to what was signed"): when the key reads one of the names the provider sends the id under, the verified id is
// published under the key's header and another id under any of those names is refused.
type keyBinding struct {
	header  string   // canonical name of the header the key reads; "" when the key is not a header
	written string   // that name as the dedupe spec writes it, which the worker looks up (keys.NATSHeaders)
	bind    bool     // the key reads one of idNames
	idNames []string // canonical names the provider sends the id under
}

// newKeyBinding is the binding of a source verified with scheme and keyed by spec.
func newKeyBinding(scheme string, spec keys.Spec) keyBinding {
	b := keyBinding{idNames: verify.IDHeaders(scheme)}
	if scheme == verify.SchemeStandardWebhooks {
		// The svix preset keys on svix-id; a Standard Webhooks sender's id is the same message id.
		b.idNames = append(b.idNames, "Svix-Id")
	}
	if spec.Kind() == keys.KindHeader {
		b.written = spec.Header()
		b.header = http.CanonicalHeaderKey(b.written)
	}
	b.bind = b.header != "" && hasName(b.idNames, b.header)
	return b
}

// decide is what a verified delivery publishes under the key's header: value, when set is true. Every non-empty
// value of the key's header and of the provider's id headers (names compared as the receiver compares them:
// any letter case, '_' as '-') must be the verified id d.ID; a request where one is not — or that carries one
// when the verification found no id — is refused with an error that names the headers and never their values. Values are compared with surrounding blanks removed, as the verifier reads them.
func (b keyBinding) decide(h http.Header, d verify.Delivery) (value string, set bool, err error) {
	if !b.bind {
		return "", false, nil
	}
	for name, vals := range h {
		if !sameName(name, b.header) && !hasName(b.idNames, name) {
			continue
		}
		for _, v := range vals {
			v = strings.Trim(v, " \t")
			switch {
			case v == "" || v == d.ID:
			case d.ID == "":
				return "", false, fmt.Errorf("header %s carries an id, but the delivery has no %s",
					name, strings.Join(b.idNames, " or "))
			default:
				return "", false, fmt.Errorf("header %s carries another id than the %s the verification read",
					name, d.Header)
			}
		}
	}
	if d.ID == "" {
		return "", false, nil
	}
	return d.ID, true, nil
}

// setKeyHeader publishes value as the one value of the key's header, removing every other spelling of it.
func setKeyHeader(h http.Header, name, value string) {
	maps.DeleteFunc(h, func(k string, _ []string) bool { return sameName(k, name) })
	h[name] = []string{value}
}

// KeyWarning is a verify/dedupe pair of a declared source under which the worker cannot key verified deliveries,
// or keys them on a header the signature does not cover with nothing to stop a replay: `dedupeworker sources
// check` prints them. Line is the source's line in the document (0 when unknown).
type KeyWarning struct {
	Source string
	Line   int
	Text   string
}

// KeyWarnings lists the warnings of every source of a sources document, in the order of Sources.IDs (none for the
// presets, fromPresets, which are bound and guarded as they should be).
func KeyWarnings(src keys.Sources, fromPresets bool) []KeyWarning {
	var out []KeyWarning
	for _, id := range src.IDs() {
		scheme := SchemeOf(src, id, fromPresets)
		if scheme == "" || scheme == verify.SchemeNone || fromPresets {
			continue
		}
		vs, spec := src.Verify[id], src.Specs[id]
		warn := func(format string, args ...any) {
			out = append(out, KeyWarning{Source: id, Line: src.Line[id], Text: fmt.Sprintf(format, args...)})
		}
		if spec.Kind() != keys.KindHeader {
			if vs.ReplayGuard == keys.ReplayGuardOn {
				warn("replay_guard: on does nothing here: the key is read from the body, which the signature covers")
			}
			continue
		}
		header := spec.Header()
		switch {
		case !verify.BodyOnly(scheme) && scheme != verify.SchemeStripe && !newKeyBinding(scheme, spec).bind:
			warn("the key reads %s, which the %s signature does not cover and which is not the id it signs (%s): a captured delivery sent again under another %s within the tolerance is a new event; key on the signed id",
				header, scheme, strings.Join(verify.IDHeaders(scheme), " or "), header)
		case scheme == verify.SchemeStripe:
			warn("stripe deliveries carry their id in the body, in no header: the key reads %s, so verified deliveries are never deduplicated; use dedupe: stripe", header)
		case verify.BodyOnly(scheme) && !guarded(vs, spec):
			warn("the key reads %s, which the %s signature does not cover, and replay_guard is off: a captured delivery sent again under another %s is a new event",
				header, scheme, header)
		}
	}
	return out
}
