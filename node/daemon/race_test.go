//go:build race

package daemon

// raceEnabled: the race detector is on, and makes parsing megabytes of
// messages ten times slower.
const raceEnabled = true
