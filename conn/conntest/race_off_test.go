//go:build !race

package conntest

const raceEnabled = false
