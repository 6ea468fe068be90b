package main

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/lmittmann/tint"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

// newLogger builds the worker's logger: tint (coloured, human) on a terminal, JSON otherwise, unless the format
// is forced with DEDUPE_LOG_FORMAT.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelInfo
	}
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "tint"
		}
	}
	switch format {
	case "tint":
		return slog.New(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly}))
	case "text":
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
	default:
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationAsText}))
	}
}

// durationAsText writes a time.Duration as Go and people write it ("30s", "1m30s", "250ms"), where slog's JSON
// handler would write an integer of nanoseconds. The tint and text handlers already print durations so.
func durationAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
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

// startAttrs are the attributes of the boot line ("starting dedupeworker"). JSON and logfmt (text) lines are read
// by machines: they carry the whole build (version, revision, ...) and every setting, as the group "config". Tint's
// lines are read by a person at a terminal: they carry the version and only the settings that differ from their
// defaults, one attribute each (DEDUPE_SOURCES_FILE=…), or settings=defaults, so that the first line fits on a
// screen; `dedupeworker -h` lists every default.
func startAttrs(log *slog.Logger, cfg config.Config) []any {
	b := readBuildInfo()
	switch log.Handler().(type) {
	case *slog.JSONHandler, *slog.TextHandler:
		attrs := []any{"version", b.Version}
		for _, kv := range [][2]string{{"revision", b.Revision}, {"vcs_time", b.Time}, {"modified", b.Modified}} {
			if kv[1] != "" {
				attrs = append(attrs, kv[0], kv[1])
			}
		}
		return append(attrs, "go", b.GoVersion, "config", cfg.Redacted())
	}
	attrs := []any{"version", b.Version}
	changed := changedSettings(cfg)
	if len(changed) == 0 {
		return append(attrs, "settings", "defaults")
	}
	for _, a := range changed {
		attrs = append(attrs, a)
	}
	return attrs
}

// changedSettings lists, in the order of `dedupeworker -h`, the settings (redacted) whose values differ from their
// defaults; a setting emptied on purpose (DEDUPE_HTTP_ADDR= to disable HTTP) is listed with "".
func changedSettings(cfg config.Config) []slog.Attr {
	var def config.Config
	// A prefix that no variable carries reads no variable: what is left is every default.
	_ = envconfig.Process("DEDUPEWORKER_DEFAULTS_ONLY", &def)
	byName := func(c config.Config) map[string]slog.Value {
		m := map[string]slog.Value{}
		for _, a := range c.LogValue().Resolve().Group() {
			m[a.Key] = a.Value
		}
		return m
	}
	cur, defs := byName(cfg), byName(def)
	var out []slog.Attr
	for _, name := range config.Variables() {
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
