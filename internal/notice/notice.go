// Package notice holds the third-party notices compiled into braid's
// binaries: every module each links, with its licence texts. They are
// generated from go.mod and the module cache by package internal/licenses;
// TestNoticesCurrent fails when they are stale.
package notice

//go:generate go run ./gen

import _ "embed"

//go:embed braid.txt
var braid string

//go:embed braid-lab.txt
var braidLab string

// Programs are the binaries that carry a notice, with the package of each.
var Programs = map[string]string{
	"braid":     "github.com/braid-vpn/braid/cmd/braid",
	"braid-lab": "github.com/braid-vpn/braid/cmd/braid-lab",
}

// For is the notice of program ("braid" or "braid-lab").
func For(program string) string {
	if program == "braid-lab" {
		return braidLab
	}
	return braid
}
