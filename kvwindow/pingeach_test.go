package kvwindow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestPingEach: PingEach reads each bucket once and says, bucket by bucket in shard order, what the read returned
// and what Ping makes of it; its verdict is Ping's. A bucket deleted under the running window is lost
// (ErrWindowLost, its read's own error ErrStreamNotFound), and the others answer with their stream's info.
func TestPingEach(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	w := newWindow(t, js, shardedConfig(4))
	t.Cleanup(func() { _ = w.Close() })
	if _, err := w.PingEach(ctx); err != nil {
		t.Fatalf("PingEach: %v", err)
	}
	if err := js.DeleteKeyValue(ctx, "dedupe-window-02"); err != nil {
		t.Fatal(err)
	}
	each, err := w.PingEach(ctx)
	if !errors.Is(err, kvwindow.ErrWindowLost) || !errors.Is(w.Ping(ctx), kvwindow.ErrWindowLost) {
		t.Fatalf("PingEach: %v, want ErrWindowLost, as Ping says (%v)", err, w.Ping(ctx))
	}
	want := []string{"dedupe-window-00", "dedupe-window-01", "dedupe-window-02", "dedupe-window-03"}
	if len(each) != len(want) {
		t.Fatalf("%d buckets, want %d", len(each), len(want))
	}
	for i, b := range each {
		if b.Bucket != want[i] {
			t.Errorf("bucket %d: %s, want %s", i, b.Bucket, want[i])
		}
		if b.Bucket == "dedupe-window-02" {
			if !errors.Is(b.Err, kvwindow.ErrWindowLost) || !errors.Is(b.ReadErr, jetstream.ErrStreamNotFound) || b.Info != nil {
				t.Errorf("%s: err %v, read %v, info %v; want lost, not found, none", b.Bucket, b.Err, b.ReadErr, b.Info != nil)
			}
			continue
		}
		if b.Err != nil || b.ReadErr != nil || b.Info == nil || b.Info.Config.Name != "KV_"+b.Bucket {
			t.Errorf("%s: err %v, read %v, info %v; want its stream's info", b.Bucket, b.Err, b.ReadErr, b.Info != nil)
		}
	}
}
