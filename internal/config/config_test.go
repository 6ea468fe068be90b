package config_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

func TestDefaults(t *testing.T) {
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.InputStream != "INGEST" || c.Bucket != "dedupe-window" || c.DefaultTTL.String() != "72h0m0s" || !c.Provision || c.MaxJSONBytes != 1<<20 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestVariablesNames(t *testing.T) {
	vars := config.Variables()
	for _, want := range []string{"DEDUPE_NATS_URL", "DEDUPE_NATS_CREDS", "DEDUPE_NATS_NKEY_SEED_FILE", "DEDUPE_NATS_TLS_CA",
		"DEDUPE_NATS_TLS_CERT", "DEDUPE_NATS_TLS_KEY", "DEDUPE_EMBEDDED_LISTEN", "DEDUPE_EMBEDDED_STORE_DIR",
		"DEDUPE_SOURCES_FILE", "DEDUPE_SOURCES", "DEDUPE_INPUT_STREAM", "DEDUPE_INPUT_PREFIX", "DEDUPE_OUTPUT_STREAM",
		"DEDUPE_OUTPUT_PREFIX", "DEDUPE_DLQ_STREAM", "DEDUPE_DLQ_PREFIX", "DEDUPE_DUPLICATES_PREFIX", "DEDUPE_BUCKET",
		"DEDUPE_CONSUMER", "DEDUPE_PROVISION", "DEDUPE_REPLICAS", "DEDUPE_DEFAULT_TTL", "DEDUPE_MAX_JSON_BYTES",
		"DEDUPE_MAX_IN_FLIGHT", "DEDUPE_ACK_WAIT", "DEDUPE_HTTP_ADDR", "DEDUPE_LOG_LEVEL", "DEDUPE_LOG_FORMAT",
		"DEDUPE_SHUTDOWN_TIMEOUT", "DEDUPE_FORWARD_WHEN_WINDOW_DOWN"} {
		if !slices.Contains(vars, want) {
			t.Errorf("missing %s in %v", want, vars)
		}
	}
	var b bytes.Buffer
	if err := config.Usage(&b); err != nil || !strings.Contains(b.String(), "DEDUPE_DEFAULT_TTL") || !strings.Contains(b.String(), "72h") {
		t.Fatalf("usage: %v\n%s", err, b.String())
	}
}

func TestInvalid(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"DEDUPE_DEFAULT_TTL": "500ms"}, "DEDUPE_DEFAULT_TTL: must be whole seconds and at least 1s, got 500ms"},
		{map[string]string{"DEDUPE_DEFAULT_TTL": "soon"}, `DEDUPE_DEFAULT_TTL: cannot parse "soon"`},
		{map[string]string{"DEDUPE_REPLICAS": "2"}, "DEDUPE_REPLICAS: must be 1, 3 or 5, got 2"},
		{map[string]string{"DEDUPE_SOURCES": "x", "DEDUPE_SOURCES_FILE": "/etc/hostname"}, "DEDUPE_SOURCES: set either"},
		{map[string]string{"DEDUPE_LOG_FORMAT": "xml"}, "DEDUPE_LOG_FORMAT"},
		{map[string]string{"DEDUPE_OUTPUT_PREFIX": "ingest.out"}, "overlaps DEDUPE_INPUT_PREFIX"},
		{map[string]string{"DEDUPE_INPUT_PREFIX": "in.*"}, "DEDUPE_INPUT_PREFIX: must be dot-separated"},
		{map[string]string{"DEDUPE_NATS_CREDS": "/nonexistent/x.creds"}, "DEDUPE_NATS_CREDS: cannot read"},
		{map[string]string{"DEDUPE_NATS_TLS_CERT": "/etc/hostname"}, "must be set together with DEDUPE_NATS_TLS_KEY"},
		{map[string]string{"DEDUPE_MAX_IN_FLIGHT": "0"}, "DEDUPE_MAX_IN_FLIGHT"},
		{map[string]string{"DEDUPE_EMBEDDED_LISTEN": "4222"}, "DEDUPE_EMBEDDED_LISTEN: must be host:port"},
		{map[string]string{"DEDUPE_EMBEDDED_LISTEN": "exa mple:4222"}, `DEDUPE_EMBEDDED_LISTEN: must be host:port, got "exa mple:4222": "nats://exa mple:4222": invalid character " " in host name`},
		{map[string]string{"DEDUPE_NATS_CONNECT_TIMEOUT": "-1s"}, "DEDUPE_NATS_CONNECT_TIMEOUT: must not be negative, got -1s"},
		{map[string]string{"DEDUPE_NATS_CONNECT_TIMEOUT": "soon"}, `DEDUPE_NATS_CONNECT_TIMEOUT: cannot parse "soon" as duration`},
		{map[string]string{"DEDUPE_INGEST_BODY_TIMEOUT": "soon"}, `config: DEDUPE_INGEST_BODY_TIMEOUT: cannot parse "soon" as duration`},
		{map[string]string{"DEDUPE_INGEST_BODY_TIMEOUT": "50ms"}, "config: DEDUPE_INGEST_BODY_TIMEOUT: must be between 100ms and 10m, got 50ms"},
		{map[string]string{"DEDUPE_INGEST_BODY_TIMEOUT": "11m"}, "config: DEDUPE_INGEST_BODY_TIMEOUT: must be between 100ms and 10m, got 11m"},
		{map[string]string{"DEDUPE_INGEST_MAX_BUFFERED_BYTES": "lots"}, `config: DEDUPE_INGEST_MAX_BUFFERED_BYTES: cannot parse "lots" as int64`},
		{map[string]string{"DEDUPE_INGEST_MAX_BUFFERED_BYTES": "1024"},
			"config: DEDUPE_INGEST_MAX_BUFFERED_BYTES: must be between DEDUPE_INGEST_MAX_BODY (4194304) and 1099511627776 bytes, got 1024"},
		{map[string]string{"DEDUPE_INGEST_MAX_BUFFERED_BYTES": "-1"}, "config: DEDUPE_INGEST_MAX_BUFFERED_BYTES: must be between DEDUPE_INGEST_MAX_BODY"},
		{map[string]string{"DEDUPE_INGEST_MAX_BUFFERED_BYTES": "1099511627777"}, "config: DEDUPE_INGEST_MAX_BUFFERED_BYTES: must be between"},
		{map[string]string{"DEDUPE_INGEST_MAX_BODY": "8388608", "DEDUPE_INGEST_MAX_BUFFERED_BYTES": "8388607"},
			"config: DEDUPE_INGEST_MAX_BUFFERED_BYTES: must be between DEDUPE_INGEST_MAX_BODY (8388608) and"},
		// JetStream stores no header block over 65535 bytes: before, up to 1 MiB passed here.
		{map[string]string{"DEDUPE_INGEST_MAX_HEADER_BYTES": "64513"}, "config: DEDUPE_INGEST_MAX_HEADER_BYTES: must be between 1024 and 64512 bytes (JetStream"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := config.Load()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// The receiver's body settings: a default that -h shows, or one that follows DEDUPE_INGEST_MAX_BODY, and the
// limits of their ranges accepted.
func TestIngestBodySettings(t *testing.T) {
	for _, c := range []struct {
		name        string
		env         map[string]string
		timeout     time.Duration
		buffered    int64
		bufferedSet int64
	}{
		{"defaults", nil, 10 * time.Second, 64 << 20, 0},
		{"a body limit over 64 MiB raises the default", map[string]string{"DEDUPE_INGEST_MAX_BODY": "134217728"}, 10 * time.Second, 128 << 20, 0},
		{"0 is the default", map[string]string{"DEDUPE_INGEST_MAX_BUFFERED_BYTES": "0"}, 10 * time.Second, 64 << 20, 0},
		{"lowest", map[string]string{"DEDUPE_INGEST_BODY_TIMEOUT": "100ms", "DEDUPE_INGEST_MAX_BUFFERED_BYTES": "4194304"},
			100 * time.Millisecond, 4 << 20, 4 << 20},
		{"highest", map[string]string{"DEDUPE_INGEST_BODY_TIMEOUT": "10m", "DEDUPE_INGEST_MAX_BUFFERED_BYTES": "1099511627776"},
			10 * time.Minute, 1 << 40, 1 << 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := config.Load()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.IngestBodyTimeout != c.timeout || cfg.IngestMaxBuffered() != c.buffered || cfg.IngestMaxBufferedBytes != c.bufferedSet {
				t.Errorf("body timeout %s, buffered %d (set %d); want %s, %d (%d)",
					cfg.IngestBodyTimeout, cfg.IngestMaxBuffered(), cfg.IngestMaxBufferedBytes, c.timeout, c.buffered, c.bufferedSet)
			}
		})
	}
}

