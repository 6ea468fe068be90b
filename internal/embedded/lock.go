package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrStoreInUse is wrapped by Start's error when another embedded server (in this process or another) holds the
// store directory. Two JetStream servers on one store directory each rebuild the other's streams from files the
// other is writing: one directory, one server.
var ErrStoreInUse = errors.New("embedded: store directory in use")

// storeInUse is the refusal: its message names the directory and its holder, and it is ErrStoreInUse.
type storeInUse struct{ msg string }

func (e *storeInUse) Error() string        { return e.msg }
func (e *storeInUse) Is(target error) bool { return target == ErrStoreInUse }

// lockFileName is the lock file in the store directory. It holds the holder's process id and listen address, so
// that the refusal can name them; the lock itself is the kernel's (flock), released when the holder exits,
// however it exits.
const lockFileName = "dedupeworker.lock"

// storeLock is a held lock on a store directory.
type storeLock struct{ f *os.File }

// lockStore takes the store directory's lock, or says who holds it.
func lockStore(dir string) (*storeLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("embedded: store directory %s: lock file: %w", dir, err)
	}
	held, err := tryLockPatiently(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded: store directory %s: lock %s: %w", dir, path, err)
	}
	if !held {
		b, _ := os.ReadFile(path)
		_ = f.Close()
		who, connect := holder(string(b))
		return nil, &storeInUse{fmt.Sprintf("embedded: store directory %s is in use by another embedded server%s (lock %s): "+
			"one server per directory. Stop that one, give this one another directory (DEDUPE_EMBEDDED_STORE_DIR), "+
			"or connect to the running one%s", dir, who, path, connect)}
	}
	return &storeLock{f: f}, nil
}

// probeGrace is how long lockStore keeps trying a lock held by someone else before it refuses: StoreHeld's probe
// (a one-shot command asking whether a worker holds the store) holds the lock for a moment, and a server starting
// in that moment must not be refused as if another server held the directory.
const probeGrace = 250 * time.Millisecond

// tryLockPatiently is tryLock, tried again for probeGrace while someone else holds the lock.
func tryLockPatiently(f *os.File) (bool, error) {
	deadline := time.Now().Add(probeGrace)
	for {
		held, err := tryLock(f)
		if held || err != nil || time.Now().After(deadline) {
			return held, err
		}
		time.Sleep(2 * time.Millisecond) // polling interval: flock has no timed wait
	}
}

// StoreHeld reports whether an embedded server holds the lock of the store directory dir: one that runs, or one
// still starting or recovering its streams, which it does before it listens. It takes the lock without waiting and
// gives it up at once (a server starting meanwhile waits for it: probeGrace); a directory or lock file that does not
// exist, or cannot be read, is not held.
func StoreHeld(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFileName))
	if err != nil {
		return false
	}
	defer f.Close()
	got, err := tryLock(f)
	if got {
		_ = unlock(f)
	}
	return err == nil && !got
}

// record writes who holds the lock, for the refusal of the next one.
func (l *storeLock) record(listen string) {
	_ = l.f.Truncate(0)
	_, _ = l.f.WriteAt([]byte(fmt.Sprintf("pid %d\nlisten %s\n", os.Getpid(), listen)), 0)
}

// release gives the directory up. The file stays: removing it would let a third server lock a new file while a
// second one still waits on the old.
func (l *storeLock) release() {
	if l != nil && l.f != nil {
		_ = unlock(l.f)
		_ = l.f.Close()
		l.f = nil
	}
}

// holder reads the lock file's record: who holds it, " (pid 12, listening on 127.0.0.1:4222)" or "" when it
// records nothing, and how to connect to it, " (DEDUPE_NATS_URL=nats://127.0.0.1:4222)" or " (DEDUPE_NATS_URL)".
func holder(content string) (who, connect string) {
	var parts []string
	connect = " (DEDUPE_NATS_URL)"
	for line := range strings.Lines(content) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		if _, err := strconv.Atoi(v); k == "pid" && err == nil {
			parts = append(parts, "pid "+v)
		} else if k == "listen" && v != "" {
			parts = append(parts, "listening on "+v)
			connect = " (DEDUPE_NATS_URL=nats://" + v + ")"
		}
	}
	if len(parts) > 0 {
		who = " (" + strings.Join(parts, ", ") + ")"
	}
	return who, connect
}
