package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime/debug"
	"strings"
	"time"
)

// WireGuardModule is the module whose root package is the wireguard-go
// program. braid already depends on it (for its TUN package), so the module
// cache of anyone who built braid holds the exact source.
const WireGuardModule = "golang.zx2c4.com/wireguard"

// ErrToolMissing is wrapped by FindWireGuardGo and FindWg when the program
// is not installed.
var ErrToolMissing = errors.New("not installed")

// Tool is an external program the bench runs.
type Tool struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// toolTimeout bounds a --version call: a program that hangs there is not
// the one we want.
const toolTimeout = 5 * time.Second

// WireGuardVersion is the version of WireGuardModule this binary was built
// with ("" when the build information is missing).
func WireGuardVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == WireGuardModule {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version
		}
	}
	return ""
}

// WireGuardGoHint says, on one line, how to get wireguard-go.
func WireGuardGoHint() string {
	v := WireGuardVersion()
	v = cmp.Or(v, "latest")
	return fmt.Sprintf("wireguard-go not found, benching without it: `go install %s@%s` installs it as $(go env GOPATH)/bin/wireguard (put that directory on PATH or pass --wireguard-go PATH)", WireGuardModule, v)
}

// WgHint says, on one line, how to get wg.
func WgHint() string {
	return "wg not found, benching without wireguard-go: `apt-get install --no-install-recommends wireguard-tools` (Debian/Ubuntu) provides it"
}

func toolVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line), nil
}

// FindWireGuardGo returns the wireguard-go program: explicit if set (an
// error if it is not wireguard-go), else "wireguard-go" on PATH, else
// "wireguard" on PATH — the name `go install golang.zx2c4.com/wireguard@…`
// gives it — provided its --version says it is wireguard-go.
func FindWireGuardGo(explicit string) (Tool, error) {
	names := []string{"wireguard-go", "wireguard"}
	if explicit != "" {
		names = []string{explicit}
	}
	var errs []error
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			if explicit != "" {
				return Tool{}, fmt.Errorf("--wireguard-go %s: %w", explicit, err)
			}
			continue
		}
		v, err := toolVersion(p)
		if err == nil && !strings.HasPrefix(v, "wireguard-go ") {
			err = fmt.Errorf("%s is not wireguard-go (--version: %q)", p, v)
		}
		if err != nil {
			if explicit != "" {
				return Tool{}, err
			}
			errs = append(errs, err)
			continue
		}
		return Tool{Path: p, Version: v}, nil
	}
	if len(errs) > 0 {
		return Tool{}, fmt.Errorf("wireguard-go: %w (%w)", ErrToolMissing, errors.Join(errs...))
	}
	return Tool{}, fmt.Errorf("wireguard-go: %w", ErrToolMissing)
}

// FindWg returns wg from wireguard-tools on PATH.
func FindWg() (Tool, error) {
	p, err := exec.LookPath("wg")
	if err != nil {
		return Tool{}, fmt.Errorf("wg: %w", ErrToolMissing)
	}
	v, err := toolVersion(p)
	if err != nil {
		return Tool{}, err
	}
	if !strings.HasPrefix(v, "wireguard-tools ") {
		return Tool{}, fmt.Errorf("%s is not wireguard-tools' wg (--version: %q)", p, v)
	}
	return Tool{Path: p, Version: v}, nil
}
