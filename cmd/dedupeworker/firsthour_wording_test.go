package main

import (
	"strings"
	"testing"
)

// sources check counts one source in the singular.
func TestSourcesCheckCountsOneSource(t *testing.T) {
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", "sources:\n  github: {dedupe: github}\n")
	code, out, errOut := runCLI(t, "", "sources", "check")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	if first, _, _ := strings.Cut(out, "\n"); !strings.HasSuffix(first, ": 1 source") {
		t.Errorf("first line %q, want it to end in \": 1 source\"", first)
	}
}

// window get -h lists the flags get takes; --all and --yes are forget's alone.
func TestWindowHelpListsOnlyItsFlags(t *testing.T) {
	_, get, _ := runCLI(t, "", "window", "get", "-h")
	_, forget, _ := runCLI(t, "", "window", "forget", "-h")
	for _, f := range []string{"--all", "--yes"} {
		if strings.Contains(get, f) {
			t.Errorf("window get -h lists %s:\n%s", f, get)
		}
		if !strings.Contains(forget, f) {
			t.Errorf("window forget -h lacks %s:\n%s", f, forget)
		}
	}
}

// A flag given a bad value is named as the docs write it (--timeout, not -timeout), once, with what it wants: a
// duration without its unit said only "parse error".
func TestBadFlagValueSaysWhatItWants(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"window", "status", "--timeout", "5"},
			`window status: --timeout "5": not a duration: give it with its unit, e.g. 5s, 2m or 1h30m (see 'dedupeworker window status -h')`},
		{[]string{"window", "ls", "--tenant", "a", "--limit", "x"},
			`window ls: --limit "x": not a whole number (see 'dedupeworker window ls -h')`},
		{[]string{"dlq", "ls", "--reason", "nope"},
			`dlq ls: --reason "nope": not a dead-letter reason (bad-subject, bad-tenant, bad-source, bad-claim, output-reject, control-header) (see 'dedupeworker dlq ls -h')`},
		{[]string{"dlq", "ls", "--seq", "3-1"},
			`dlq ls: --seq "3-1": the range ends before it starts (see 'dedupeworker dlq ls -h')`},
		{[]string{"dlq", "rm", "--yes=maybe"},
			`dlq rm: --yes "maybe": not true or false: give --yes alone, or --yes=true or --yes=false (see 'dedupeworker dlq rm -h')`},
		{[]string{"window", "status", "--timeout"},
			`window status: --timeout needs a value (see 'dedupeworker window status -h')`},
		{[]string{"window", "ls", "--tenant", "a", "--from", "-1"},
			`window ls: --from "-1": not a whole number, 0 or more (see 'dedupeworker window ls -h')`},
	} {
		code, out, errOut := runCLI(t, "", c.args...)
		if code != 2 || out != "" || strings.TrimSpace(errOut) != c.want {
			t.Errorf("%v: exit %d, stdout %q\nstderr %q\nwant   %q", c.args, code, out, strings.TrimSpace(errOut), c.want)
		}
	}
}

// sources check states each source's TTL once, the one in force: DEDUPE_DEFAULT_TTL for a source that sets none
// (the rule column said "ttl 72h" beside a TTL column of 24h), marked as the default.
func TestSourcesCheckStatesTheTTLOnce(t *testing.T) {
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", "sources:\n  github: {dedupe: github, verify: github}\n  stripe: {dedupe: {preset: stripe, ttl: 48h}, verify: stripe}\n")
	t.Setenv("DEDUPE_DEFAULT_TTL", "24h")
	code, out, errOut := runCLI(t, "", "sources", "check")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	for _, want := range []string{
		"github  header X-GitHub-Delivery (preset github)  24h (default)  github\n",
		"stripe  json id (preset stripe)                   48h            stripe\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ttl ") {
		t.Errorf("a TTL stated twice:\n%s", out)
	}
}
