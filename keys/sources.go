package keys

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Sources is the parsed sources file: every declared source by id (its subject token).
type Sources struct {
	// Specs holds every declared source. A source that declares no dedupe maps to the zero Spec (and is listed in
	// WithoutDedupe too), so that a lookup can tell "declared without dedupe" from "not declared".
	Specs map[string]Spec
	// WithoutDedupe lists the ids of the sources that declare no dedupe, sorted.
	WithoutDedupe []string
	// Verify holds the `verify:` block of each source that declares one, and OnInvalid the `on_invalid:` option
	// of each source that sets it (OnInvalidReject or OnInvalidForward): for the webhook receiver; the worker
	// ignores both.
	Verify    map[string]VerifySpec
	OnInvalid map[string]string
	// Line is the line of the document each source is declared on (where its id is written, counted from 1), so
	// that an error about a source, such as the receiver's for one without a verify block, can point at it; nil
	// for PresetSources.
	Line map[string]int
}

// IDs returns the ids of all declared sources, sorted.
func (s Sources) IDs() []string {
	return slices.Sorted(maps.Keys(s.Specs))
}

// Lookup returns a source's spec and whether the source is declared. A source declared without dedupe returns the
// zero Spec and true.
func (s Sources) Lookup(id string) (Spec, bool) {
	spec, ok := s.Specs[id]
	return spec, ok
}

// PresetSources returns one source per preset, named after it (github, stripe, ...).
func PresetSources() Sources {
	s := Sources{Specs: make(map[string]Spec, len(presetNames))}
	for _, name := range presetNames {
		s.Specs[name] = Spec{presetSpec(name)}
	}
	return s
}

// secretsNotHere is the error of a secret written into the sources document, wherever it is: where they come from.
const secretsNotHere = "secrets are never read from the sources file: dedupeworker ingest reads each source's from " +
	"DEDUPE_INGEST_SECRET_<SOURCE> (the id in upper case, - as _) or from a file <source> or <tenant>.<source> in " +
	"DEDUPE_INGEST_SECRETS_DIR"

// LoadSources parses a sources file (YAML or JSON):
//
//	sources:
//	  github:  {dedupe: github}
//	  stripe:  {dedupe: {preset: stripe, ttl: 48h}}
//	  orders:  {dedupe: {json: data.order.id}}
//	  legacy:  {}
//
// An empty document, or `sources: {}`, has no sources; unknown fields are errors at every level.
func LoadSources(doc []byte) (Sources, error) {
	out := Sources{Specs: map[string]Spec{}, Verify: map[string]VerifySpec{}, OnInvalid: map[string]string{},
		Line: map[string]int{}}
	root, err := readDocument(doc)
	if err != nil {
		return Sources{}, fmt.Errorf("sources file: %v", syntaxErrorLine(doc, err))
	}
	if isNull(root) {
		return out, nil
	}
	if root.Kind != yaml.MappingNode {
		return Sources{}, fmt.Errorf("sources file: must be an object with a \"sources\" field, got %s", describe(root))
	}
	top, perr := members(root, "", "field")
	if perr != nil {
		return Sources{}, perr.at("sources file")
	}
	var list *yaml.Node
	for _, m := range top {
		if m.name != "sources" {
			return Sources{}, fmt.Errorf("sources file: unknown field %q (valid: sources)", m.name)
		}
		list = m.value
	}
	if isNull(list) {
		return out, nil
	}
	if list.Kind != yaml.MappingNode {
		return Sources{}, fmt.Errorf("sources: must be an object of source id to source, got %s", describe(list))
	}
	srcs, perr := members(list, "", "source")
	if perr != nil {
		return Sources{}, perr.at("sources")
	}
	for _, m := range srcs {
		if !ValidID(m.name) {
			return Sources{}, fmt.Errorf("line %d: sources.%s: invalid source id %q: "+
				"use 1-64 characters of A-Z, a-z, 0-9, _ and -", m.key.Line, m.name, m.name)
		}
		if err := out.add(m.name, m.key.Line, m.value); err != nil {
			return Sources{}, err
		}
	}
	slices.Sort(out.WithoutDedupe)
	return out, nil
}

