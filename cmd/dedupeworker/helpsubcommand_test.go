package main

import (
	"strings"
	"testing"
)

// `help CMD SUB` is `CMD SUB -h`: the subcommand's own page with its flags, as docs/reference.md says of both forms.
func TestHelpNamesASubcommand(t *testing.T) {
	for _, sub := range [][]string{{"window", "get"}, {"window", "forget"}, {"dlq", "rm"}, {"dlq", "replay"}, {"sources", "check"}} {
		code, want, _ := runCLI(t, "", append(sub, "-h")...)
		if code != 0 {
			t.Fatalf("%v -h: exit %d", sub, code)
		}
		code, got, errOut := runCLI(t, "", append([]string{"help"}, sub...)...)
		if code != 0 || errOut != "" || got != want {
			t.Errorf("help %v: exit %d, stderr %q\n%s\nwant what %v -h prints:\n%s", sub, code, errOut, got, sub, want)
		}
	}
	// An unknown subcommand is the usage error the command itself gives.
	code, out, errOut := runCLI(t, "", "help", "window", "nope")
	if code != 2 || out != "" || errOut != "window nope: unknown subcommand \"nope\" (get, ls, status, rebalance or forget)\n" {
		t.Errorf("help window nope: exit %d, %q, %q", code, out, errOut)
	}
}

// The pages of the commands with subcommands read on an 80-to-120-column terminal: no line of prose is wider than
// the rest of the page (flag lines are printed by the flag package, one per flag).
func TestSubcommandPagesFitTheirWidth(t *testing.T) {
	for _, page := range [][]string{
		{"window"}, {"window", "get"}, {"window", "ls"}, {"window", "forget"}, {"window", "status"},
		{"window", "rebalance"}, {"dlq"}, {"dlq", "ls"}, {"dlq", "show"}, {"dlq", "replay"}, {"dlq", "rm"},
		{"sources"}, {"sources", "check"},
	} {
		_, out, _ := runCLI(t, "", append(page, "-h")...)
		for i, line := range strings.Split(out, "\n") {
			if len(line) > 118 && !strings.HasPrefix(line, "  -") {
				t.Errorf("%v -h line %d is %d wide: %q", page, i+1, len(line), line)
			}
		}
	}
}
