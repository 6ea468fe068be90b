package keys

import "slices"

// Presets returns the preset names, sorted.
func Presets() []string { return slices.Clone(presetNames) }

// Preset returns the preset the spec names, or "".
func (s Spec) Preset() string { return s.get().preset }

// JSONPath returns the path of a json source, as written.
func (s Spec) JSONPath() string { return s.get().jsonPath }

// PayloadPaths returns the only / except path lists of a payload source (copies; nil when not given).
func (s Spec) PayloadPaths() (only, except []string) {
	return slices.Clone(s.get().only), slices.Clone(s.get().except)
}
