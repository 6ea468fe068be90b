//go:build !race

package kvwindow_test

const raceEnabled = false
