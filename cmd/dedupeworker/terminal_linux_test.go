package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// openPTY opens a pseudo-terminal: what the worker writes to tty, the test reads from ptmx.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	var n uint32
	for _, c := range []struct {
		req uintptr
		arg unsafe.Pointer
	}{{syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)}, {syscall.TIOCGPTN, unsafe.Pointer(&n)}} {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), c.req, uintptr(c.arg)); errno != 0 {
			t.Skipf("pseudo-terminal ioctl: %v", errno)
		}
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("pseudo-terminal: %v", err)
	}
	return ptmx, tty
}

// On a terminal (DEDUPE_LOG_FORMAT=auto) the first line is short: the version and only the settings that differ
// from their defaults; the stop line names the signal.
func TestWorkerTerminalLogs(t *testing.T) {
	embeddedEnv(t)
	t.Setenv("DEDUPE_MAX_IN_FLIGHT", "64")
	ptmx, tty := openPTY(t)
	screen := &natstest.Buffer{}
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return // EIO once the worker's side is closed
			}
		}
	}()
	stop := startRun(t, tty, "run").stop
	waitConsuming(t, screen)
	if err := stop(signalCause{syscall.SIGINT}); err != nil {
		t.Fatalf("run: %v", err)
	}
	tty.Close()
	<-read
	lines := strings.Split(strings.ReplaceAll(plain(screen.String()), "\r\n", "\n"), "\n")
	first := lines[0]
	if !strings.Contains(first, "INF starting dedupeworker version=") {
		t.Fatalf("first line %q", first)
	}
	for _, want := range []string{" DEDUPE_EMBEDDED_LISTEN=127.0.0.1:", " DEDUPE_EMBEDDED_STORE_DIR=", " DEDUPE_MAX_IN_FLIGHT=64", ` DEDUPE_HTTP_ADDR=""`} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %q: %q", want, first)
		}
	}
	if strings.Contains(first, "DEDUPE_ACK_WAIT") || strings.Contains(first, "config") {
		t.Errorf("first line carries default settings: %q", first)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "INF stopping: received SIGINT\n") {
		t.Errorf("no stop line naming the signal:\n%s", strings.Join(lines, "\n"))
	}
}
