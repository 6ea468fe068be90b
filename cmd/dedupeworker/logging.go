package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/lmittmann/tint"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// newLogger builds the worker's logger: tint (coloured, human) on a terminal, JSON otherwise, unless the format
// is forced with DEDUPE_LOG_FORMAT.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lvl slog.Level // info unless level is debug, warn (warning) or error, in any case
	_ = lvl.UnmarshalText([]byte(strings.Replace(strings.ToLower(level), "warning", "warn", 1)))
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "tint"
		}
	}
	switch format {
	case "tint":
		return slog.New(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, ReplaceAttr: durationAsText}))
	case "text":
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationAsText}))
	default:
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationAsText}))
	}
}

// durationAsText writes a time.Duration as the settings and people write it ("30s", "1m30s", "2m", "250ms"),
// where slog's JSON handler would write an integer of nanoseconds and the text handlers Go's 72h0m0s.
func durationAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(config.FormatDuration(a.Value.Duration()))
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// startAttrs are the attributes of a role's boot line ("starting dedupeworker"). JSON and logfmt lines, read by
// machines, carry the whole build and every setting of the role as in force (inForce), as the group "config".
// Tint's, read by a person at a terminal, carry the version and only the settings that differ from their defaults
// (or settings=defaults), so that the first line fits on a screen.
func startAttrs(log *slog.Logger, cfg config.Config, role string) []any {
	b := readBuildInfo()
	attrs := []any{"version", b.Version}
	switch log.Handler().(type) {
	case *slog.JSONHandler, *slog.TextHandler:
		for _, kv := range [][2]string{{"revision", b.Revision}, {"vcs_time", b.Time}, {"modified", b.Modified}} {
			if kv[1] != "" {
				attrs = append(attrs, kv[0], kv[1])
			}
		}
		settings := cfg.Attrs(role)
		forced := inForce(cfg, role)
		for i, a := range settings {
			if v, ok := forced[a.Key]; ok {
				settings[i].Value = v
			}
		}
		return append(attrs, "go", b.GoVersion, slog.Attr{Key: "config", Value: slog.GroupValue(settings...)})
	}
	changed := changedSettings(cfg, role)
	if len(changed) == 0 {
		return append(attrs, "settings", "defaults")
	}
	for _, a := range changed {
		attrs = append(attrs, a)
	}
	return attrs
}

// inForce are the values in force, by variable name, of the settings of role whose default is derived (empty or
// 0 in cfg). DEDUPE_MAX_HOLD and DEDUPE_MAX_ACK_PENDING depend on what the server already has, unknown before
// connecting: they read "auto: …" with what the worker's own stream and consumer would give.
func inForce(cfg config.Config, role string) map[string]slog.Value {
	m := map[string]slog.Value{}
	if cfg.NatsConnectTimeout == 0 {
		// run and ingest are services started together with NATS: both wait as long.
		m[config.Prefix+"_NATS_CONNECT_TIMEOUT"] = slog.StringValue(config.FormatDuration(cfg.ConnectRetry(config.DefaultRunConnectTimeout)))
	}
	if role == config.RoleIngest && cfg.IngestMaxBufferedBytes == 0 {
		m[config.Prefix+"_INGEST_MAX_BUFFERED_BYTES"] = slog.Int64Value(cfg.IngestMaxBuffered())
	}
	if role != config.RoleRun {
		return m
	}
	pc := pipelineConfig(cfg).WithDefaults()
	if cfg.OutputDuplicateWindow == 0 {
		m[config.Prefix+"_OUTPUT_DUPLICATE_WINDOW"] = slog.StringValue(config.FormatDuration(pc.OutputDuplicates))
	}
	if cfg.MaxHold == 0 {
		m[config.Prefix+"_MAX_HOLD"] = slog.StringValue(fmt.Sprintf("auto: half the output stream's duplicate window (%s for the %s the worker creates it with)",
			config.FormatDuration(pc.OutputDuplicates/2), config.FormatDuration(pc.OutputDuplicates)))
	}
	if cfg.MaxAckPending == 0 {
		m[config.Prefix+"_MAX_ACK_PENDING"] = slog.StringValue(fmt.Sprintf("auto: %d (max(1000, %d x DEDUPE_MAX_IN_FLIGHT)) for a consumer the worker creates; an existing one keeps its own",
			pipeline.ConsumerMaxAckPending(pc), pipeline.DefaultFleet))
	}
	return m
}

// changedSettings lists, in the order of `dedupeworker -h`, the settings of role (redacted) whose values differ
// from their defaults; a setting emptied on purpose (DEDUPE_HTTP_ADDR= to disable HTTP) is listed with "".
func changedSettings(cfg config.Config, role string) []slog.Attr {
	var def config.Config
	// A prefix that no variable carries reads no variable: what is left is every default.
	_ = envconfig.Process("DEDUPEWORKER_DEFAULTS_ONLY", &def)
	cur, defs := attrsByName(cfg, role), attrsByName(def, role)
	var out []slog.Attr
	for _, name := range config.RoleVariables(role) {
		v, set := cur[name]
		d, hasDefault := defs[name]
		switch {
		case !set && !hasDefault, set && hasDefault && v.Equal(d):
		case !set:
			out = append(out, slog.String(name, ""))
		default:
			out = append(out, slog.Attr{Key: name, Value: v})
		}
	}
	return out
}

// attrsByName are the settings of role (all with "") as c.Attrs gives them, by variable name.
func attrsByName(c config.Config, role string) map[string]slog.Value {
	m := map[string]slog.Value{}
	for _, a := range c.Attrs(role) {
		m[a.Key] = a.Value
	}
	return m
}

// loadSettings reads the settings, builds the logger from them and warns about each DEDUPE_* variable that no
// setting reads (a typo would otherwise leave a setting at its default without a word). A bad setting exits 2.
func loadSettings(stderr io.Writer) (config.Config, *slog.Logger, error) {
	cfg, err := config.Load()
	if err != nil {
		return cfg, nil, &exitError{code: exitUsage, err: err}
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	warnUnknownVariables(log, os.Environ())
	return cfg, log, nil
}

func warnUnknownVariables(log *slog.Logger, environ []string) {
	for _, u := range config.UnknownVariables(environ) {
		if u.Nearest != "" {
			log.Warn("unknown setting "+u.Name+" is ignored: did you mean "+u.Nearest+"?", "variable", u.Name, "nearest", u.Nearest)
		} else {
			log.Warn("unknown setting "+u.Name+" is ignored: no setting has that name ('dedupeworker help' lists them)", "variable", u.Name)
		}
	}
}
