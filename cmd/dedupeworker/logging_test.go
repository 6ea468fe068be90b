package main

import (
	"bytes"
	"encoding/json"
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
		"json": `"wait":"250ms","g":{"ttl":"72h"}`,
		"text": `wait=250ms g.ttl=72h`,
		"tint": `wait=250ms g.ttl=72h`,
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
	tint.Info("starting dedupeworker", startAttrs(tint, def, config.RoleRun)...)
	if got := plain(b.String()); !strings.Contains(got, "settings=defaults") || strings.Contains(got, "DEDUPE_") {
		t.Errorf("defaults: %q", got)
	}

	changed := def
	changed.NatsURL = "nats://app:hunter2@nats.example:4222"
	changed.MaxInFlight = 64
	changed.HTTPAddr = ""
	b.Reset()
	tint.Info("starting dedupeworker", startAttrs(tint, changed, config.RoleRun)...)
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
		l.Info("starting dedupeworker", startAttrs(l, changed, config.RoleRun)...)
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

// The boot line shows each setting as it is in force: a derived default by its value (or, where the server
// decides, "auto: " and the value the worker's own streams and consumer give), not the 0s or 0 that stands for it.
// Each role shows only the settings it reads. Before, run and ingest logged every setting, DEDUPE_NATS_CONNECT_TIMEOUT
// as 0s, DEDUPE_MAX_HOLD as 0s and DEDUPE_MAX_ACK_PENDING as 0.
func TestStartAttrsInForce(t *testing.T) {
	var def config.Config
	if err := envconfig.Process("DEDUPEWORKER_DEFAULTS_ONLY", &def); err != nil {
		t.Fatal(err)
	}
	slow := def
	slow.AckWait, slow.MaxInFlight = time.Minute, 50
	bigBodies := def
	bigBodies.IngestMaxBody = 128 << 20
	set := def
	set.NatsConnectTimeout, set.MaxHold, set.MaxAckPending, set.OutputDuplicateWindow = 45*time.Second, 20*time.Second, 5000, 10*time.Minute
	set.IngestMaxBufferedBytes = 5 << 20
	for _, c := range []struct {
		name string
		cfg  config.Config
		role string
		want map[string]any
		not  []string
	}{
		{"run, defaults", def, config.RoleRun, map[string]any{
			"DEDUPE_NATS_CONNECT_TIMEOUT":    "2m",
			"DEDUPE_OUTPUT_DUPLICATE_WINDOW": "2m",
			"DEDUPE_MAX_HOLD":                "auto: half the output stream's duplicate window (1m for the 2m the worker creates it with)",
			"DEDUPE_MAX_ACK_PENDING":         "auto: 10240 (max(1000, 10 x DEDUPE_MAX_IN_FLIGHT)) for a consumer the worker creates; an existing one keeps its own",
			"DEDUPE_ACK_WAIT":                "30s", "DEDUPE_BUCKET": "dedupe-window", "DEDUPE_EMBEDDED_LISTEN": "127.0.0.1:4222", "DEDUPE_LOG_LEVEL": "info",
		}, []string{"DEDUPE_INGEST_ADDR", "DEDUPE_INGEST_MAX_BODY", "DEDUPE_INGEST_BODY_TIMEOUT"}},
		{"run, derived from other settings", slow, config.RoleRun, map[string]any{
			"DEDUPE_OUTPUT_DUPLICATE_WINDOW": "4m",
			"DEDUPE_MAX_HOLD":                "auto: half the output stream's duplicate window (2m for the 4m the worker creates it with)",
			"DEDUPE_MAX_ACK_PENDING":         "auto: 1000 (max(1000, 10 x DEDUPE_MAX_IN_FLIGHT)) for a consumer the worker creates; an existing one keeps its own",
		}, nil},
		{"run, set", set, config.RoleRun, map[string]any{
			"DEDUPE_NATS_CONNECT_TIMEOUT": "45s", "DEDUPE_OUTPUT_DUPLICATE_WINDOW": "10m", "DEDUPE_MAX_HOLD": "20s", "DEDUPE_MAX_ACK_PENDING": float64(5000),
		}, nil},
		{"ingest, defaults", def, config.RoleIngest, map[string]any{
			"DEDUPE_NATS_CONNECT_TIMEOUT": "2m", "DEDUPE_INGEST_ADDR": ":8080", "DEDUPE_INGEST_BODY_TIMEOUT": "10s",
			"DEDUPE_INGEST_MAX_BUFFERED_BYTES": float64(64 << 20), "DEDUPE_INPUT_STREAM": "INGEST", "DEDUPE_EMBEDDED_LISTEN": "127.0.0.1:4222",
			"DEDUPE_SHUTDOWN_TIMEOUT": "30s", "DEDUPE_LOG_FORMAT": "auto",
		}, []string{"DEDUPE_MAX_HOLD", "DEDUPE_MAX_ACK_PENDING", "DEDUPE_BUCKET", "DEDUPE_ACK_WAIT", "DEDUPE_OUTPUT_STREAM", "DEDUPE_HTTP_ADDR",
			"DEDUPE_EMBEDDED_STORE_DIR", "DEDUPE_CONSUMER"}},
		{"ingest, body buffer derived from the body limit", bigBodies, config.RoleIngest, map[string]any{
			"DEDUPE_INGEST_MAX_BODY": float64(128 << 20), "DEDUPE_INGEST_MAX_BUFFERED_BYTES": float64(128 << 20),
		}, nil},
		{"ingest, body buffer set", set, config.RoleIngest, map[string]any{"DEDUPE_INGEST_MAX_BUFFERED_BYTES": float64(5 << 20)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			l := newLogger(&b, "info", "json")
			l.Info("starting dedupeworker", startAttrs(l, c.cfg, c.role)...)
			var line struct {
				Config map[string]any `json:"config"`
			}
			if err := json.Unmarshal(b.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, b.String())
			}
			for k, v := range c.want {
				if line.Config[k] != v {
					t.Errorf("config.%s = %#v, want %#v", k, line.Config[k], v)
				}
			}
			for _, k := range c.not {
				if _, ok := line.Config[k]; ok {
					t.Errorf("config.%s is logged by %s, which does not read it", k, c.role)
				}
			}
		})
	}

	// For a person, only what differs from the defaults, of the role's own settings.
	changed := def
	changed.IngestAddr, changed.Bucket, changed.IngestBodyTimeout = ":9090", "other-window", 30*time.Second
	var b bytes.Buffer
	tint := newLogger(&b, "info", "tint")
	tint.Info("starting dedupeworker ingest", startAttrs(tint, changed, config.RoleIngest)...)
	if got := plain(b.String()); !strings.Contains(got, "DEDUPE_INGEST_ADDR=:9090") || !strings.Contains(got, "DEDUPE_INGEST_BODY_TIMEOUT=30s") ||
		strings.Contains(got, "DEDUPE_BUCKET") || strings.Contains(got, "DEDUPE_INGEST_MAX_BUFFERED_BYTES") {
		t.Errorf("ingest, tint: %q", got)
	}
	b.Reset()
	tint.Info("starting dedupeworker", startAttrs(tint, changed, config.RoleRun)...)
	if got := plain(b.String()); !strings.Contains(got, "DEDUPE_BUCKET=other-window") || strings.Contains(got, "DEDUPE_INGEST_ADDR") {
		t.Errorf("run, tint: %q", got)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// plain is tint's output without its colours.
func plain(s string) string { return ansi.ReplaceAllString(s, "") }
