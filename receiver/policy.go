package receiver

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// PolicyConfig is what NewPolicy builds the verifiers from.
type PolicyConfig struct {
	// Sources are the declared sources (keys.LoadSources). Every one must have a verify block, `verify: none` to
	// accept unsigned deliveries, so that a source forgotten in the sources file is never open by default.
	Sources keys.Sources
	// FromPresets says that Sources are keys.PresetSources() (no sources document): each preset named after a
	// provider's scheme verifies with it once it has a secret; the others are not served. At least one must be.
	FromPresets bool
	// Secrets are the signing secrets (LoadSecrets); nil: none.
	Secrets *Secrets
	// Now is the clock signed timestamps are checked against; nil: time.Now.
	Now func() time.Time
	// DefaultTTL is the worker's TTL of sources that set none (DEDUPE_DEFAULT_TTL), for the replay guard and
	// MinTTL. Zero: keys.DefaultTTL.
	DefaultTTL time.Duration
}

// Policy says which requests the receiver serves and how each is verified: per source, one verifier for every
// tenant and one per tenant with secrets of its own. It is immutable and safe for concurrent use; formatting it
// never shows a secret.
type Policy struct {
	sources  map[string]*sourcePolicy // served sources
	declared map[string]bool          // every declared source, served or not: the metric label set
	unserved []Unserved
}

type sourcePolicy struct {
	info      SourceInfo
	forward   bool
	key       keyBinding
	protected []string                   // canonical names a client's Connection list never removes: read by the verifier or the key
	guard     bool                       // the replay guard records this source's verified bodies
	ttl       time.Duration              // the source's window TTL: how long the guard remembers a body
	all       verify.Verifier            // every tenant; nil: only the tenants below
	tenants   map[string]verify.Verifier // tenants with secrets of their own
}

// SourceInfo describes how one served source is verified, for the start-up log.
type SourceInfo struct {
	Source      string
	Scheme      string
	OnInvalid   string   // keys.OnInvalidReject or keys.OnInvalidForward
	AllTenant   bool     // every tenant is served (with the source's secrets, or scheme none)
	Tenants     []string // tenants with secrets of their own, sorted
	KeyHeader   string   // the header the source's key reads, when it is bound to the verified id
	ReplayGuard bool     // the replay guard records the source's verified bodies
}

// Unserved is a declared source the receiver answers 404 for, and why (preset sources without a secret).
type Unserved struct {
	Source, Reason string
}

