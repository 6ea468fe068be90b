package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A second `make run` beside a running worker, or ingest on a laptop where 8080 is taken, fails on its HTTP address.
// The error names the setting and says what to change, as the embedded server's busy port does (before: only the
// setting and "bind: address already in use").
func TestBusyHTTPAddressSaysWhatToChange(t *testing.T) {
	for _, c := range []struct {
		cmd, setting string
		env          map[string]string
	}{
		{"run", "DEDUPE_HTTP_ADDR", nil},
		{"ingest", "DEDUPE_INGEST_ADDR", map[string]string{"DEDUPE_INGEST_SECRET_GITHUB": "s", "DEDUPE_HTTP_ADDR": ""}},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			addr := ln.Addr().String()
			t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
			t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
			t.Setenv("DEDUPE_SOURCES_FILE", "")
			t.Setenv("DEDUPE_SOURCES", "")
			t.Setenv(c.setting, addr)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, _, stderr := runCLI(t, "", c.cmd)
			want := c.setting + " " + addr + ": the address is in use (is another dedupeworker " + c.cmd +
				" running? set " + c.setting + " to another address)"
			if code != 1 || !strings.Contains(stderr, want) {
				t.Fatalf("exit %d, stderr %q\nwant it to contain %q", code, stderr, want)
			}
		})
	}
}
