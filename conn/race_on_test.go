//go:build race

package conn

// The race detector allocates on its own; allocation counts mean nothing then.
const raceEnabled = true
