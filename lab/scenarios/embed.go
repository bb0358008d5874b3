// Package scenarios holds the committed scenario files (see docs/lab.md) and
// embeds them, so that `braid lab demo` and tests find them from any working
// directory.
package scenarios

import "embed"

// Files holds every committed *.toml scenario, by base name.
//
//go:embed *.toml
var Files embed.FS

// Read returns the committed scenario file name ("demo.toml").
func Read(name string) ([]byte, error) { return Files.ReadFile(name) }