// -h lists every setting with its default, the receiver's body settings too; before, they were read apart from
// Config and missing there.
func TestUsageListsIngestBodySettings(t *testing.T) {
	var b bytes.Buffer
	if err := config.Usage(&b); err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			lines[f[0]] = l
		}
	}
	for name, want := range map[string]string{
		"DEDUPE_INGEST_BODY_TIMEOUT":       "10s",
		"DEDUPE_INGEST_MAX_BUFFERED_BYTES": "empty: max(64 MiB, DEDUPE_INGEST_MAX_BODY)",
	} {
		if !strings.Contains(lines[name], want) {
			t.Errorf("usage line of %s is %q, want it to hold %q\n%s", name, lines[name], want, b.String())
		}
	}
}

func TestRedactURLs(t *testing.T) {
	var got string
	for _, a := range (config.Config{NatsURL: "nats://u:secret@h1:4222, tls://tok@h2:4222,nats://h3"}).Attrs("") {
		if a.Key == "DEDUPE_NATS_URL" {
			got = a.Value.String()
		}
	}
	if strings.Contains(got, "secret") || strings.Contains(got, "tok@") || !strings.Contains(got, "h3") {
		t.Fatal(got)
	}
}

func TestConnectRetry(t *testing.T) {
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.ConnectRetry(config.DefaultRunConnectTimeout) != 2*time.Minute || c.ConnectRetry(config.DefaultCommandConnectTimeout) != 0 {
		t.Fatalf("defaults: %s %s", c.ConnectRetry(config.DefaultRunConnectTimeout), c.ConnectRetry(config.DefaultCommandConnectTimeout))
	}
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "45s")
	if c, err = config.Load(); err != nil || c.ConnectRetry(config.DefaultRunConnectTimeout) != 45*time.Second ||
		c.ConnectRetry(config.DefaultCommandConnectTimeout) != 45*time.Second {
		t.Fatalf("set: %v %v", c.NatsConnectTimeout, err)
	}
}

