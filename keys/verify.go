package keys

import (
	"fmt"
	"strconv"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// VerifySpec is a source's `verify:` block: how the webhook receiver (dedupeworker ingest) checks a request's
// signature. The worker itself never reads it. It names a scheme and its options, never a secret: secrets come
// from the receiver's environment or files, so that the sources file can live in a ConfigMap or a repository.
// docs/sources.md ("Verification per source") has examples.
type VerifySpec struct {
	// Scheme is github, stripe, standard_webhooks, svix, shopify, hmac or none. The receiver checks the name and
	// the options against what the scheme takes.
	Scheme string
	// Header, Algorithm, Encoding and Prefix configure the hmac scheme: the signature header, sha1/sha256/sha512,
	// hex or base64, and a prefix before the signature such as "sha256=".
	Header, Algorithm, Encoding, Prefix string
	// Tolerance is how far a signed timestamp may be from the receiver's clock (stripe, standard_webhooks, svix);
	// zero: the scheme's default.
	Tolerance time.Duration
	// ReplayGuard is the block's replay_guard option, ReplayGuardOn or ReplayGuardOff; "" when not set (the
	// receiver's default for the scheme). The receiver says which schemes take it.
	ReplayGuard string
	// Line is the line of the document the block is declared on (where "verify:" is written, counted from 1), so
	// that the receiver, which checks the scheme and its options, can point at it; 0 when not read from a document.
	Line int
}

// Source options the receiver reads: what to do with a request whose signature does not verify.
const (
	OnInvalidReject  = "reject"  // answer 401 and publish nothing (the default)
	OnInvalidForward = "forward" // publish it marked Ingest-Verified: false (the worker forwards it unkeyed)
)

// Values of VerifySpec.ReplayGuard.
const (
	ReplayGuardOn  = "on"
	ReplayGuardOff = "off"
)

const verifyFields = "scheme, header, algorithm, encoding, prefix, tolerance, replay_guard"

// parseVerify reads a verify block: a scheme name, or an object of verifyFields.
func parseVerify(place string, n *yaml.Node) (VerifySpec, error) {
	if isString(n) {
		if n.Value == "" {
			return VerifySpec{}, fmt.Errorf("%s: the scheme must not be empty", place)
		}
		return VerifySpec{Scheme: n.Value}, nil
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return VerifySpec{}, fmt.Errorf("%s: must be a scheme name or an object such as {scheme: github}, got %s", place, describe(n))
	}
	ms, perr := members(n, "", "field")
	if perr != nil {
		return VerifySpec{}, perr.at(place)
	}
	var v VerifySpec
	fields := map[string]*string{"scheme": &v.Scheme, "header": &v.Header, "algorithm": &v.Algorithm,
		"encoding": &v.Encoding, "prefix": &v.Prefix}
	for _, m := range ms {
		at := place + "." + m.name
		switch dst := fields[m.name]; {
		case m.name == "secret" || m.name == "secrets":
			return VerifySpec{}, fmt.Errorf("%s: %s", at, secretsNotHere)
		case m.name == "replay_guard":
			g, ok := parseSwitch(m.value)
			if !ok {
				return VerifySpec{}, fmt.Errorf("%s: must be on or off, got %s", at, describe(m.value))
			}
			v.ReplayGuard = g
		case !isString(m.value):
			return VerifySpec{}, fmt.Errorf("%s: must be a string, got %s", at, describe(m.value))
		case dst != nil:
			*dst = m.value.Value
		case m.name == "tolerance":
			d, err := time.ParseDuration(m.value.Value)
			if err != nil || d <= 0 {
				return VerifySpec{}, fmt.Errorf("%s: must be a positive duration such as 5m, got %s", at,
					shownDuration(m.value.Value))
			}
			v.Tolerance = d
		default:
			return VerifySpec{}, fmt.Errorf("%s: unknown field (valid: %s)", at, verifyFields)
		}
	}
	if v.Scheme == "" {
		return VerifySpec{}, fmt.Errorf("%s: scheme is required", place)
	}
	return v, nil
}

// parseSwitch reads on or off, also as YAML 1.1 and JSON write them (true, false).
func parseSwitch(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	switch n.Value {
	case "on", "true":
		return ReplayGuardOn, true
	case "off", "false":
		return ReplayGuardOff, true
	}
	return "", false
}

// parseOnInvalid reads a source's on_invalid option.
func parseOnInvalid(place string, n *yaml.Node) (string, error) {
	if !isString(n) || (n.Value != OnInvalidReject && n.Value != OnInvalidForward) {
		return "", fmt.Errorf("%s: must be %s or %s, got %s", place, OnInvalidReject, OnInvalidForward, describe(n))
	}
	return n.Value, nil
}

// shownDuration is a bad duration as an error shows it: quoted when it reads as one someone meant ("soon", "10
// minutes", "-5m": at most 16 characters of lower-case letters, digits, '.', '-' and spaces), else only its length,
// for a value longer or of other characters could be a secret pasted in the wrong place.
func shownDuration(s string) string {
	plain := s != "" && len(s) <= 16
	for _, c := range s {
		plain = plain && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ' ')
	}
	if plain {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%d characters (not shown: it could be a misplaced secret)", len(s))
}
