package kvwindow_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// answers collects a CopyCounter's reports.
type answers struct {
	mu       sync.Mutex
	ok, fail int
	last     error
}

func (a *answers) report(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		a.ok++
		return
	}
	a.fail++
	a.last = err
}

func (a *answers) counts() (int, int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ok, a.fail, a.last
}

func copiesStream(bucket string) kvwindow.CopiesStreamConfig {
	return kvwindow.CopiesStreamConfig{Name: kvwindow.CopiesStream(bucket), Replicas: 1, Storage: jetstream.MemoryStorage,
		MaxAge: time.Hour, Duplicates: 2 * time.Minute}
}

// The count of a claim is the number of distinct copies counted on it: a copy counted twice (two deliveries of one
// envelope) counts once, a later claim of the same key (another holder) starts from zero, and keys in different
// shards of a sharded window count side by side in the one stream.
func TestCopiesCountPerClaim(t *testing.T) {
	srv := natstest.Run(t)
	js := jsFor(t, srv.URL())
	cfg := kvwindow.DefaultConfig()
	cfg.Shards = 4
	w := newWindow(t, js, cfg)
	defer w.Close()
	created, problems, err := kvwindow.ProvisionCopies(ctxT(t, 10*time.Second), js, copiesStream(cfg.Bucket))
	if err != nil || !created || len(problems) > 0 {
		t.Fatalf("ProvisionCopies: created %v, problems %q, err %v", created, problems, err)
	}
	if created, problems, err = kvwindow.ProvisionCopies(ctxT(t, 10*time.Second), js, copiesStream(cfg.Bucket)); err != nil || created || len(problems) > 0 {
		t.Fatalf("ProvisionCopies again: created %v, problems %q, err %v", created, problems, err)
	}
	var ans answers
	c, err := kvwindow.NewCopyCounter(natstest.Connect(t, srv.URL()), kvwindow.CopyCounterConfig{
		Stream: kvwindow.CopiesStream(cfg.Bucket), Timeout: 5 * time.Second, Report: ans.report})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	keys := []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5", "evt_6"}
	holders := map[string]kvwindow.Entry{}
	for i, k := range keys {
		out := claim(t, w, kvwindow.Claim{Tenant: "acme", Source: "stripe", Key: k, TTL: time.Minute,
			Claimant: envelope(uint64(i + 1)), Delivery: delivery(1)})
		if out.Status != kvwindow.Won {
			t.Fatalf("claim %s: %v", k, out.Status)
		}
		e, ok, err := w.Get(ctxT(t, 5*time.Second), "acme", "stripe", k)
		if err != nil || !ok {
			t.Fatalf("get %s: %v %v", k, ok, err)
		}
		holders[k] = e
	}
	sent := 0
	add := func(k string, holder kvwindow.Claimant, cp uint64) {
		t.Helper()
		if err := c.Add("acme", "stripe", k, holder, envelope(cp)); err != nil {
			t.Fatalf("Add: %v", err)
		}
		sent++
	}
	// Key i gets i copies, and its first copy is counted twice.
	for i, k := range keys {
		for j := range i {
			add(k, holders[k].Claimant, uint64(100*(i+1)+j))
		}
		if i > 0 {
			add(k, holders[k].Claimant, uint64(100*(i+1)))
		}
	}
	// An earlier claim of evt_6, by another envelope: not the live claim's count.
	add("evt_6", envelope(99), 999)
	natstest.Eventually(t, 10*time.Second, func() error {
		if ok, fail, last := ans.counts(); ok+fail < sent {
			return fmt.Errorf("%d of %d answered (last error %v)", ok+fail, sent, last)
		}
		return nil
	})
	if _, fail, last := ans.counts(); fail > 0 {
		t.Fatalf("%d increments failed: %v", fail, last)
	}
	for i, k := range keys {
		n, err := kvwindow.Copies(ctxT(t, 5*time.Second), js, kvwindow.CopiesStream(cfg.Bucket), holders[k])
		if err != nil || n != uint64(i) {
			t.Errorf("%s: %d copies, %v; want %d", k, n, err, i)
		}
	}
}

// A missing counter stream is reported to the counter's owner and named by the reader; neither waits for long.
func TestCopiesMissingStream(t *testing.T) {
	srv := natstest.Run(t)
	js := jsFor(t, srv.URL())
	var ans answers
	c, err := kvwindow.NewCopyCounter(natstest.Connect(t, srv.URL()), kvwindow.CopyCounterConfig{
		Stream: kvwindow.CopiesStream("nowhere"), Timeout: 5 * time.Second, Report: ans.report})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add("acme", "stripe", "evt_1", envelope(1), envelope(2)); err != nil {
		t.Fatalf("Add: %v", err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if _, fail, _ := ans.counts(); fail == 0 {
			return errors.New("no answer yet")
		}
		return nil
	})
	if _, _, last := ans.counts(); !errors.Is(last, kvwindow.ErrNoCopies) {
		t.Errorf("report: %v, want ErrNoCopies", last)
	}
	e := kvwindow.Entry{Tenant: "acme", Source: "stripe", Key: "evt_1", Claimant: envelope(1)}
	if _, err := kvwindow.Copies(ctxT(t, 5*time.Second), js, kvwindow.CopiesStream("nowhere"), e); !errors.Is(err, kvwindow.ErrNoCopies) {
		t.Errorf("Copies: %v, want ErrNoCopies", err)
	}
}

// An existing stream that cannot count is named, never changed.
func TestProvisionCopiesExistingStream(t *testing.T) {
	srv := natstest.Run(t)
	js := jsFor(t, srv.URL())
	want := copiesStream("dedupe-window")
	if _, err := js.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{Name: want.Name, Subjects: []string{"elsewhere.>"},
		Storage: jetstream.MemoryStorage, MaxAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	created, problems, err := kvwindow.ProvisionCopies(ctxT(t, 5*time.Second), js, want)
	if err != nil || created || len(problems) != 3 {
		t.Fatalf("created %v, err %v, problems:\n%q", created, err, problems)
	}
}
