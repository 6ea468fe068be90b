package keys

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/hashing"
)

const (
	// DefaultTTL is the dedupe window when neither the spec nor the worker sets one. It covers Stripe's 3-day and
	// Shopify's 48-hour retry schedules.
	DefaultTTL = 72 * time.Hour
	// DefaultMaxJSONBytes is the largest body a json or payload source reads when Extractor.MaxJSONBytes is 0.
	DefaultMaxJSONBytes = 1 << 20
	// MaxKeyBytes is the longest key kept as is; a longer key is replaced by "sha256:" and its hex SHA-256.
	MaxKeyBytes = 200
)

// Kind says where a spec takes the key from.
type Kind uint8

const (
	KindNone    Kind = iota // no dedupe (the zero Spec)
	KindHeader              // a request header
	KindJSON                // a member of the JSON body
	KindPayload             // a digest of the JSON body
)

var kindNames = [...]string{"none", "header", "json", "payload"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "none"
}

// Spec is a parsed dedupe spec. The zero value means "no dedupe". A Spec is immutable and cheap to copy; it is
// safe for concurrent use.
type Spec struct{ p *spec }

type spec struct {
	kind         Kind
	preset       string          // preset name, when the spec is (or started from) a preset
	header       string          // KindHeader: the header name as written
	jsonPath     string          // KindJSON: the path as written
	path         []string        // KindJSON: member names, outermost first
	only, except []string        // KindPayload
	hasher       *hashing.Hasher // KindPayload
	ttl          time.Duration   // 0: none given
}

// presets holds each preset's spec; presetSpec copies it, since a spec naming a preset may add a TTL.
var presets = map[string]spec{
	"github":            {kind: KindHeader, header: "X-GitHub-Delivery"},
	"standard_webhooks": {kind: KindHeader, header: "webhook-id"},
	"svix":              {kind: KindHeader, header: "svix-id"},
	"shopify":           {kind: KindHeader, header: "X-Shopify-Webhook-Id"},
	"stripe":            {kind: KindJSON, jsonPath: "id", path: []string{"id"}},
	// Salesforce stamps no delivery id: the outbound callout must set a top-level "id" that stays the same on
	// every retry of one event. A body without it is forwarded without dedupe.
	"salesforce": {kind: KindJSON, jsonPath: "id", path: []string{"id"}},
}

var presetNames = slices.Sorted(maps.Keys(presets))

func presetSpec(name string) *spec {
	s := presets[name]
	s.preset = name
	return &s
}

// Enabled reports whether the spec asks for dedupe (false for the zero Spec).
func (s Spec) Enabled() bool { return s.p != nil }

// get is the spec's fields; those of KindNone for the zero Spec.
func (s Spec) get() *spec {
	if s.p == nil {
		return &spec{}
	}
	return s.p
}

// Kind says where the key comes from.
func (s Spec) Kind() Kind { return s.get().kind }

// Header returns the header name of a header source, as written.
func (s Spec) Header() string { return s.get().header }

// OwnTTL returns the TTL the spec itself sets, and whether it sets one.
func (s Spec) OwnTTL() (time.Duration, bool) { return s.get().ttl, s.get().ttl != 0 }

// TTL returns the spec's own TTL, or def when it sets none.
func (s Spec) TTL(def time.Duration) time.Duration {
	if d, ok := s.OwnTTL(); ok {
		return d
	}
	return def
}

// String describes the spec for logs, with DefaultTTL standing in when the spec sets no TTL, e.g.
// "header X-GitHub-Delivery (preset github), ttl 72h".
func (s Spec) String() string { return s.describe(DefaultTTL, false) }

// Describe is String with the worker's default TTL, marking a TTL that comes from def with " (default)", e.g.
// "json data.order.id, ttl 24h (default)".
func (s Spec) Describe(def time.Duration) string { return s.describe(def, true) }

func (s Spec) describe(def time.Duration, mark bool) string {
	if s.p == nil {
		return "no dedupe"
	}
	d := s.Rule() + ", ttl " + formatTTL(s.TTL(def))
	if _, own := s.OwnTTL(); mark && !own {
		d += " (default)"
	}
	return d
}

// Rule is the spec without its TTL, e.g. "header X-GitHub-Delivery (preset github)": what a table that shows the
// TTL in a column of its own prints (sources check).
func (s Spec) Rule() string {
	p := s.p
	if p == nil {
		return "no dedupe"
	}
	var b strings.Builder
	switch p.kind {
	case KindHeader:
		b.WriteString("header " + p.header)
	case KindJSON:
		b.WriteString("json " + p.jsonPath)
	case KindPayload:
		b.WriteString("payload digest")
		if p.only != nil {
			b.WriteString(" only [" + strings.Join(p.only, ", ") + "]")
		}
		if p.except != nil {
			b.WriteString(" except [" + strings.Join(p.except, ", ") + "]")
		}
	}
	if p.preset != "" {
		b.WriteString(" (preset " + p.preset + ")")
	}
	return b.String()
}