// Only the connection settings proper make the DEDUPE_NATS_* configuration "given" (NATS_* and contexts unread).
func TestNatsConfigured(t *testing.T) {
	if (config.Config{NatsConnectTimeout: time.Second, EmbeddedListen: "127.0.0.1:1"}).NatsConfigured() {
		t.Error("a connect timeout or a listen address is no connection setting")
	}
	for _, c := range []config.Config{{NatsURL: "nats://h"}, {NatsCreds: "x"}, {NatsNkeySeedFile: "x"}, {NatsTLSCa: "x"},
		{NatsTLSCert: "x"}, {NatsTLSKey: "x"}} {
		if !c.NatsConfigured() {
			t.Errorf("%+v: not configured", c)
		}
	}
}

// Every setting belongs to run, to ingest or to both, and each role's list is what it reads.
func TestRoleVariables(t *testing.T) {
	run, ingest := config.RoleVariables(config.RoleRun), config.RoleVariables(config.RoleIngest)
	for _, v := range config.Variables() {
		if !slices.Contains(run, v) && !slices.Contains(ingest, v) {
			t.Errorf("%s belongs to no role", v)
		}
	}
	for _, c := range []struct {
		name        string
		run, ingest bool
	}{
		{"DEDUPE_NATS_URL", true, true}, {"DEDUPE_NATS_CONNECT_TIMEOUT", true, true}, {"DEDUPE_SOURCES_FILE", true, true},
		{"DEDUPE_INPUT_STREAM", true, true}, {"DEDUPE_LOG_FORMAT", true, true}, {"DEDUPE_EMBEDDED_LISTEN", true, true},
		{"DEDUPE_BUCKET", true, false}, {"DEDUPE_MAX_HOLD", true, false}, {"DEDUPE_HTTP_ADDR", true, false}, {"DEDUPE_EMBEDDED_STORE_DIR", true, false},
		{"DEDUPE_INGEST_ADDR", false, true}, {"DEDUPE_INGEST_SECRETS_DIR", false, true},
		{"DEDUPE_INGEST_BODY_TIMEOUT", false, true}, {"DEDUPE_INGEST_MAX_BUFFERED_BYTES", false, true},
	} {
		if slices.Contains(run, c.name) != c.run || slices.Contains(ingest, c.name) != c.ingest {
			t.Errorf("%s: run %v, ingest %v; want %v, %v", c.name, slices.Contains(run, c.name), slices.Contains(ingest, c.name), c.run, c.ingest)
		}
	}
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Attrs(config.RoleIngest) {
		if !slices.Contains(ingest, a.Key) {
			t.Errorf("Attrs(ingest) has %s", a.Key)
		}
	}
	if len(c.Attrs("")) != len(c.LogValue().Group()) {
		t.Errorf("Attrs(\"\") is not every setting LogValue logs")
	}
}

// Several unreadable files are reported in the order the settings are listed, the same at every start: an operator
// comparing two logs, or a test matching the message, sees one text.
func TestUnreadableFilesInListedOrder(t *testing.T) {
	t.Setenv("DEDUPE_NATS_CREDS", "/nonexistent/x.creds")
	t.Setenv("DEDUPE_NATS_TLS_CA", "/nonexistent/ca.pem")
	t.Setenv("DEDUPE_SOURCES_FILE", "/nonexistent/sources.yaml")
	var first string
	for i := range 30 {
		_, err := config.Load()
		if err == nil {
			t.Fatal("unreadable files accepted")
		}
		msg := err.Error()
		creds, ca, src := strings.Index(msg, "DEDUPE_NATS_CREDS"), strings.Index(msg, "DEDUPE_NATS_TLS_CA"), strings.Index(msg, "DEDUPE_SOURCES_FILE")
		if creds < 0 || ca < creds || src < ca {
			t.Fatalf("load %d: want CREDS, then TLS_CA, then SOURCES_FILE:\n%s", i, msg)
		}
		if i == 0 {
			first = msg
		} else if msg != first {
			t.Fatalf("load %d differs from the first:\n%s\n%s", i, msg, first)
		}
	}
}
