//go:build race

package tunnel

// The race detector allocates on its own; allocation counts mean nothing then.
const raceEnabled = true
