package embedded

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestMaxPayloadFor(t *testing.T) {
	for _, c := range []struct{ body, want int }{
		{1 << 20, 8 << 20}, // the default DEDUPE_MAX_JSON_BYTES: the 8 MiB floor
		{1, 8 << 20},
		{4 << 20, 8<<20 + 64<<10},
		{20 << 20, 40<<20 + 64<<10},
		{math.MaxInt32, math.MaxInt32},
		{(math.MaxInt32-64<<10)/2 + 1, math.MaxInt32},
	} {
		if got := MaxPayloadFor(c.body); got != c.want {
			t.Errorf("MaxPayloadFor(%d) = %d, want %d", c.body, got, c.want)
		}
	}
}

// start runs an embedded server on a free port and returns a connection to it.
func start(t *testing.T, maxPayload int) *nats.Conn {
	t.Helper()
	srv, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// The server advertises the max_payload it was given, and a message just over the worker's default body limit
// (1 MiB, which is also nats-server's own default max_payload) goes through it with its headers.
func TestMaxPayload(t *testing.T) {
	nc := start(t, 0)
	if got := nc.MaxPayload(); got != DefaultMaxPayload {
		t.Fatalf("default max_payload %d, want %d", got, DefaultMaxPayload)
	}
	sub, err := nc.SubscribeSync("big")
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("big")
	m.Header.Set("X-Pad", strings.Repeat("h", 60<<10))
	m.Data = bytes.Repeat([]byte("b"), 1<<20+1)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 1<<20+1 {
		t.Fatalf("received %d bytes, want %d", len(got.Data), 1<<20+1)
	}

	// Above the server's default outbound buffer (64 MiB) it still starts: the buffer grows with the payload.
	big := MaxPayloadFor(40 << 20)
	if got := start(t, big).MaxPayload(); got != int64(big) {
		t.Fatalf("max_payload %d, want %d", got, big)
	}
}

func TestStartErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), MaxPayload: -1}, "embedded: max payload: must be between 1 and 2147483647 bytes, got -1"},
		{Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), MaxPayload: math.MaxInt32 + 1}, "embedded: max payload: must be between 1 and 2147483647 bytes, got 2147483648"},
		{Config{Listen: "127.0.0.1:0"}, "embedded: store directory: must not be empty"},
		{Config{Listen: "localhost", StoreDir: t.TempDir()}, `embedded: listen address "localhost": `},
	} {
		srv, err := Start(context.Background(), c.cfg)
		if err == nil {
			_ = srv.Shutdown(context.Background())
			t.Errorf("Start(%+v): no error, want %q", c.cfg, c.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Start(%+v): %q, want %q", c.cfg, err, c.want)
		}
	}
}
