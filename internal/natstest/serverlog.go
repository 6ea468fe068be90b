package natstest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// serverLog keeps a server's warnings and errors (the server runs with NoLog otherwise) and shows them only when
// the test failed: a server's own refusal (a store it could not create, say) then says why in the test's output,
// where the client saw only an error code.
type serverLog struct {
	mu    sync.Mutex
	lines []string
}

const serverLogLines = 200 // the first ones: the cause comes before its consequences

func (l *serverLog) add(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < serverLogLines {
		l.lines = append(l.lines, level+" "+fmt.Sprintf(format, v...))
	}
}

func (l *serverLog) report(tb testing.TB, name string) {
	if !tb.Failed() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) > 0 {
		tb.Logf("natstest: server %s's warnings and errors:\n%s", name, strings.Join(l.lines, "\n"))
	}
}

// fatal is the server's first fatal line (a listener it could not open, say), as ": [FTL] …", or "".
func (l *serverLog) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.HasPrefix(line, "[FTL]") {
			return ": " + line
		}
	}
	return ""
}

func (l *serverLog) Noticef(string, ...any)         {}
func (l *serverLog) Debugf(string, ...any)          {}
func (l *serverLog) Tracef(string, ...any)          {}
func (l *serverLog) Warnf(format string, v ...any)  { l.add("[WRN]", format, v...) }
func (l *serverLog) Errorf(format string, v ...any) { l.add("[ERR]", format, v...) }
func (l *serverLog) Fatalf(format string, v ...any) { l.add("[FTL]", format, v...) }
