package kvwindow_test

import (
	"errors"
	"fmt"
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

// TestPingVerdict: what Ping and PingEach make of the buckets' answers (one rule for both): a lost bucket first,
// then an age limit, then any other failure, each the first of its kind in shard order. Before the fix PingEach
// reported an age limit (or a bucket not answering) over a lost bucket, and a bucket not answering over an age
// limit, where Ping reported the lost bucket.
func TestPingVerdict(t *testing.T) {
	lost := func(b string) error { return fmt.Errorf("%w: bucket %q was deleted", kvwindow.ErrWindowLost, b) }
	age := func(b string) error { return fmt.Errorf("%w: bucket %q: max_age 1h", kvwindow.ErrAgeLimit, b) }
	down := func(b string) error { return fmt.Errorf("%w: ping bucket %q: timeout", kvwindow.ErrUnavailable, b) }
	evicting := func(b string) error { return fmt.Errorf("%w: bucket %q discards old", kvwindow.ErrEvicting, b) }
	for _, tc := range []struct {
		name string
		errs []error
		want error // compared by text; nil: no error
	}{
		{"none", nil, nil},
		{"all answer", []error{nil, nil}, nil},
		{"age limit, lost", []error{age("a"), lost("b")}, lost("b")},
		{"lost, age limit", []error{lost("a"), age("b")}, lost("a")},
		{"not answering, lost", []error{down("a"), lost("b")}, lost("b")},
		{"not answering, age limit", []error{down("a"), nil, age("c")}, age("c")},
		{"age limit, not answering", []error{age("a"), down("b")}, age("a")},
		{"two lost", []error{nil, lost("b"), lost("c")}, lost("b")},
		{"two age limits", []error{age("a"), age("b")}, age("a")},
		{"two not answering", []error{down("a"), down("b")}, down("a")},
		{"all three", []error{down("a"), age("b"), lost("c"), nil}, lost("c")},
		{"not answering, discarding old", []error{down("a"), evicting("b")}, evicting("b")},
		{"discarding old, lost", []error{evicting("a"), lost("b")}, lost("b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kvwindow.PingVerdict(tc.errs)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("verdict %v, want %v", got, tc.want)
			}
		})
	}
}
