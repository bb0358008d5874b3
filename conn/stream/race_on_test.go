//go:build race

package stream

// The race detector allocates on its own; allocation counts mean nothing then.
const raceEnabled = true