// NewPolicy builds the verifier of every source and tenant, refusing a served source whose TTL is shorter than
// MinTTL. Errors (joined) name the source or its verify block, as a *SourceError, or the variable or file of a
// secret ("receiver: DEDUPE_INGEST_SECRET_GITHUB: secret 2: same as secret 1"); never a secret.
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	p := &Policy{sources: map[string]*sourcePolicy{}, declared: map[string]bool{}}
	ids := cfg.Sources.IDs()
	if len(ids) == 0 {
		return nil, errors.New("receiver: no source declared")
	}
	def := cfg.DefaultTTL
	if def <= 0 {
		def = keys.DefaultTTL
	}
	var errs []error
	for _, id := range ids {
		p.declared[id] = true
		vs, ok := verifySpec(cfg.Sources, id, cfg.FromPresets)
		switch {
		case !ok && cfg.FromPresets:
			const why = "no signature scheme of its own: declare it in a sources file with verify: none or hmac"
			if len(cfg.Secrets.forSource(id)) > 0 {
				errs = append(errs, fmt.Errorf("receiver: preset source %s has secrets but %s", id, why))
			} else {
				p.unserved = append(p.unserved, Unserved{id, why})
			}
			continue
		case !ok:
			errs = append(errs, &SourceError{Place: "sources." + id, Line: cfg.Sources.Line[id],
				Reason: "no verify block: declare how its deliveries are verified, verify: <scheme> (" +
					strings.Join(signedSchemes(), ", ") + ") or verify: none to accept unsigned deliveries"})
			continue
		}
		sp, err := buildSource(id, vs, cfg)
		if err == nil && sp != nil {
			err = ttlFault(sourcePlace(id, cfg.FromPresets), cfg.Sources.Line[id], vs, cfg.Sources.Specs[id], def)
			sp.bind(vs, cfg.Sources.OnInvalid[id], cfg.Sources.Specs[id], def)
		}
		switch {
		case err != nil:
			errs = append(errs, err)
		case sp == nil:
			p.unserved = append(p.unserved, Unserved{id, "no secret: set " + SecretEnv(id) + ", or put a file " + id +
				" (every tenant) or <tenant>." + id + " in the secrets directory"})
		default:
			p.sources[id] = sp
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(p.sources) == 0 {
		var vars []string
		for _, id := range ids {
			if isProviderScheme(id) {
				vars = append(vars, SecretEnv(id))
			}
		}
		return nil, fmt.Errorf("receiver: no source can be served: with no sources document each preset is a source, served once it has a secret "+
			"(set %s, or put files named after the sources in the secrets directory)", strings.Join(vars, ", "))
	}
	return p, nil
}

// bind sets what a built source's verify block, on_invalid option and dedupe spec say beside its verifiers.
func (sp *sourcePolicy) bind(vs keys.VerifySpec, onInvalid string, spec keys.Spec, def time.Duration) {
	sp.forward = onInvalid == keys.OnInvalidForward && vs.Scheme != verify.SchemeNone
	sp.key = newKeyBinding(vs.Scheme, spec)
	sp.protected = verify.ReadHeaders(verify.Config{Scheme: vs.Scheme, Header: vs.Header})
	if sp.key.header != "" {
		sp.protected = append(sp.protected, sp.key.header)
	}
	sp.guard = guarded(vs, spec)
	sp.ttl = spec.TTL(def)
	if sp.key.bind {
		sp.info.KeyHeader = sp.key.header
	}
	sp.info.ReplayGuard = sp.guard
	sp.info.OnInvalid = keys.OnInvalidReject
	if sp.forward {
		sp.info.OnInvalid = keys.OnInvalidForward
	}
}

// SourceError is a fault of a declared source, for the caller to name its file and line: Place is where in the
// document ("sources.orders.verify.algorithm"; "preset source github" with no document), Line the line of the
// verify block or else of the source (0 when unknown), Reason what is wrong, never a value that could be a
// misplaced secret.
type SourceError struct {
	Place  string
	Line   int
	Reason string
}

func (e *SourceError) Error() string { return "receiver: " + e.Place + ": " + e.Reason }

// CheckVerify checks every verify block of a sources document as NewPolicy does before it looks at the secrets,
// for `dedupeworker sources check`. Sources without a block are not its concern (the worker needs none). The
// errors, one per faulty source in the order of Sources.IDs, are *SourceError, joined.
func CheckVerify(src keys.Sources) error {
	var errs []error
	for _, id := range src.IDs() {
		if vs, ok := src.Verify[id]; ok {
			if err := checkBlock("sources."+id+".verify", vs); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// checkBlock is CheckVerify of one block; nil or a *SourceError.
func checkBlock(place string, vs keys.VerifySpec) error {
	if vs.ReplayGuard != "" && !verify.BodyOnly(vs.Scheme) && isScheme(vs.Scheme) {
		return &SourceError{Place: place + ".replay_guard", Line: vs.Line, Reason: "only for the schemes whose signature covers the body alone (" +
			verify.SchemeGitHub + ", " + verify.SchemeShopify + ", " + verify.SchemeHMAC + "): scheme " + vs.Scheme + " needs none"}
	}
	if err := verify.Check(verifyConfig(vs)); err != nil {
		return configErr(place, vs.Line, err)
	}
	return nil
}

// verifyConfig is the verify.Config of a verify block, without secrets.
func verifyConfig(vs keys.VerifySpec) verify.Config {
	return verify.Config{Scheme: vs.Scheme, Header: vs.Header, Algorithm: vs.Algorithm, Encoding: vs.Encoding,
		Prefix: vs.Prefix, Tolerance: vs.Tolerance}
}

// guarded reports whether the replay guard records a source's verified bodies: for a key read from a header when
// the scheme signs the body alone — by default for github and shopify, for hmac when its block says replay_guard:
// on — unless the block says replay_guard: off.
func guarded(vs keys.VerifySpec, spec keys.Spec) bool {
	if spec.Kind() != keys.KindHeader || !verify.BodyOnly(vs.Scheme) {
		return false
	}
	switch vs.ReplayGuard {
	case keys.ReplayGuardOn:
		return true
	case keys.ReplayGuardOff:
		return false
	}
	return vs.Scheme != verify.SchemeHMAC
}

// Guarded lists the served sources whose verified bodies the replay guard records, sorted: the receiver needs a
// Config.Window for them.
func (p *Policy) Guarded() []string {
	return slices.DeleteFunc(sortedKeys(p.sources), func(id string) bool { return !p.sources[id].guard })
}

// GuardTTL is the longest time the replay guard remembers a body of a guarded source (its dedupe TTL): the
// TTL its bucket must be able to hold (kvwindow.Config.MaxTTL). Zero when no source is guarded.
func (p *Policy) GuardTTL() time.Duration {
	var ttl time.Duration
	for _, sp := range p.sources {
		if sp.guard {
			ttl = max(ttl, sp.ttl)
		}
	}
	return ttl
}

// SchemeOf is the scheme ingest verifies a source's deliveries with ("" when none): its verify block's, or with
// no sources document (fromPresets) the preset's own where it is a provider's scheme.
func SchemeOf(src keys.Sources, id string, fromPresets bool) string {
	vs, _ := verifySpec(src, id, fromPresets)
	return vs.Scheme
}

// verifySpec is the verify block SchemeOf reads; false when there is none.
func verifySpec(src keys.Sources, id string, fromPresets bool) (keys.VerifySpec, bool) {
	if !fromPresets {
		vs, ok := src.Verify[id]
		return vs, ok
	}
	if !isProviderScheme(id) {
		return keys.VerifySpec{}, false
	}
	return keys.VerifySpec{Scheme: id}, true
}

// buildSource builds one source's verifiers; nil without error when a preset source has no secret.
func buildSource(id string, vs keys.VerifySpec, cfg PolicyConfig) (*sourcePolicy, error) {
	place := sourcePlace(id, cfg.FromPresets)
	if !cfg.FromPresets {
		place += ".verify"
	}
	// The block first: a misspelt scheme or option is the fault to report, whatever the secrets.
	if err := checkBlock(place, vs); err != nil {
		return nil, err
	}
	base := verifyConfig(vs)
	base.Now = cfg.Now
	scopes := cfg.Secrets.forSource(id)
	sp := &sourcePolicy{info: SourceInfo{Source: id, Scheme: vs.Scheme}}
	switch {
	case vs.Scheme == verify.SchemeNone && len(scopes) > 0:
		return nil, &SourceError{Place: place, Line: vs.Line,
			Reason: "scheme none takes no secrets, but " + cfg.Secrets.sets[scopes[0]].origin + " gives some: remove them or choose a scheme"}
	case vs.Scheme == verify.SchemeNone:
		v, err := verify.New(base)
		if err != nil {
			return nil, configErr(place, vs.Line, err)
		}
		sp.all, sp.info.AllTenant = v, true
		return sp, nil
	case len(scopes) == 0 && cfg.FromPresets:
		return nil, nil
	case len(scopes) == 0:
		return nil, &SourceError{Place: place, Line: vs.Line, Reason: fmt.Sprintf(
			"scheme %s needs a secret: set %s, or put a file %s (every tenant) or <tenant>.%s in the secrets directory",
			vs.Scheme, SecretEnv(id), id, id)}
	}
	sp.tenants = map[string]verify.Verifier{}
	var errs []error
	for _, sc := range scopes { // every tenant ("") first
		set := cfg.Secrets.sets[sc]
		c := base
		c.Secrets = set.values
		v, err := verify.New(c)
		var fe *verify.FieldError
		switch {
		case errors.As(err, &fe) && strings.HasPrefix(fe.Field, "secrets"):
			errs = append(errs, fmt.Errorf("receiver: %s: %s: %s", set.origin, secretField(fe.Field), secretField(fe.Reason)))
			continue
		case err != nil:
			return nil, configErr(place, vs.Line, err) // the verify block itself: once is enough
		}
		if sc.tenant == "" {
			sp.all, sp.info.AllTenant = v, true
			continue
		}
		sp.tenants[sc.tenant] = v
		sp.info.Tenants = append(sp.info.Tenants, sc.tenant)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return sp, nil
}

// configErr places a verify error about the verify block: "receiver: sources.x.verify.tolerance: negative".
func configErr(place string, line int, err error) error {
	if fe, ok := errors.AsType[*verify.FieldError](err); ok {
		return &SourceError{Place: place + "." + fe.Field, Line: line, Reason: fe.Reason}
	}
	return &SourceError{Place: place, Line: line, Reason: err.Error()}
}

var secretIndex = regexp.MustCompile(`secrets\[(\d+)\]`)

// secretField turns verify's "secrets[1]" into "secret 2", counting as a person reads a file or a list.
func secretField(s string) string {
	return secretIndex.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(secretIndex.FindStringSubmatch(m)[1])
		return "secret " + strconv.Itoa(n+1)
	})
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func isScheme(name string) bool { return slices.Contains(verify.Schemes(), name) }

// isProviderScheme reports whether name is both a preset and a provider's own scheme (not hmac, not none).
func isProviderScheme(name string) bool {
	return name != verify.SchemeHMAC && name != verify.SchemeNone && isScheme(name)
}

// signedSchemes are the schemes that check a signature.
func signedSchemes() []string {
	return slices.DeleteFunc(verify.Schemes(), func(s string) bool { return s == verify.SchemeNone })
}

// lookup returns a delivery's source and its verifier, or nil when the receiver does not serve it (404). A tenant
// with secrets of its own is verified with those only.
func (p *Policy) lookup(tenant, source string) (*sourcePolicy, verify.Verifier) {
	sp := p.sources[source]
	if sp == nil {
		return nil, nil
	}
	if v, ok := sp.tenants[tenant]; ok {
		return sp, v
	}
	if sp.all == nil {
		return nil, nil
	}
	return sp, sp.all
}

// Sources describes every served source, sorted by id.
func (p *Policy) Sources() []SourceInfo {
	out := make([]SourceInfo, 0, len(p.sources))
	for _, id := range sortedKeys(p.sources) {
		info := p.sources[id].info
		info.Tenants = slices.Clone(info.Tenants)
		out = append(out, info)
	}
	return out
}

// Unserved lists the declared sources that are not served, and why.
func (p *Policy) Unserved() []Unserved { return slices.Clone(p.unserved) }

// label is a source's metric label: "other" when undeclared, so that a client cannot grow the label set.
func (p *Policy) label(source string) string {
	if p.declared[source] {
		return source
	}
	return otherSource
}

// Format prints String for every verb, of a Policy and of a pointer to one: the verifiers hold keys.
func (p Policy) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// String describes the policy: each served source with its scheme, option and tenants.
func (p *Policy) String() string {
	var parts []string
	for _, s := range p.Sources() {
		who := "every tenant"
		if len(s.Tenants) > 0 {
			who = "tenants " + strings.Join(s.Tenants, ",")
			if s.AllTenant {
				who = "every tenant; own secrets: " + strings.Join(s.Tenants, ",")
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %s, on_invalid %s, %s", s.Source, s.Scheme, s.OnInvalid, who))
	}
	return strings.Join(parts, "; ")
}
