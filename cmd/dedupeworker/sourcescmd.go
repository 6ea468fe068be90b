package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// sourcesOrigin is where a sources document comes from; its errors start with it: "DEDUPE_SOURCES_FILE
// /etc/x.yaml: …", "DEDUPE_SOURCES: …", or the FILE given to sources check.
type sourcesOrigin struct {
	variable string // DEDUPE_SOURCES_FILE or DEDUPE_SOURCES; "" for a FILE argument
	path     string // the file; "" for the inline DEDUPE_SOURCES
	inline   string // the document of DEDUPE_SOURCES
}

func (o sourcesOrigin) String() string {
	switch {
	case o.variable == "":
		return o.path
	case o.path == "":
		return o.variable
	}
	return o.variable + " " + o.path
}

// read reads and parses the document and, with verifyBlocks, checks its verify blocks as ingest reads them; errors
// name the origin, then the place in the document.
func (o sourcesOrigin) read(verifyBlocks bool) (keys.Sources, error) {
	doc := []byte(o.inline)
	if o.path != "" {
		b, err := os.ReadFile(o.path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is in the origin already
			}
			return keys.Sources{}, fmt.Errorf("%s: %w", o, err)
		}
		doc = b
	}
	src, err := keys.LoadSources(doc)
	if err != nil {
		// keys names the document's root "sources file"; the origin says which one it is.
		return keys.Sources{}, fmt.Errorf("%s: %s", o, strings.TrimPrefix(err.Error(), "sources file: "))
	}
	if verifyBlocks {
		if err := o.placeErrors(receiver.CheckVerify(src), true); err != nil {
			return keys.Sources{}, err
		}
	}
	return src, nil
}

