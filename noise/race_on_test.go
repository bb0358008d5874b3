//go:build race

package noise

// The race detector makes sync.Pool drop items on purpose, so allocation counts
// are meaningless under -race.
const raceEnabled = true
