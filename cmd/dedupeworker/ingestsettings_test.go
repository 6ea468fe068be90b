package main

import (
	"testing"

	"github.com/kelseyhightower/envconfig"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// internal/config does not import receiver, so the ingest defaults and the header cap are written in both: here
// they must agree, or -h and the boot line would show values the receiver does not use (and a header block
// JetStream refuses could pass config's check).
func TestIngestSettingsAgreeWithReceiver(t *testing.T) {
	if config.IngestMaxHeaderBytesLimit != receiver.MaxHeaderBytesLimit {
		t.Errorf("config.IngestMaxHeaderBytesLimit %d, receiver.MaxHeaderBytesLimit %d", config.IngestMaxHeaderBytesLimit, receiver.MaxHeaderBytesLimit)
	}
	var def config.Config
	if err := envconfig.Process("DEDUPEWORKER_DEFAULTS_ONLY", &def); err != nil {
		t.Fatal(err)
	}
	if int64(def.IngestMaxBody) != receiver.DefaultMaxBody {
		t.Errorf("DEDUPE_INGEST_MAX_BODY defaults to %d in config, %d in receiver", def.IngestMaxBody, receiver.DefaultMaxBody)
	}
	big := def
	big.IngestMaxBody = 128 << 20
	for _, c := range []struct {
		name string
		cfg  config.Config
	}{{"defaults", def}, {"a body limit over the buffer's default", big}} {
		rc := receiver.Config{MaxBody: int64(c.cfg.IngestMaxBody)}.WithDefaults()
		for _, v := range []struct {
			name         string
			config, rcvr any
		}{
			{"DEDUPE_INPUT_STREAM", c.cfg.InputStream, rc.InputStream},
			{"DEDUPE_INPUT_PREFIX", c.cfg.InputPrefix, rc.InputPrefix},
			{"DEDUPE_INGEST_MAX_HEADER_BYTES", c.cfg.IngestMaxHeaderBytes, rc.MaxHeaderBytes},
			{"DEDUPE_INGEST_PUBLISH_TIMEOUT", c.cfg.IngestPublishTimeout, rc.PublishTimeout},
			{"DEDUPE_INGEST_MAX_IN_FLIGHT", c.cfg.IngestMaxInFlight, rc.MaxInFlight},
			{"DEDUPE_INGEST_MAX_BUFFERED_BYTES", c.cfg.IngestMaxBuffered(), rc.MaxBufferedBytes},
			{"DEDUPE_INGEST_BODY_TIMEOUT", c.cfg.IngestBodyTimeout, rc.BodyTimeout},
		} {
			if v.config != v.rcvr {
				t.Errorf("%s: %s defaults to %v in config, %v in receiver", c.name, v.name, v.config, v.rcvr)
			}
		}
	}
}