// placeErrors words each error err joins as read's are: a *receiver.SourceError at its line and place in the
// document ("DEDUPE_SOURCES_FILE /etc/x.yaml: line 7: sources.orders.verify.algorithm: …"); any other after the
// origin with originOthers, else as it is (receiver.NewPolicy's errors about secrets name their variable or file).
func (o sourcesOrigin) placeErrors(err error, originOthers bool) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unwrapAll(err) {
		var se *receiver.SourceError
		switch {
		case errors.As(e, &se) && se.Line > 0:
			e = fmt.Errorf("%s: line %d: %s: %s", o, se.Line, se.Place, se.Reason)
		case se != nil:
			e = fmt.Errorf("%s: %s: %s", o, se.Place, se.Reason)
		case originOthers:
			e = fmt.Errorf("%s: %w", o, e)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// unwrapAll lists the errors an errors.Join holds, or err alone.
func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// configuredSources is where the settings say the sources document is; false: neither variable is set.
func configuredSources(cfg config.Config) (sourcesOrigin, bool) {
	switch {
	case cfg.SourcesFile != "":
		return sourcesOrigin{variable: "DEDUPE_SOURCES_FILE", path: cfg.SourcesFile}, true
	case cfg.Sources != "":
		return sourcesOrigin{variable: "DEDUPE_SOURCES", inline: cfg.Sources}, true
	}
	return sourcesOrigin{}, false
}

// loadSources reads the sources document from DEDUPE_SOURCES_FILE or DEDUPE_SOURCES; with verifyBlocks (ingest,
// which verifies deliveries by them; the worker ignores them) it checks the document's verify blocks too. With
// neither variable, or a document that declares no source at all, every preset becomes a source named after it.
func loadSources(cfg config.Config, verifyBlocks bool) (src keys.Sources, fromPresets bool, err error) {
	o, ok := configuredSources(cfg)
	if !ok {
		return keys.PresetSources(), true, nil
	}
	if src, err = o.read(verifyBlocks); err != nil {
		return keys.Sources{}, false, err
	}
	if len(src.Specs) == 0 {
		return keys.PresetSources(), true, nil
	}
	return src, false, nil
}

const sourcesUsage = `Usage: dedupeworker sources check [FILE]

Validates a sources file (FILE, else DEDUPE_SOURCES_FILE, else DEDUPE_SOURCES) as both the worker and
dedupeworker ingest read it, verify blocks included; prints each source with its resolved dedupe spec, TTL and
the verify scheme ingest checks its deliveries with; lists the sources without dedupe and those without a verify
block (which ingest refuses); and exits with status 2 and the boot error of the worker or of ingest when the
file is invalid. Secrets are not checked: they are not in the file. With no sources document at all (or one that
declares no source), it prints the presets: the sources the worker then declares, one per preset, named after it.
A source verified with a scheme that signs a timestamp (stripe, standard_webhooks, svix) whose TTL (its own,
else DEDUPE_DEFAULT_TTL) is shorter than twice its verify tolerance is refused, as ingest refuses it: a captured
delivery sent again after its claim expired would still verify. It warns about a verify/dedupe pair that leaves
verified deliveries unkeyed (a header key on stripe, whose deliveries carry their id in the body only), or keyed
on an unsigned header with the replay guard off (github, shopify, or hmac without replay_guard: on).

`

func runSources(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && isHelpArg(args[0]) {
			return helpText(sourcesUsage)
		}
		fmt.Fprint(stderr, sourcesUsage)
		return usageErr("sources: the only subcommand is check")
	}
	fs := newFlagSet("sources check", sourcesUsage)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	// The two variables alone, not config.Load: a file is checked whatever the other settings say.
	env := config.Config{SourcesFile: os.Getenv("DEDUPE_SOURCES_FILE"), Sources: os.Getenv("DEDUPE_SOURCES")}
	o, _ := configuredSources(env)
	switch {
	case fs.NArg() > 1:
		return usageErr("sources check: at most one FILE")
	case fs.NArg() == 1:
		o = sourcesOrigin{path: fs.Arg(0)}
	case env.SourcesFile != "" && env.Sources != "":
		return usageErr("config: DEDUPE_SOURCES: set either DEDUPE_SOURCES or DEDUPE_SOURCES_FILE, not both")
	}
	def := keys.DefaultTTL
	if v := os.Getenv("DEDUPE_DEFAULT_TTL"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	if o == (sourcesOrigin{}) {
		fmt.Fprintln(stdout, "no sources document (no FILE; DEDUPE_SOURCES_FILE and DEDUPE_SOURCES are unset): the worker declares one source per preset, named after it:")
		return writePresets(stdout, def)
	}
	src, err := o.read(true)
	if err == nil && len(src.Specs) > 0 {
		err = o.placeErrors(receiver.CheckTTL(src, false, def), false)
	}
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if len(src.Specs) == 0 {
		fmt.Fprintf(stdout, "%s: no source declared: the worker declares one source per preset, named after it:\n", o)
		return writePresets(stdout, def)
	}
	fmt.Fprintf(stdout, "%s: %d %s\n", o, len(src.Specs), plural(uint64(len(src.Specs)), "source", "sources"))
	if err := writeSources(stdout, src, false, def); err != nil {
		return err
	}
	for _, w := range receiver.KeyWarnings(src, false) {
		fmt.Fprintf(stdout, "warning: line %d: sources.%s: %s\n", w.Line, w.Source, w.Text)
	}
	if len(src.WithoutDedupe) > 0 {
		fmt.Fprintf(stdout, "sources without dedupe (every provider retry becomes a new event): %v\n", src.WithoutDedupe)
	}
	if unverified := slices.DeleteFunc(src.IDs(), func(id string) bool { _, ok := src.Verify[id]; return ok }); len(unverified) > 0 {
		fmt.Fprintf(stdout, "sources without a verify block (dedupeworker ingest refuses the file until each has one, verify: none for unsigned deliveries; the worker needs none): %v\n", unverified)
	}
	return nil
}

// writePresets prints the presets as sources (writeSources), then a warning for each timestamped preset whose TTL,
// def, is shorter than twice its tolerance: ingest refuses such a preset once it has a secret (receiver.CheckTTL).
func writePresets(w io.Writer, def time.Duration) error {
	if err := writeSources(w, keys.PresetSources(), true, def); err != nil {
		return err
	}
	if err := receiver.CheckTTL(keys.PresetSources(), true, def); err != nil {
		for _, e := range unwrapAll(err) {
			fmt.Fprintf(w, "warning: %s (dedupeworker ingest refuses the preset once it has a secret)\n", strings.TrimPrefix(e.Error(), "receiver: "))
		}
	}
	return nil
}

// writeSources prints one line per source: its id, resolved dedupe rule, TTL (marked when it is the default), and
// the verify scheme ingest checks its deliveries with ("-": none; for presets, once the source has a secret).
func writeSources(w io.Writer, src keys.Sources, fromPresets bool, def time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tDEDUPE\tTTL\tVERIFY")
	for _, id := range src.IDs() {
		verify := receiver.SchemeOf(src, id, fromPresets)
		switch {
		case verify == "":
			verify = "-"
		case verify != "none" && src.OnInvalid[id] == keys.OnInvalidForward:
			verify += ", on_invalid: forward"
		}
		s, _ := src.Lookup(id)
		if !s.Enabled() {
			fmt.Fprintf(tw, "%s\tnone\t-\t%s\n", id, verify)
			continue
		}
		ttl := formatTTL(s.TTL(def))
		if _, own := s.OwnTTL(); !own {
			ttl += " (default)" // DEDUPE_DEFAULT_TTL
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id, s.Rule(), ttl, verify)
	}
	return tw.Flush()
}

// formatTTL prints durations the way people write them in a sources file (72h, 90m, 45s).
func formatTTL(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return fmt.Sprintf("%ds", d/time.Second)
	}
}
