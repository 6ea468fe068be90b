package main

import (
	"strings"
	"testing"
)

// Each command's help is its own: run -h lists the settings run reads, the ten most changed first; a subcommand's
// page has its own synopsis only; flags are written as the docs write them; -v prints the version.
func TestHelpPagesFit(t *testing.T) {
	help := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		return out
	}
	run := help("run", "-h")
	top, rest, ok := strings.Cut(run, "The others:")
	if !ok || !strings.Contains(top, "The ten most often changed:") || !strings.Contains(top, "DEDUPE_DEFAULT_TTL") ||
		!strings.Contains(rest, "DEDUPE_ACK_WAIT") || strings.Contains(run, "DEDUPE_INGEST_") {
		t.Errorf("run -h: not the settings run reads, grouped:\n%s", run)
	}
	if ingest := help("ingest", "-h"); !strings.Contains(ingest, "DEDUPE_INGEST_ADDR") || strings.Contains(ingest, "DEDUPE_ACK_WAIT") {
		t.Errorf("ingest -h: not the settings ingest reads:\n%s", ingest)
	}
	for _, c := range []struct {
		args       []string
		has, lacks []string
	}{
		{[]string{"run", "-h"}, []string{"-s, --server URL", "--context NAME", "--embedded"}, []string{"\n  -server", "\n  -context"}},
		{[]string{"window", "get", "-h"}, []string{"dedupeworker window get    --idempotency-key V", "--tenant VALUE"}, []string{"window ls", "window status"}},
		{[]string{"dlq", "rm", "-h"}, []string{"dedupeworker dlq rm", "removes the selected dead letters", "--yes"},
			[]string{"dlq replay [", "replay  publishes", "--force"}},
		{[]string{"dlq", "ls", "-h"}, []string{"dedupeworker dlq ls", "--limit N", "DEDUPE_CONSUMER.\n\n  --"}, []string{"dlq rm ", "\n\n\n"}},
	} {
		out := help(c.args...)
		for _, s := range c.has {
			if !strings.Contains(out, s) {
				t.Errorf("%v: lacks %q:\n%s", c.args, s, out)
			}
		}
		for _, s := range c.lacks {
			if strings.Contains(out, s) {
				t.Errorf("%v: has %q:\n%s", c.args, s, out)
			}
		}
	}
	if v := help("-v"); !strings.HasPrefix(v, "dedupeworker ") || !strings.Contains(v, "go\t") && !strings.Contains(v, "go  ") {
		t.Errorf("-v: %q", v)
	}
}

// A command's own page (window -h, dlq -h, help window) says its connection comes from "the flags below": it lists
// them, and says where each subcommand's other flags are (before: it listed no flag at all).
func TestGroupPagesListTheConnectionFlags(t *testing.T) {
	for _, args := range [][]string{{"window", "-h"}, {"dlq", "-h"}, {"help", "window"}, {"help", "dlq"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		cmd := args[0]
		if cmd == "help" {
			cmd = args[1]
		}
		for _, s := range []string{"the flags below", "\n  -s, --server URL", "\n  --context NAME", "\n  --creds FILE",
			"dedupeworker " + cmd + " SUBCOMMAND -h"} {
			if !strings.Contains(out, s) {
				t.Errorf("%v: lacks %q:\n%s", args, s, out)
			}
		}
	}
}