// formatTTL prints a duration as hours, minutes and seconds without zero parts: 72h, 1h30m, 90s -> 1m30s.
func formatTTL(d time.Duration) string {
	s := d.String()
	if d <= 0 || d%time.Second != 0 {
		return s
	}
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	return strings.Replace(s, "h0m", "h", 1)
}

// ParseSpec parses one dedupe spec as given on a command line or in the sources file: YAML or JSON, either a preset
// name (`github`) or an object (`{"json":"data.id"}`, `{payload: {except: [.ts]}}`, `{preset: stripe, ttl: 48h}`).
// Errors start with "dedupe: " and name the field at fault.
func ParseSpec(doc []byte) (Spec, error) {
	n, err := readDocument(doc)
	if err != nil {
		return Spec{}, fmt.Errorf("dedupe: %v", err)
	}
	if n == nil {
		return Spec{}, fmt.Errorf("dedupe: empty spec: give a preset name (%s) or an object with one of preset, header, json or payload",
			strings.Join(presetNames, ", "))
	}
	s, perr := parseSpecNode(n)
	if perr != nil {
		return Spec{}, perr.inSpec()
	}
	return s, nil
}

const specFields = "preset, header, json, payload, ttl, ttl_seconds"

func unknownPreset(place, name string) *placeError {
	if name == "" {
		return errAt(place, "empty preset name (valid presets: %s)", strings.Join(presetNames, ", "))
	}
	return errAt(place, "unknown preset %q (valid presets: %s)", name, strings.Join(presetNames, ", "))
}

func parseSpecNode(n *yaml.Node) (Spec, *placeError) {
	n = deref(n)
	if isNull(n) {
		return Spec{}, errAt("", "is empty: give a preset name (%s) or an object with one of preset, header, json or payload",
			strings.Join(presetNames, ", "))
	}
	if isString(n) {
		if _, ok := presets[n.Value]; !ok {
			return Spec{}, unknownPreset("", n.Value)
		}
		return Spec{presetSpec(n.Value)}, nil
	}
	if n.Kind != yaml.MappingNode {
		return Spec{}, errAt("", "must be a preset name or an object, got %s", describe(n))
	}
	ms, perr := members(n, "", "field")
	if perr != nil {
		return Spec{}, perr
	}
	var (
		sources          []string // which of preset/header/json/payload are set, in order given
		src              member
		ttlNode, secNode *yaml.Node
	)
	for _, m := range ms {
		switch m.name {
		case "preset", "header", "json", "payload":
			sources = append(sources, m.name)
			src = m
		case "ttl":
			ttlNode = m.value
		case "ttl_seconds":
			secNode = m.value
		default:
			return Spec{}, errAt("", "unknown field %q (valid: %s)", m.name, specFields)
		}
	}
	switch len(sources) {
	case 0:
		return Spec{}, errAt("", "one of preset, header, json or payload is required")
	case 1:
	default:
		return Spec{}, errAt("", "only one of preset, header, json or payload may be set, got %s",
			strings.Join(sources, " and "))
	}
	s, perr := parseSource(src.name, src.value)
	if perr != nil {
		return Spec{}, perr
	}
	switch {
	case ttlNode != nil && secNode != nil:
		return Spec{}, errAt("", "ttl and ttl_seconds are mutually exclusive: set one")
	case ttlNode != nil:
		s.ttl, perr = parseTTL(ttlNode)
	case secNode != nil:
		s.ttl, perr = parseTTLSeconds(secNode)
	}
	if perr != nil {
		return Spec{}, perr
	}
	return Spec{s}, nil
}

func stringField(name string, v *yaml.Node) (string, *placeError) {
	if isNull(v) {
		return "", nil
	}
	if !isString(v) {
		return "", errAt(name, "must be a string, got %s", describe(v))
	}
	return v.Value, nil
}

func parseSource(name string, v *yaml.Node) (*spec, *placeError) {
	if name == "payload" {
		return parsePayload(v)
	}
	str, perr := stringField(name, v)
	if perr != nil {
		return nil, perr
	}
	switch name {
	case "preset":
		if _, ok := presets[str]; !ok {
			return nil, unknownPreset(name, str)
		}
		return presetSpec(str), nil
	case "header":
		if str == "" {
			return nil, errAt(name, "must not be empty")
		}
		if !validHeaderName(str) {
			return nil, errAt(name, "%q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", str)
		}
		return &spec{kind: KindHeader, header: str}, nil
	}
	path, msg := parseJSONPath(str)
	if msg != "" {
		return nil, errAt(name, "%s", msg)
	}
	return &spec{kind: KindJSON, jsonPath: str, path: path}, nil
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token); any other name could never match.
func validHeaderName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return h != ""
}

