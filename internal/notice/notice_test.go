package notice_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/braid-vpn/braid/internal/licenses"
	"github.com/braid-vpn/braid/internal/notice"
)

// TestNoticesCurrent regenerates every notice from go.mod and the module
// cache: it fails when a dependency was added, removed or upgraded without
// `go generate ./internal/notice`, and when a dependency's licence is unknown
// or not one braid may ship (Generate refuses those).
func TestNoticesCurrent(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool in PATH to list the binaries' modules")
	}
	for program, pkg := range notice.Programs {
		want, err := licenses.Generate(".", program, pkg)
		if err != nil {
			t.Fatalf("%s: %v", program, err)
		}
		if got := notice.For(program); got != want {
			t.Errorf("the notice of %s is stale: run go generate ./internal/notice", program)
		}
		for _, m := range []string{"Go standard library", "github.com/flynn/noise", "golang.org/x/crypto"} {
			if !strings.Contains(want, m) {
				t.Errorf("the notice of %s lacks %s", program, m)
			}
		}
	}
	if strings.Contains(notice.For("braid"), "gonum.org") {
		t.Error("braid's notice lists gonum, which only braid-lab links")
	}
}
