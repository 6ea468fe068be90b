package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Help is what was asked for: `help CMD` and `CMD -h` print it on standard output and exit 0, for every command,
// including those with subcommands; errors stay on standard error, one line.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{
		{"help", "key"}, {"key", "-h"}, {"key", "--tenant", "acme", "-h"}, {"hash", "--help"},
		{"help", "run"}, {"run", "-h"},
		{"help", "window"}, {"window", "-h"}, {"window", "get", "-h"}, {"window", "ls", "-h"},
		{"help", "sources"}, {"sources", "-h"}, {"sources", "check", "-h"},
		{"help", "dlq"}, {"dlq", "-h"},
		{"help", "version"}, {"version", "-h"},
	} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(out, "Usage") || errOut != "" {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", args, code, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"key", "--nope"}, "key: flag provided but not defined: -nope (see 'dedupeworker key -h')"},
		{[]string{"window", "get", "--nope"}, "window get: flag provided but not defined: -nope (see 'dedupeworker window get -h')"},
		{[]string{"version", "extra"}, `version: unexpected argument "extra"`},
		{[]string{"help", "frobnicate"}, `dedupeworker: unknown command "frobnicate" (run 'dedupeworker help')`},
	} {
		code, out, errOut := runCLI(t, "", c.args...)
		if code != 2 || out != "" || strings.TrimSpace(errOut) != c.want {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant   %q", c.args, code, out, errOut, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, help, _ := runCLI(t, "", "help")
	if code != 0 || !strings.Contains(help, "dedupeworker version ") {
		t.Fatalf("help does not list version:\n%s", help)
	}
	// A test binary has no VCS stamp: what is unknown says so.
	code, out, errOut := runCLI(t, "", "version")
	if code != 0 || errOut != "" {
		t.Fatalf("version: exit %d, %q", code, errOut)
	}
	for _, want := range []string{"dedupeworker ", "\nrevision ", "\ntime ", "\nmodified ", "\ngo        " + runtime.Version() + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	// What -ldflags -X sets (the Docker build) is reported.
	defer func(v, r, tm string) { buildVersion, buildRevision, buildTime = v, r, tm }(buildVersion, buildRevision, buildTime)
	buildVersion, buildRevision, buildTime = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	_, out, _ = runCLI(t, "", "--version")
	want := "dedupeworker v1.2.3\nrevision  0123456789abcdef0123456789abcdef01234567\ntime      2026-01-02T03:04:05Z\nmodified  unknown\ngo        " + runtime.Version() + "\n"
	if out != want {
		t.Fatalf("version:\n%s\nwant:\n%s", out, want)
	}
}

// With no sources document, `sources check` prints the presets the worker would declare, and says so.
func TestSourcesCheckShowsPresets(t *testing.T) {
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", "")
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("# nothing yet\nsources: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"sources", "check"}, "no sources document (no FILE; DEDUPE_SOURCES_FILE and DEDUPE_SOURCES are unset): the worker declares one source per preset, named after it:"},
		{[]string{"sources", "check", empty}, empty + ": no source declared: the worker declares one source per preset, named after it:"},
	} {
		code, out, errOut := runCLI(t, "", c.args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d, %q", c.args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if lines[0] != c.first {
			t.Errorf("%v: first line %q, want %q", c.args, lines[0], c.first)
		}
		for _, want := range []string{"github  ", "stripe  ", "shopify  ", "svix  ", "standard_webhooks  ", "salesforce  "} {
			if !strings.Contains(out, "\n"+want) {
				t.Errorf("%v: no line for preset %q:\n%s", c.args, want, out)
			}
		}
		if len(lines) != 2+6 {
			t.Errorf("%v: %d lines, want a header and 6 presets:\n%s", c.args, len(lines), out)
		}
	}
}

// A bad sources document stops the worker naming the variable, the file and the place in it; `sources check`
// gives the same error. YAML syntax errors name the line of the file.
func TestSourcesErrorsNameTheirOrigin(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	syntax := filepath.Join(dir, "syntax.yaml")
	os.WriteFile(bad, []byte("sources:\n  orders: {dedupe: {json: data..id}}\n"), 0o600)
	os.WriteFile(syntax, []byte("# acme\nsources:\n  github: {dedupe: github}\n   stripe: {dedupe: stripe}\n"), 0o600)
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	for _, c := range []struct {
		name, file, inline string
		args               []string
		want               string
	}{
		{"file at boot", bad, "", []string{"run"},
			"DEDUPE_SOURCES_FILE " + bad + `: line 2: sources.orders.dedupe.json: segment 2 is empty in "data..id"`},
		{"inline at boot", "", "sources:\n  orders: {dedupe: {json: data..id}}\n", []string{"run"},
			`DEDUPE_SOURCES: line 2: sources.orders.dedupe.json: segment 2 is empty in "data..id"`},
		{"syntax at boot", syntax, "", []string{"run"},
			"DEDUPE_SOURCES_FILE " + syntax + ": yaml: line 4: did not find expected key"},
		{"root error inline", "", "source: {}", []string{"run"},
			`DEDUPE_SOURCES: unknown field "source" (valid: sources)`},
		{"check from the variable", syntax, "", []string{"sources", "check"},
			"DEDUPE_SOURCES_FILE " + syntax + ": yaml: line 4: did not find expected key"},
		{"check of a FILE", "", "", []string{"sources", "check", syntax},
			syntax + ": yaml: line 4: did not find expected key"},
		{"check of a missing FILE", "", "", []string{"sources", "check", filepath.Join(dir, "nope.yaml")},
			filepath.Join(dir, "nope.yaml") + ": no such file or directory"},
	} {
		t.Setenv("DEDUPE_SOURCES_FILE", c.file)
		t.Setenv("DEDUPE_SOURCES", c.inline)
		code, out, errOut := runCLI(t, "", c.args...)
		c.want = strings.Join(c.args[:min(2, len(c.args))], " ") + ": " + c.want
		if code != 2 || out != "" || strings.TrimSpace(errOut) != c.want {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant   %q", c.name, code, out, errOut, c.want)
		}
	}
}

// Every way of asking for the root help exits 0 with the root usage on standard output, and asking for help about
// help is asking for help. Before the fix `help -h`, `help help`, `help --help`, `-h -h` and `--help help` recursed
// in run until the goroutine stack overflowed (a 356-line crash).
func TestHelpForms(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"-help"}, {"--help"},
		{"help", "-h"}, {"help", "help"}, {"help", "--help"}, {"-h", "-h"}, {"--help", "help"}, {"-h", "help"},
		{"help", "help", "help"}, {"help", "-h", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, "", args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "dedupeworker turns a JetStream stream") {
				t.Errorf("%v: exit %d\nstdout %.200q\nstderr %q", args, code, out, errOut)
			}
		})
	}
}

// The root usage names every command and subcommand a user can run.
func TestHelpListsEveryCommand(t *testing.T) {
	_, out, _ := runCLI(t, "", "help")
	for _, want := range []string{
		"dedupeworker [run]", "dedupeworker key ", "dedupeworker hash ",
		"dedupeworker window get|forget|ls|status|rebalance", "dedupeworker dlq ls|show|replay",
		"dedupeworker sources check", "dedupeworker ingest", "dedupeworker help", "dedupeworker version",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("root usage lacks %q:\n%s", want, out)
		}
	}
}