// parseJSONPath splits a json source path into member names. A plain path is split on dots, every segment
// non-empty; a path starting with "." uses the hashing path grammar (so `.["dotted.key"]` names a member with a
// dot), where only name steps are allowed.
func parseJSONPath(j string) ([]string, string) {
	if j == "" {
		return nil, "must not be empty"
	}
	if j[0] != '.' {
		segs := strings.Split(j, ".")
		for i, seg := range segs {
			if seg == "" {
				return nil, fmt.Sprintf("segment %d is empty in %q", i+1, j)
			}
		}
		return segs, ""
	}
	p, err := hashing.ParsePath(j)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "hashing: ")
	}
	steps := p.Steps()
	if len(steps) == 0 {
		return nil, fmt.Sprintf("path %q selects the whole body; name a member, such as .id", j)
	}
	names := make([]string, len(steps))
	for i, st := range steps {
		if st.IsIndex {
			return nil, fmt.Sprintf("path %q: step %d is an array index [%d]; a json key path may only name object members",
				j, i+1, st.Index)
		}
		names[i] = st.Name
	}
	return names, ""
}

func parsePayload(v *yaml.Node) (*spec, *placeError) {
	const place = "payload"
	s := &spec{kind: KindPayload}
	if !isNull(v) {
		if v.Kind != yaml.MappingNode {
			return nil, errAt(place, "must be an object with optional only or except path lists, got %s", describe(v))
		}
		ms, perr := members(v, place, "field")
		if perr != nil {
			return nil, perr
		}
		for _, m := range ms {
			var dst *[]string
			switch m.name {
			case "only":
				dst = &s.only
			case "except":
				dst = &s.except
			default:
				return nil, errAt(place, "unknown field %q (valid: only, except)", m.name)
			}
			paths, perr := pathList(place+"."+m.name, m.value)
			if perr != nil {
				return nil, perr
			}
			*dst = paths
		}
		if s.only != nil && s.except != nil {
			return nil, errAt(place, "only and except are mutually exclusive: set one")
		}
	}
	off := false
	h, err := hashing.New(hashing.Options{Only: s.only, Except: s.except, Prefix: &off})
	if err != nil { // pathList parsed every path already; this is a safety net
		return nil, errAt(place, "%s", strings.TrimPrefix(err.Error(), "hashing: "))
	}
	s.hasher = h
	return s, nil
}

func pathList(place string, v *yaml.Node) ([]string, *placeError) {
	if v.Kind != yaml.SequenceNode {
		return nil, errAt(place, "must be a list of paths such as [.user.id], got %s", describe(v))
	}
	if len(v.Content) == 0 {
		return nil, errAt(place, "must list at least one path (leave it out to digest the whole body)")
	}
	paths := make([]string, 0, len(v.Content))
	for i, item := range v.Content {
		item = deref(item)
		at := fmt.Sprintf("%s[%d]", place, i)
		if item == nil || !isString(item) {
			return nil, errAt(at, "must be a path string such as .user.id, got %s", describe(item))
		}
		if _, err := hashing.ParsePath(item.Value); err != nil {
			return nil, errAt(at, "%s", strings.TrimPrefix(err.Error(), "hashing: "))
		}
		paths = append(paths, item.Value)
	}
	return paths, nil
}

// maxTTLSeconds keeps ttl_seconds within time.Duration.
const maxTTLSeconds = math.MaxInt64 / int64(time.Second)

func parseTTL(v *yaml.Node) (time.Duration, *placeError) {
	const place = "ttl"
	if !isString(v) {
		return 0, errAt(place, "must be a duration such as \"48h\" or \"90s\", got %s (use ttl_seconds for a number of seconds)",
			describe(v))
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, errAt(place, "invalid duration %q: a Go duration such as \"48h\", \"1h30m\" or \"90s\"", v.Value)
	}
	if d < time.Second {
		return 0, errAt(place, "must be at least 1s, got %s", v.Value)
	}
	if d%time.Second != 0 {
		return 0, errAt(place, "must be whole seconds, got %s", v.Value)
	}
	return d, nil
}

func parseTTLSeconds(v *yaml.Node) (time.Duration, *placeError) {
	const place = "ttl_seconds"
	var n int64
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&n) != nil {
		return 0, errAt(place, "must be a positive integer, got %s", describe(v))
	}
	if n <= 0 {
		return 0, errAt(place, "must be a positive integer, got %s", v.Value)
	}
	if n > maxTTLSeconds {
		return 0, errAt(place, "is too large, got %s (at most %d)", v.Value, maxTTLSeconds)
	}
	return time.Duration(n) * time.Second, nil
}
