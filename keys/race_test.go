//go:build race

package keys_test

// raceEnabled: under the race detector sync.Pool drops items at random, so allocation counts are not exact.
const raceEnabled = true
