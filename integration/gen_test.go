package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/hashing"
	"github.com/dedupeworker/dedupeworker/keys"
)

// StandardSources is the sources document of every scenario: one source per key kind, one declared without
// dedupe; any other source id is undeclared (forwarded unkeyed, reason no-dedupe).
const StandardSources = `sources:
  gh: {dedupe: github}
  orders: {dedupe: {json: data.order.id}}
  forms: {dedupe: {payload: {}}}
  stripe: {dedupe: stripe}
  legacy: {}
`

// The oracle's view of StandardSources.
type srcKind int

const (
	srcNone srcKind = iota
	srcHeader
	srcJSON
	srcPayload
)

type srcSpec struct {
	kind   srcKind
	header string
	path   []string
}

var standard = map[string]srcSpec{
	"gh":     {kind: srcHeader, header: "X-GitHub-Delivery"},
	"orders": {kind: srcJSON, path: []string{"data", "order", "id"}},
	"forms":  {kind: srcPayload},
	"stripe": {kind: srcJSON, path: []string{"id"}},
	"legacy": {kind: srcNone},
}

const (
	maxJSONBytes = 1 << 20 // DEDUPE_MAX_JSON_BYTES default
	maxKeyBytes  = 200     // keys.MaxKeyBytes
	maxDepth     = 1000    // jsonscan.DefaultMaxDepth
)

var payloadHasher = func() *hashing.Hasher {
	off := false
	h, err := hashing.New(hashing.Options{Prefix: &off})
	if err != nil {
		panic(err)
	}
	return h
}()

// validID is the contract's 1–64 characters of [A-Za-z0-9_-].
func validID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// clampKey is the contract's long-key rule: a key over 200 bytes becomes "sha256:" + hex SHA-256 of the key.
func clampKey(k string) string {
	if len(k) <= maxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// headerValue is the first value of the first header named name ignoring ASCII case: the exact name first, then
// the lexically smallest of the names that match ignoring case (the worker's rule for NATS header maps).
func headerValue(h nats.Header, name string) (string, bool) {
	if vs := h[name]; len(vs) > 0 {
		return vs[0], true
	}
	best, found := "", false
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) && (!found || k < best) {
			best, found = k, true
		}
	}
	if !found {
		return "", false
	}
	return h[best][0], true
}

// strictJSON is the harness's own notion of "valid JSON" (the contract's: RFC 8259, valid UTF-8, no lone
// surrogate escapes, nesting at most 1000), independent of internal/jsonscan.
func strictJSON(b []byte) bool {
	if !utf8.Valid(b) || !json.Valid(b) {
		return false
	}
	depth, inStr := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '"':
				inStr = false
			case '\\':
				if i+1 < len(b) && b[i+1] == 'u' && i+5 < len(b) {
					var r rune
					fmt.Sscanf(string(b[i+2:i+6]), "%04x", &r)
					switch {
					case r >= 0xD800 && r < 0xDC00: // high: must be followed by a low surrogate escape
						if !(i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u') {
							return false
						}
						var lo rune
						fmt.Sscanf(string(b[i+8:i+12]), "%04x", &lo)
						if lo < 0xDC00 || lo > 0xDFFF {
							return false
						}
						i += 11
					case r >= 0xDC00 && r <= 0xDFFF:
						return false
					default:
						i += 5
					}
				} else {
					i++
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}

// jsonKey finds the key at path in a strictly valid JSON body: a non-empty string or an integer literal, the last
// occurrence of a repeated name winning (encoding/json's map semantics); "" when there is none.
func jsonKey(body []byte, path []string) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return ""
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		s := string(x)
		if strings.ContainsAny(s, ".eE") {
			return ""
		}
		if s == "-0" {
			return "0"
		}
		return s
	}
	return ""
}

