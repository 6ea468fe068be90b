package natsreq_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// TestGetLastMsgMatchesJetStream reads every kind of key a claim window holds (a value, an empty value, stored
// headers, a delete, a purge, a server's expiry marker, a missing key) with GetLastMsg and with the jetstream
// package's GetLastMsgForSubject, through the stream leader's API and by direct get, under the default API prefix
// and a JetStream domain: the answers must be identical, field for field.
func TestGetLastMsgMatchesJetStream(t *testing.T) {
	for _, domain := range []string{"", "hub"} {
		t.Run("domain="+domain, func(t *testing.T) {
			srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.JetStreamDomain = domain }))
			nc := natstest.Connect(t, srv.ClientURL())
			m, err := natsreq.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			js, err := jetstream.New(nc)
			if domain != "" {
				js, err = jetstream.NewWithDomain(nc, domain)
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 1, LimitMarkerTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			put := func(key string, v []byte) {
				t.Helper()
				if _, err := kv.Put(ctx, key, v); err != nil {
					t.Fatal(err)
				}
			}
			put("live", []byte("claim-value"))
			put("empty", []byte{})
			put("a/b=c.d-e_f", []byte("odd key"))
			put("deleted", []byte("x"))
			if err := kv.Delete(ctx, "deleted"); err != nil {
				t.Fatal(err)
			}
			put("purged", []byte("x"))
			if err := kv.Purge(ctx, "purged"); err != nil {
				t.Fatal(err)
			}
			hm := &nats.Msg{Subject: "$KV.b.headers", Data: []byte("h"), Header: nats.Header{"X-A": {"1", "2"}, "Nats-TTL": {"60s"}}}
			if _, err := js.PublishMsg(ctx, hm); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Create(ctx, "expired", []byte("x"), jetstream.KeyTTL(time.Second)); err != nil {
				t.Fatal(err)
			}

			bound, err := js.Stream(ctx, "KV_b")
			if err != nil {
				t.Fatal(err)
			}
			if !bound.CachedInfo().Config.AllowDirect {
				t.Fatal("a KV bucket allows direct gets")
			}
			leader, err := js.Stream(ctx, "KV_b")
			if err != nil {
				t.Fatal(err)
			}
			leader.CachedInfo().Config.AllowDirect = false // as kvwindow's leader handle
			natstest.Eventually(t, 20*time.Second, func() error {
				lm, err := leader.GetLastMsgForSubject(ctx, "$KV.b.expired")
				if err != nil {
					return err
				}
				if lm.Header.Get(jetstream.MarkerReasonHeader) == "" {
					return errors.New("no expiry marker yet")
				}
				return nil
			})

			g := natsreq.NewStreamGet(jsapi.Prefix(js.Options()), "KV_b")
			for _, key := range []string{"live", "empty", "a/b=c.d-e_f", "headers", "deleted", "purged", "expired", "missing"} {
				for _, p := range []struct {
					name   string
					st     jetstream.Stream
					direct bool
				}{{"leader", leader, false}, {"direct", bound, true}} {
					subj := "$KV.b." + key
					want, wantErr := p.st.GetLastMsgForSubject(ctx, subj)
					got, err := m.GetLastMsg(ctx, g, subj, p.direct, 5*time.Second)
					if key == "missing" {
						if !errors.Is(wantErr, jetstream.ErrMsgNotFound) || got != nil || err != jetstream.ErrMsgNotFound {
							t.Errorf("%s %s: GetLastMsg = %v, %v; jetstream: %v (want ErrMsgNotFound itself)", p.name, key, got, err, wantErr)
						}
						continue
					}
					if wantErr != nil || err != nil {
						t.Fatalf("%s %s: GetLastMsg: %v; jetstream: %v", p.name, key, err, wantErr)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s %s: GetLastMsg = %#v\njetstream: %#v", p.name, key, got, want)
					}
					// The fields the window reads, spelt out: a difference in any is a different claim decision.
					if got.Sequence != want.Sequence || !got.Time.Equal(want.Time) || got.Time.Location() != want.Time.Location() ||
						string(got.Data) != string(want.Data) || (got.Data == nil) != (want.Data == nil) ||
						got.Header.Get("KV-Operation") != want.Header.Get("KV-Operation") ||
						got.Header.Get(jetstream.MarkerReasonHeader) != want.Header.Get(jetstream.MarkerReasonHeader) ||
						got.Header.Get(jetstream.MsgTTLHeader) != want.Header.Get(jetstream.MsgTTLHeader) {
						t.Errorf("%s %s: read fields differ: %+v vs %+v", p.name, key, got, want)
					}
				}
			}
			if got, err := m.GetLastMsg(ctx, g, "$KV.b.deleted", false, 5*time.Second); err != nil || got == nil || got.Header.Get("KV-Operation") != "DEL" {
				t.Errorf("delete marker read as %+v, %v", got, err)
			}
			if got, err := m.GetLastMsg(ctx, g, "$KV.b.expired", true, 5*time.Second); err != nil || got == nil || got.Header.Get(jetstream.MarkerReasonHeader) != "MaxAge" {
				t.Errorf("expiry marker read as %+v, %v", got, err)
			}

			// A stream deleted under its handles: the leader's API says "stream not found", a direct get finds no
			// responders, on both paths alike.
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GONE", Subjects: []string{"gone.>"}, AllowDirect: true}); err != nil {
				t.Fatal(err)
			}
			goneBound, err := js.Stream(ctx, "GONE")
			if err != nil {
				t.Fatal(err)
			}
			goneLeader, err := js.Stream(ctx, "GONE")
			if err != nil {
				t.Fatal(err)
			}
			goneLeader.CachedInfo().Config.AllowDirect = false
			if err := js.DeleteStream(ctx, "GONE"); err != nil {
				t.Fatal(err)
			}
			gone := natsreq.NewStreamGet(jsapi.Prefix(js.Options()), "GONE")
			_, wantErr := goneLeader.GetLastMsgForSubject(ctx, "gone.x")
			_, err = m.GetLastMsg(ctx, gone, "gone.x", false, 5*time.Second)
			var api *jetstream.APIError
			if !errors.Is(wantErr, jetstream.ErrStreamNotFound) || !errors.Is(err, jetstream.ErrStreamNotFound) || !errors.As(err, &api) {
				t.Errorf("leader read of a deleted stream: %v; jetstream: %v; want both stream not found", err, wantErr)
			}
			_, wantErr = goneBound.GetLastMsgForSubject(ctx, "gone.x")
			_, err = m.GetLastMsg(ctx, gone, "gone.x", true, 5*time.Second)
			if !errors.Is(wantErr, nats.ErrNoResponders) || !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("direct read of a deleted stream: %v; jetstream: %v; want both no responders", err, wantErr)
			}
		})
	}
}

// A read nobody answers in time is nats.ErrTimeout; one whose context ends first is the context's error.
func TestGetLastMsgTimeout(t *testing.T) {
	nc, m := newMux(t)
	if _, err := nc.Subscribe("X.API.STREAM.MSG.GET.S", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	g := natsreq.NewStreamGet("X.API.", "S") // a prefix the server does not serve: only the silent subscriber listens
	if _, err := m.GetLastMsg(context.Background(), g, "s.x", false, 50*time.Millisecond); err != nats.ErrTimeout {
		t.Fatalf("err = %v, want nats.ErrTimeout itself", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.GetLastMsg(ctx, g, "s.x", false, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
}