// lineError is an error about a source, with the line of the document it is on: "line 7: sources.orders.dedupe.json:
// …", as the YAML syntax errors and the receiver's errors about verify blocks give theirs.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// add reads the source id declared on line idLine into s; an error about the source as a whole is on that line.
func (s *Sources) add(id string, idLine int, v *yaml.Node) error {
	place := "sources." + id
	var spec Spec // a source declared as {} or null has no dedupe
	if !isNull(v) {
		if v.Kind != yaml.MappingNode {
			err := fmt.Errorf("%s: must be an object such as {dedupe: github}, got %s", place, describe(v))
			return &lineError{idLine, err}
		}
		ms, perr := members(v, "", "field")
		if perr != nil {
			return &lineError{idLine, perr.at(place)}
		}
		for _, m := range ms {
			var err error
			switch m.name {
			case "dedupe":
				var perr *placeError
				if spec, perr = parseSpecNode(m.value); perr != nil {
					err = perr.at(place + ".dedupe")
				}
			case "verify":
				var vs VerifySpec
				if vs, err = parseVerify(place+".verify", m.value); err == nil {
					vs.Line = m.key.Line
					s.Verify[id] = vs
				}
			case "on_invalid":
				var oi string
				if oi, err = parseOnInvalid(place+".on_invalid", m.value); err == nil {
					s.OnInvalid[id] = oi
				}
			case "secret", "secrets":
				err = fmt.Errorf("%s.%s: %s", place, m.name, secretsNotHere)
			default:
				err = fmt.Errorf("%s: unknown field %q (valid: dedupe, verify, on_invalid)", place, m.name)
			}
			if err != nil {
				return &lineError{m.key.Line, err}
			}
		}
	}
	s.Specs[id] = spec
	s.Line[id] = idLine
	if !spec.Enabled() {
		s.WithoutDedupe = append(s.WithoutDedupe, id)
	}
	return nil
}

// syntaxErrorLine gives a YAML syntax error the line of the file it is on. The YAML library (go.yaml.in/yaml/v3)
// reports, for its parser's errors, the 0-based line of the construct it was parsing instead of the 1-based line of
// the fault ("  b: x" indented one space too far on line 6, in a mapping starting on line 5, reads "line 4: did not
// find expected key"), and no line at all on the first line. So the line is found again: the line whose addition
// makes a prefix of whole lines fail with the very same error, by bisection ('\n' ends a line, so CRLF counts once).
func syntaxErrorLine(doc []byte, err error) error {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "yaml: ")
	if !ok {
		return err // not the YAML library's syntax error ("more than one YAML document", ...)
	}
	from := 1
	if num, after, ok := strings.Cut(rest, ": "); ok && strings.HasPrefix(num, "line ") {
		if l, err := strconv.Atoi(num[len("line "):]); err == nil {
			// The reported line is at most the line at fault; prefixes that end before it cannot fail the same way.
			rest, from = after, max(1, l)
		}
	}
	var ends []int // ends[i] is the end of line i+1
	end := 0
	for line := range bytes.Lines(doc) {
		end += len(line)
		ends = append(ends, end)
	}
	same := func(line int) bool {
		perr := parseYAMLStream(doc[:ends[line-1]])
		return perr != nil && perr.Error() == msg
	}
	if from > len(ends) || !same(len(ends)) {
		return err
	}
	// The smallest line whose prefix fails the same way, the whole document being one such prefix.
	lo, hi := from, len(ends)
	for lo < hi {
		if mid := lo + (hi-lo)/2; same(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return fmt.Errorf("yaml: line %d: %s", lo, rest)
}

// parseYAMLStream parses every document of doc and returns the first error, as readDocument meets it.
func parseYAMLStream(doc []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
