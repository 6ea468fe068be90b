package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

func TestInputRetentionFlag(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseOptions(nil, &stderr)
	if err != nil {
		t.Fatalf("no flags: %v\n%s", err, stderr.String())
	}
	if o.inputRetention != retainWorkQueue {
		t.Fatalf("default -input-retention: %s, want workqueue (what the worker provisions)", o.inputRetention)
	}
	for _, c := range []struct {
		arg  string
		want inputRetention
	}{
		{"workqueue", retainWorkQueue},
		{"age", retainAge},
		{"limits", retainLimits},
		{" Limits ", retainLimits},
		{"AGE", retainAge},
	} {
		stderr.Reset()
		o, err := parseOptions([]string{"-input-retention", c.arg}, &stderr)
		if err != nil {
			t.Fatalf("-input-retention %q: %v\n%s", c.arg, err, stderr.String())
		}
		if o.inputRetention != c.want {
			t.Errorf("-input-retention %q: %s, want %s", c.arg, o.inputRetention, c.want)
		}
		if o.inputRetention.String() != strings.ToLower(strings.TrimSpace(c.arg)) {
			t.Errorf("-input-retention %q prints as %q", c.arg, o.inputRetention)
		}
	}
	for _, bad := range []string{"", "wq", "work-queue", "interest", "age=1h", "limits,age"} {
		stderr.Reset()
		_, err := parseOptions([]string{"-input-retention=" + bad}, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("-input-retention %q: err %v, want a usage error", bad, err)
		}
		if !strings.Contains(stderr.String(), "-input-retention") || !strings.Contains(stderr.String(), "want workqueue, age, limits") {
			t.Errorf("-input-retention %q: the message should name the flag and the valid values:\n%s", bad, stderr.String())
		}
	}
	stderr.Reset()
	if _, err := parseOptions([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if h := stderr.String(); !strings.Contains(h, "-input-retention") || !strings.Contains(h, "default workqueue") {
		t.Errorf("help lacks -input-retention or its default:\n%s", h)
	}
}

func TestInputRetentionApply(t *testing.T) {
	for _, c := range []struct {
		r          inputRetention
		dup        time.Duration
		retention  jetstream.RetentionPolicy
		maxAge     time.Duration
		consumerAt string
	}{
		{retainWorkQueue, 0, jetstream.WorkQueuePolicy, 0, ""},
		{retainWorkQueue, windowTTL, jetstream.WorkQueuePolicy, 0, ""},
		{retainAge, 0, jetstream.LimitsPolicy, inputMaxAge, "all"},
		{retainAge, windowTTL, jetstream.LimitsPolicy, windowTTL, "all"}, // native: MaxAge may not be below its duplicate window
		{retainLimits, 0, jetstream.LimitsPolicy, 0, "all"},
		{retainLimits, windowTTL, jetstream.LimitsPolicy, 0, "all"},
	} {
		cfg := jetstream.StreamConfig{Duplicates: c.dup}
		c.r.apply(&cfg)
		if cfg.Retention != c.retention || cfg.MaxAge != c.maxAge || cfg.Duplicates != c.dup {
			t.Errorf("%s, duplicates %s: retention %s, max age %s, duplicates %s; want %s, %s, %s",
				c.r, c.dup, cfg.Retention, cfg.MaxAge, cfg.Duplicates, c.retention, c.maxAge, c.dup)
		}
		if got := c.r.workerConsumerStart(); got != c.consumerAt {
			t.Errorf("%s: DEDUPE_CONSUMER_START %q, want %q", c.r, got, c.consumerAt)
		}
		env := workerEnv("nats://127.0.0.1:1", 1, workerSpec{consumerStart: c.r.workerConsumerStart()})
		has := slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "DEDUPE_CONSUMER_START=") })
		if has != (c.consumerAt != "") || (has && !slices.Contains(env, "DEDUPE_CONSUMER_START="+c.consumerAt)) {
			t.Errorf("%s: worker environment: DEDUPE_CONSUMER_START set %v, want %q", c.r, has, c.consumerAt)
		}
	}
}

// TestCreateInputEveryRetention creates INGEST on a real server the way each contender does, for each retention:
// the server accepts each configuration (native's 72h duplicate window under an age limit included), the shared
// consumer of floor and naive can be created on a work-queue stream, and an acknowledged envelope leaves it.
func TestCreateInputEveryRetention(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []inputRetention{retainWorkQueue, retainAge, retainLimits} {
		for _, native := range []bool{false, true} {
			nc, js, err := connect(srv.URL(), "retention-test")
			if err != nil {
				t.Fatal(err)
			}
			var dup time.Duration
			if native {
				dup = windowTTL
			}
			if err := createInput(ctx, js, dup, r); err != nil {
				t.Fatalf("%s, native %v: %v", r, native, err)
			}
			st, err := js.Stream(ctx, inputStream)
			if err != nil {
				t.Fatal(err)
			}
			want := jetstream.StreamConfig{Duplicates: dup}
			r.apply(&want)
			// Without a duplicate window of its own the stream gets the server's default (2m).
			if got := st.CachedInfo().Config; got.Retention != want.Retention || got.MaxAge != want.MaxAge || dup > 0 && got.Duplicates != dup {
				t.Errorf("%s, native %v: stream has retention %s, max age %s, duplicates %s", r, native, got.Retention, got.MaxAge, got.Duplicates)
			}
			if !native {
				if err := createClientSide(ctx, js, 1000, 1); err != nil {
					t.Fatalf("%s: %v", r, err)
				}
				if _, err := js.Publish(ctx, "ingest.t1.gh", []byte("{}")); err != nil {
					t.Fatal(err)
				}
				c, err := js.Consumer(ctx, inputStream, consumerName)
				if err != nil {
					t.Fatal(err)
				}
				m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
				if err != nil {
					t.Fatalf("%s: %v", r, err)
				}
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
				left := 1
				if r == retainWorkQueue {
					left = 0
				}
				if n, _ := streamMsgs(ctx, js, inputStream); n != left {
					t.Errorf("%s: %d envelopes left in %s after the ack, want %d", r, n, inputStream, left)
				}
				for _, s := range []string{outputStream, "KV_" + bucket} {
					if err := js.DeleteStream(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := js.DeleteStream(ctx, inputStream); err != nil {
				t.Fatal(err)
			}
			nc.Close()
		}
	}
}
