package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dedupeworker/dedupeworker/hashing"
	"github.com/dedupeworker/dedupeworker/keys"
)

const keyUsage = `Usage: dedupeworker key --dedupe SPEC [--tenant T] [--source S] [-H 'Name: value']... [--max-json-bytes N] [--body FILE]

Prints the event key a delivery would get, as one JSON object:
  {"key": "...", "idempotency_key": "tenant:source:key"}   or   {"key": null, "reason": "missing"}
SPEC is a dedupe spec in YAML or JSON: github, '{"json":"data.id"}', '{payload: {except: [.ts]}}'.
The body is read from --body FILE, or from standard input when it is absent or "-".

`

func runKey(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := newFlagSet("key", keyUsage)
	spec := fs.String("dedupe", "", "dedupe spec (YAML or JSON)")
	tenant := fs.String("tenant", "default", "tenant id")
	source := fs.String("source", "default", "source id")
	maxJSON := fs.Int("max-json-bytes", keys.DefaultMaxJSONBytes, "largest body read for json and payload keys")
	bodyFile := fs.String("body", "-", "file holding the request body; - for standard input")
	var headers listFlag
	fs.Var(&headers, "H", "request header 'Name: value' (repeatable, in order)")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *spec == "" {
		return usageErr("key: --dedupe is required")
	}
	s, err := keys.ParseSpec([]byte(*spec))
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := checkIDs("key", *tenant, *source, false); err != nil {
		return err
	}
	if *maxJSON < 1 {
		return usageErr("key: --max-json-bytes: must be positive, got %d", *maxJSON)
	}
	var hl keys.HeaderList
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return usageErr("key: -H %q: must be 'Name: value'", h)
		}
		// Like curl, the blanks after the colon separate name and value; the value itself is kept as typed.
		hl = append(hl, keys.Header{Name: strings.TrimSpace(name), Value: strings.TrimLeft(value, " \t")})
	}
	body, err := readInput(*bodyFile, stdin)
	if err != nil {
		return failErr(fmt.Errorf("key: %w", err))
	}
	key, reason := keys.Extractor{MaxJSONBytes: *maxJSON}.Extract(s, hl, body)
	if reason != keys.ReasonNone {
		return writeJSON(stdout, map[string]any{"key": nil, "reason": reason})
	}
	return writeJSON(stdout, struct {
		Key            string `json:"key"`
		IdempotencyKey string `json:"idempotency_key"`
	}{key, keys.IdempotencyHeader(*tenant, *source, key)})
}

const hashUsage = `Usage: dedupeworker hash [--only PATH]... [--except PATH]... [--type TYPE] [--canonical] [FILE]

Prints the canonical payload digest of a JSON document (byte-compatible with zizq-elixir's payload hasher):
the bare digest, or TYPE:DIGEST with --type. --canonical prints the canonical stream instead of hashing it.
The document is read from FILE, or from standard input when it is absent or "-".
Exit status: 2 for a bad path or flag, 1 for invalid JSON.

`

func runHash(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := newFlagSet("hash", hashUsage)
	var only, except listFlag
	fs.Var(&only, "only", "keep only this path (repeatable)")
	fs.Var(&except, "except", "remove this path (repeatable)")
	typ := fs.String("type", "", "print TYPE:DIGEST")
	canonical := fs.Bool("canonical", false, "print the canonical stream instead of its digest")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageErr("hash: at most one FILE, got %d arguments", fs.NArg())
	}
	prefix := *typ != ""
	h, err := hashing.New(hashing.Options{Only: only, Except: except, Prefix: &prefix})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	in, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		return failErr(fmt.Errorf("hash: %w", err))
	}
	if *canonical {
		var sb strings.Builder
		if err := h.Canonical(&sb, in); err != nil {
			return failErr(err)
		}
		_, err := fmt.Fprintln(stdout, sb.String())
		return err
	}
	out, err := h.Key(*typ, in) // the bare digest without --type: Prefix is off
	if err != nil {
		return failErr(err)
	}
	_, err = fmt.Fprintln(stdout, out)
	return err
}

// checkIDs checks --tenant and --source (each may be empty when optional) as cmd's usage error.
func checkIDs(cmd, tenant, source string, optional bool) error {
	for _, id := range [][2]string{{"--tenant", tenant}, {"--source", source}} {
		if (id[1] != "" || !optional) && !keys.ValidID(id[1]) {
			return usageErr("%s: %s %q: must be 1-64 characters of [A-Za-z0-9_-]", cmd, id[0], id[1])
		}
	}
	return nil
}

// readInput reads a whole file, or standard input for "" and "-".
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "" || path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