// Oracle predicts the outcome of an envelope under StandardSources, from the envelope alone.
func Oracle(subject string, h nats.Header, body []byte) Expect {
	e := Expect{Subject: subject, Body: BodyHash(body)}
	parts := strings.Split(subject, ".")
	// <prefix>.<tenant>.<source>[.<more>...]; a subject with an empty token never reaches the stream.
	if len(parts) < 3 || parts[0] != InputPrefix || !validID(parts[1]) || !validID(parts[2]) {
		e.Kind = DeadLetter
		return e
	}
	tenant, source := parts[1], parts[2]
	// Ingest-Verified saying anything but "true" — in any value, under any spelling of the name — wins over every
	// other reason (the worker checks it before the source's spec).
	for name, vals := range h {
		if !strings.EqualFold(name, "Ingest-Verified") {
			continue
		}
		for _, v := range vals {
			if !strings.EqualFold(strings.TrimSpace(v), "true") {
				e.Kind, e.Reason = Unkeyed, "unverified"
				return e
			}
		}
	}
	spec, declared := standard[source]
	if !declared || spec.kind == srcNone {
		e.Kind, e.Reason = Unkeyed, "no-dedupe"
		return e
	}
	var key, reason string
	switch spec.kind {
	case srcHeader:
		if v, ok := headerValue(h, spec.header); ok && v != "" {
			key = clampKey(v)
		} else {
			reason = "missing"
		}
	case srcJSON:
		switch {
		case len(body) > maxJSONBytes:
			reason = "too-large"
		case !strictJSON(body):
			reason = "not-json"
		default:
			if k := jsonKey(body, spec.path); k != "" {
				key = clampKey(k)
			} else {
				reason = "missing"
			}
		}
	case srcPayload:
		switch {
		case len(body) > maxJSONBytes:
			reason = "too-large"
		case !strictJSON(body):
			reason = "not-json"
		default:
			d, err := payloadHasher.Digest(body)
			if err != nil {
				panic(fmt.Sprintf("oracle: hashing refuses a body the harness thinks valid (%d bytes): %v", len(body), err))
			}
			key = d
		}
	}
	if reason != "" {
		e.Kind, e.Reason = Unkeyed, reason
		return e
	}
	// The worker's Idempotency-Key header: the key escaped where a header value could not carry it verbatim.
	e.Kind, e.Key = Keyed, keys.IdempotencyHeader(tenant, source, key)
	return e
}

// newEnvelope builds an envelope and its prediction.
func newEnvelope(subject string, h nats.Header, body []byte) *Envelope {
	if h == nil {
		h = nats.Header{}
	}
	return &Envelope{Subject: subject, Header: h, Body: body, Exp: Oracle(subject, h, body)}
}

// MixOptions shapes a mixed workload.
type MixOptions struct {
	N       int      // envelopes
	Tenants []string // valid tenant ids
	DupFrac float64  // share of envelopes that are copies of an earlier keyed event (provider retries)
	FarFrac float64  // share of those copies that repeat an event from the first quarter of the run
	BadFrac float64  // share of envelopes that cannot be processed (dead letters)
	Seed    uint64
}

type event struct {
	tenant, source string
	n              int // per tenant and source: the same n under two tenants is the same event key
}

// Mixed generates a workload over StandardSources: header, json and payload keys, undeclared and no-dedupe
// sources, deliveries without a usable key (missing, not-json, unverified), copies of earlier events near and far,
// and a few envelopes that cannot be processed. The same event keys recur under every tenant.
func Mixed(o MixOptions) []*Envelope {
	rng := rand.New(rand.NewPCG(o.Seed, 0xded0be))
	counters := map[string]int{}
	var events []event
	envs := make([]*Envelope, 0, o.N+o.N/50)
	sources := []struct {
		id string
		w  int
	}{{"gh", 30}, {"orders", 22}, {"forms", 15}, {"stripe", 13}, {"legacy", 5}, {"misc", 5}}
	totalW := 0
	for _, s := range sources {
		totalW += s.w
	}
	pickSource := func() string {
		x := rng.IntN(totalW)
		for _, s := range sources {
			if x < s.w {
				return s.id
			}
			x -= s.w
		}
		return "gh"
	}
	for len(envs) < o.N {
		r := rng.Float64()
		switch {
		case r < o.BadFrac:
			envs = append(envs, badEnvelope(rng, o.Tenants))
		case r < o.BadFrac+o.DupFrac && len(events) > 0:
			var ev event
			if rng.Float64() < o.FarFrac && len(envs) > o.N/2 {
				ev = events[rng.IntN(max(1, len(events)/4))]
			} else {
				lo := max(0, len(events)-50)
				ev = events[lo+rng.IntN(len(events)-lo)]
			}
			envs = append(envs, eventEnvelope(rng, ev, 1+rng.IntN(5), ""))
		default:
			tenant := o.Tenants[rng.IntN(len(o.Tenants))]
			source := pickSource()
			counters[tenant+"/"+source]++
			ev := event{tenant, source, counters[tenant+"/"+source]}
			spec, declared := standard[source]
			if !declared || spec.kind == srcNone {
				envs = append(envs, eventEnvelope(rng, ev, 0, ""))
				continue
			}
			switch d := rng.Float64(); {
			case d < 0.03:
				envs = append(envs, eventEnvelope(rng, ev, 0, "missing"))
			case d < 0.05:
				envs = append(envs, eventEnvelope(rng, ev, 0, "not-json"))
			case d < 0.07:
				// A forged copy first (Ingest-Verified: false): it must neither be deduplicated nor claim the key
				// that the genuine delivery right after it carries.
				envs = append(envs, eventEnvelope(rng, ev, 0, "unverified"), eventEnvelope(rng, ev, 0, ""))
				events = append(events, ev)
			default:
				envs = append(envs, eventEnvelope(rng, ev, 0, ""))
				events = append(events, ev)
			}
		}
	}
	return envs[:o.N]
}

