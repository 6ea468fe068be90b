//go:build !unix

package embedded

import "os"

// tryLock does not lock where flock does not exist: the embedded server is a convenience for Linux and macOS
// laptops and the Docker image.
func tryLock(*os.File) (bool, error) { return true, nil }

func unlock(*os.File) error { return nil }
