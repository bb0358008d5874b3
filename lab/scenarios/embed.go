// Package scenarios holds the committed scenario files (see docs/lab.md) and
// embeds them, so that `braid lab demo` and tests find them from any working
// directory.
package scenarios

import "embed"

//go:embed *.toml
var files embed.FS

// Read returns the committed scenario file name ("demo.toml").
func Read(name string) ([]byte, error) { return files.ReadFile(name) }
