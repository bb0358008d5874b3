// Command gen writes the third-party notices of package notice (run it with
// go generate ./internal/notice). It fails, naming each module, when a
// dependency's licence is unknown or not one braid may ship.
package main

import (
	"fmt"
	"os"

	"github.com/braid-vpn/braid/internal/licenses"
	"github.com/braid-vpn/braid/internal/notice"
)

func main() {
	for program, pkg := range notice.Programs {
		text, err := licenses.Generate(".", program, pkg)
		if err == nil {
			err = os.WriteFile(program+".txt", []byte(text), 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen: %s: %v\n", program, err)
			os.Exit(1)
		}
	}
}
