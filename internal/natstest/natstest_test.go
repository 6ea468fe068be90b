package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

func TestRestartKeepsStore(t *testing.T) {
	s := natstest.Run(t)
	nc := natstest.Connect(t, s.URL())
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	natstest.Eventually(t, 10*time.Second, func() error {
		st, err := js.Stream(ctx, "S")
		if err != nil {
			return err
		}
		if st.CachedInfo().State.Msgs != 1 {
			t.Fatalf("messages after restart: %d", st.CachedInfo().State.Msgs)
		}
		return nil
	})
}

func TestClusterStreamLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start in -short")
	}
	c := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, c.URLs())
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	l := c.StreamLeader("R3", 10*time.Second)
	l.Shutdown()
	c.WaitMetaLeader(30 * time.Second)
	c.StreamLeader("R3", 30*time.Second)
	l.Restart()
	c.WaitMetaLeader(30 * time.Second)
}
