package main

import (
	"errors"
	"fmt"
	"syscall"
)

// listenError words a failed listen on the address of setting for command cmd (run, ingest): a busy address says
// what usually holds it and which setting moves it; any other failure (a malformed address, a privileged port) is
// given as it came, after the setting.
func listenError(setting, addr, cmd string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: the address is in use (is another dedupeworker %s running? set %s to another "+
			"address): %w", setting, addr, cmd, setting, err)
	}
	return fmt.Errorf("%s %s: %w", setting, addr, err)
}
