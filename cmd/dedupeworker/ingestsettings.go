package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// ingestSettings are the receiver's settings that internal/config does not hold yet: they are read here, with the
// same form of error, until they move there (DEDUPE_INGEST_BODY_TIMEOUT, DEDUPE_INGEST_MAX_BUFFERED_BYTES).
type ingestSettings struct {
	bodyTimeout time.Duration
	maxBuffered int64
}

const (
	envIngestBodyTimeout = config.Prefix + "_INGEST_BODY_TIMEOUT"
	envIngestMaxBuffered = config.Prefix + "_INGEST_MAX_BUFFERED_BYTES"
)

// loadIngestSettings reads them and checks them, with DEDUPE_INGEST_MAX_HEADER_BYTES against what JetStream can
// store, before ingest connects: each problem is a usage error naming its variable.
func loadIngestSettings(cfg config.Config, getenv func(string) string) (ingestSettings, error) {
	s := ingestSettings{bodyTimeout: receiver.DefaultBodyTimeout, maxBuffered: max(receiver.DefaultMaxBuffered, int64(cfg.IngestMaxBody))}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", name, fmt.Sprintf(format, args...)))
	}
	if v := getenv(envIngestBodyTimeout); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad(envIngestBodyTimeout, "cannot parse %q as duration", v)
		case d < 100*time.Millisecond || d > 10*time.Minute:
			bad(envIngestBodyTimeout, "must be between 100ms and 10m, got %s", d)
		default:
			s.bodyTimeout = d
		}
	}
	if v := getenv(envIngestMaxBuffered); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			bad(envIngestMaxBuffered, "cannot parse %q as int64", v)
		case n < int64(cfg.IngestMaxBody) || n > 1<<40:
			bad(envIngestMaxBuffered, "must be between DEDUPE_INGEST_MAX_BODY (%d) and %d bytes, got %d", cfg.IngestMaxBody, int64(1)<<40, n)
		default:
			s.maxBuffered = n
		}
	}
	if cfg.IngestMaxHeaderBytes > receiver.MaxHeaderBytesLimit {
		bad(config.Prefix+"_INGEST_MAX_HEADER_BYTES", "must be between 1024 and %d bytes (JetStream stores header blocks of at most 65535 bytes, "+
			"the receiver's own headers included), got %d", receiver.MaxHeaderBytesLimit, cfg.IngestMaxHeaderBytes)
	}
	return s, errors.Join(errs...)
}

// logged are the settings as ingest's boot line shows them (startAttrs): the values in force, and which of them
// are their defaults.
func (s ingestSettings) logged(cfg config.Config) []roleSetting {
	return []roleSetting{
		{slog.String(envIngestBodyTimeout, s.bodyTimeout.String()), s.bodyTimeout == receiver.DefaultBodyTimeout},
		{slog.Int64(envIngestMaxBuffered, s.maxBuffered), s.maxBuffered == max(receiver.DefaultMaxBuffered, int64(cfg.IngestMaxBody))},
	}
}