// eventID is an event's provider id: the same for every tenant.
func eventID(ev event) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", ev.source, ev.n)))
	h := hex.EncodeToString(sum[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// eventEnvelope is one delivery of ev; attempt > 0 is a provider retry (other headers and, for json sources,
// other non-key fields may differ; a payload retry carries the same document, sometimes re-serialised).
// defect spoils the key on purpose: "missing", "not-json" or "unverified".
func eventEnvelope(rng *rand.Rand, ev event, attempt int, defect string) *Envelope {
	subject := InputPrefix + "." + ev.tenant + "." + ev.source
	h := nats.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Attempt", fmt.Sprint(attempt))
	id := eventID(ev)
	var body []byte
	switch ev.source {
	case "gh":
		body = fmt.Appendf(nil, `{"action":"opened","number":%d,"attempt":%d}`, ev.n, attempt)
		name := []string{"X-GitHub-Delivery", "x-github-delivery", "X-Github-Delivery"}[rng.IntN(3)]
		switch defect {
		case "missing":
			if rng.IntN(2) == 0 {
				h.Set(name, "")
			}
		case "not-json":
			h.Set(name, id)
			body = []byte("\x00\x01 not json")
		default:
			h.Set(name, id)
		}
	case "orders":
		idv := fmt.Sprintf("%q", id)
		if ev.n%3 == 0 {
			idv = fmt.Sprint(1_000_000 + ev.n) // integer ids too
		}
		body = fmt.Appendf(nil, `{"data":{"order":{"id":%s,"total":%d.%02d},"attempt":%d},"type":"order.created"}`, idv, ev.n, ev.n%100, attempt)
		switch defect {
		case "missing":
			body = fmt.Appendf(nil, `{"data":{"order":{"number":%d}}}`, ev.n)
		case "not-json":
			body = fmt.Appendf(nil, `{"data":{"order":{"id":%s`, idv)
		}
	case "stripe":
		body = fmt.Appendf(nil, `{"id":"evt_%s","type":"charge.succeeded","request":{"idempotency_key":"%d"}}`, id[:18], attempt)
		switch defect {
		case "missing":
			body = fmt.Appendf(nil, `{"id":%d.5,"type":"charge.succeeded"}`, ev.n)
		case "not-json":
			body = []byte(`{"id":"evt_` + id[:8] + "\xff\xfe\"}")
		}
	case "forms":
		doc := map[string]any{"form": "contact", "n": ev.n, "fields": map[string]any{"name": "Name " + id[:6], "email": id[:8] + "@example.com"}}
		if attempt > 0 && rng.IntN(2) == 0 {
			body, _ = json.MarshalIndent(doc, "", "  ") // same document, other bytes
		} else {
			body, _ = json.Marshal(doc)
		}
		switch defect {
		case "missing", "not-json":
			body = body[:len(body)/2]
		}
	default: // legacy, misc: no dedupe
		body = fmt.Appendf(nil, `{"event":%d,"attempt":%d}`, ev.n, attempt)
	}
	if defect == "unverified" {
		h.Set("Ingest-Verified", "false")
	}
	return newEnvelope(subject, h, body)
}

// badEnvelope is one that can never be processed: a wrong subject shape or an invalid tenant or source id.
func badEnvelope(rng *rand.Rand, tenants []string) *Envelope {
	t := tenants[rng.IntN(len(tenants))]
	var subject string
	switch rng.IntN(5) {
	case 0:
		subject = InputPrefix + "." + t
	case 1:
		subject = InputPrefix + "." + t + ".gh.extra"
	case 2:
		subject = InputPrefix + "." + strings.Repeat("t", 65) + ".gh"
	case 3:
		subject = InputPrefix + "." + t + ".a:b"
	default:
		subject = InputPrefix + ".t\u00e9." + "gh"
	}
	h := nats.Header{}
	h.Set("X-GitHub-Delivery", fmt.Sprintf("bad-%d", rng.Int64()))
	return newEnvelope(subject, h, []byte(`{"bad":true}`))
}

// Count summarises what a workload should produce.
func Count(envs []*Envelope) (keyed, distinct, unkeyed, dead int) {
	keys := map[string]bool{}
	for _, e := range envs {
		switch e.Exp.Kind {
		case Keyed:
			keyed++
			keys[e.Exp.Key] = true
		case Unkeyed:
			unkeyed++
		case DeadLetter:
			dead++
		}
	}
	return keyed, len(keys), unkeyed, dead
}
