package main

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

// JSON logs write durations as Go writes them, at any depth; tint and logfmt already do.
func TestLogDurationsAsText(t *testing.T) {
	for format, want := range map[string]string{
		"json": `"wait":"250ms","g":{"ttl":"72h0m0s"}`,
		"text": `wait=250ms g.ttl=72h0m0s`,
		"tint": `wait=250ms g.ttl=72h0m0s`,
	} {
		var b bytes.Buffer
		newLogger(&b, "info", format).Info("x", "wait", 250*time.Millisecond, slog.Group("g", "ttl", 72*time.Hour))
		if !strings.Contains(plain(b.String()), want) {
			t.Errorf("%s: %q lacks %q", format, b.String(), want)
		}
	}
}

// For a person (tint), the boot line carries only the settings that differ from their defaults, redacted; with
// none, settings=defaults. For machines (JSON, logfmt) it carries the whole configuration.
func TestStartAttrs(t *testing.T) {
	var def config.Config
	if err := envconfig.Process("DEDUPEWORKER_DEFAULTS_ONLY", &def); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tint := newLogger(&b, "info", "tint")
	tint.Info("starting dedupeworker", startAttrs(tint, def)...)
	if got := plain(b.String()); !strings.Contains(got, "settings=defaults") || strings.Contains(got, "DEDUPE_") {
		t.Errorf("defaults: %q", got)
	}

	changed := def
	changed.NatsURL = "nats://app:hunter2@nats.example:4222"
	changed.MaxInFlight = 64
	changed.HTTPAddr = ""
	b.Reset()
	tint.Info("starting dedupeworker", startAttrs(tint, changed)...)
	got := plain(b.String())
	for _, want := range []string{"DEDUPE_NATS_URL=", "nats.example:4222", "DEDUPE_MAX_IN_FLIGHT=64", `DEDUPE_HTTP_ADDR=""`} {
		if !strings.Contains(got, want) {
			t.Errorf("tint boot line lacks %q: %q", want, got)
		}
	}
	if strings.Contains(got, "hunter2") || strings.Contains(got, "DEDUPE_ACK_WAIT") || strings.Count(got, "\n") != 1 {
		t.Errorf("tint boot line: %q", got)
	}

	for _, format := range []string{"json", "text"} {
		b.Reset()
		l := newLogger(&b, "info", format)
		l.Info("starting dedupeworker", startAttrs(l, changed)...)
		for _, want := range []string{"version", "DEDUPE_NATS_URL", "DEDUPE_MAX_IN_FLIGHT", "DEDUPE_ACK_WAIT", "DEDUPE_INPUT_STREAM",
			"DEDUPE_DEFAULT_TTL", "DEDUPE_PROVISION", "DEDUPE_LOG_FORMAT", "DEDUPE_SHUTDOWN_TIMEOUT"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s boot line lacks %s: %s", format, want, b.String())
			}
		}
		if strings.Contains(b.String(), "hunter2") {
			t.Errorf("%s boot line leaks a secret: %s", format, b.String())
		}
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// plain is tint's output without its colours.
func plain(s string) string { return ansi.ReplaceAllString(s, "") }
