package keys

import (
	"fmt"
	"sort"

	yaml "go.yaml.in/yaml/v3"
)

// Sources is the parsed sources file: every declared source by id (its subject token).
type Sources struct {
	// Specs holds every declared source. A source that declares no dedupe maps to the zero Spec (and is listed in
	// WithoutDedupe too), so that a lookup can tell "declared without dedupe" from "not declared".
	Specs map[string]Spec
	// WithoutDedupe lists the ids of the sources that declare no dedupe, sorted.
	WithoutDedupe []string
}

// IDs returns the ids of all declared sources, sorted.
func (s Sources) IDs() []string {
	ids := make([]string, 0, len(s.Specs))
	for id := range s.Specs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
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

// LoadSources parses a sources file (YAML or JSON):
//
//	sources:
//	  github:  {dedupe: github}
//	  stripe:  {dedupe: {preset: stripe, ttl: 48h}}
//	  orders:  {dedupe: {json: data.order.id}}
//	  legacy:  {}
//
// An empty document, or `sources: {}`, has no sources. Errors name the place at fault, such as
// `sources.orders.dedupe.json: segment 2 is empty in "data..id"`; unknown fields are errors at every level.
func LoadSources(doc []byte) (Sources, error) {
	out := Sources{Specs: map[string]Spec{}}
	root, err := readDocument(doc)
	if err != nil {
		return Sources{}, fmt.Errorf("sources file: %v", err)
	}
	if isNull(root) {
		return out, nil
	}
	if root.Kind != yaml.MappingNode {
		return Sources{}, fmt.Errorf("sources file: must be an object with a \"sources\" field, got %s", describe(root))
	}
	top, perr := members(root, "", "field")
	if perr != nil {
		return Sources{}, fmt.Errorf("sources file: %s", perr.msg)
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
		return Sources{}, fmt.Errorf("sources: %s", perr.msg)
	}
	for _, m := range srcs {
		id, place := m.name, "sources."+m.name
		if !ValidID(id) {
			return Sources{}, fmt.Errorf("%s: invalid source id %q: use 1-64 characters of A-Z, a-z, 0-9, _ and -", place, id)
		}
		spec, err := loadSource(place, m.value)
		if err != nil {
			return Sources{}, err
		}
		out.Specs[id] = spec
		if !spec.Enabled() {
			out.WithoutDedupe = append(out.WithoutDedupe, id)
		}
	}
	sort.Strings(out.WithoutDedupe)
	return out, nil
}

func loadSource(place string, v *yaml.Node) (Spec, error) {
	if isNull(v) {
		return Spec{}, nil
	}
	if v.Kind != yaml.MappingNode {
		return Spec{}, fmt.Errorf("%s: must be an object such as {dedupe: github}, got %s", place, describe(v))
	}
	ms, perr := members(v, "", "field")
	if perr != nil {
		return Spec{}, fmt.Errorf("%s: %s", place, perr.msg)
	}
	var spec Spec
	for _, m := range ms {
		if m.name != "dedupe" {
			return Spec{}, fmt.Errorf("%s: unknown field %q (valid: dedupe)", place, m.name)
		}
		spec, perr = parseSpecNode(m.value)
		if perr != nil {
			return Spec{}, perr.at(place + ".dedupe")
		}
	}
	return spec, nil
}
