//go:build race

package kvwindow_test

// raceEnabled: under the race detector a 3-node cluster on two cores places and elects streams too slowly for the
// placement test's bounds; that test runs in the normal (non-race) pass of make test.
const raceEnabled = true
