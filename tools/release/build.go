package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/braid-vpn/braid/internal/notice"
	"github.com/braid-vpn/braid/internal/targets"
)

// labTargets are the targets that get a braid-lab archive: the lab runs
// namespaces and an emulator on a PC or a server, not on a router.
var labTargets = map[string]bool{"amd64": true, "arm64": true}

// Build writes every artifact of src for ts into out (emptied first) and
// returns their names, SHA256SUMS last.
func Build(src Source, ts []targets.Target, out string) ([]string, error) {
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp("", "braid-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)

	shared, err := stageShared(src, stage)
	if err != nil {
		return nil, err
	}
	var arts []string
	for _, t := range ts {
		bin := filepath.Join(out, fmt.Sprintf("braid_%s_linux_%s", src.Version, t.Name()))
		if err := goBuild(src, t, "./cmd/braid", bin); err != nil {
			return nil, err
		}
		arts = append(arts, filepath.Base(bin))
		for _, f := range formats {
			name, err := buildPackage(src, t, f, bin, shared, out)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", f.packager, t.Name(), err)
			}
			arts = append(arts, name)
		}
		if labTargets[t.Name()] {
			name, err := labArchive(src, t, stage, out)
			if err != nil {
				return nil, fmt.Errorf("braid-lab %s: %w", t.Name(), err)
			}
			arts = append(arts, name)
		}
	}
	if err := writeSums(out, arts); err != nil {
		return nil, err
	}
	return append(arts, "SHA256SUMS"), nil
}

// goBuild builds pkg for t into bin: static, paths trimmed, symbols
// stripped, version and commit stamped, no VCS stamp (it would record the
// state of the work tree, not the commit).
func goBuild(src Source, t targets.Target, pkg, bin string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X", "main.version=v" + src.Version,
		"-X", "github.com/braid-vpn/braid/internal/cli.commit=" + src.Commit,
	}, " ")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", abs, pkg)
	cmd.Dir = src.Root
	cmd.Env = append(os.Environ(), t.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v\n%s", pkg, t.Name(), err, out)
	}
	return nil
}

// shared are the staged files every package of a release carries.
type shared struct {
	units       []string // the systemd units (unitNames), running /usr/bin/braid
	notice      string   // braid's third-party notice
	licence     string   // LICENSE
	man         []string // gzipped man pages
	bash        string   // completion files
	zsh         string
	fish        string
	examples    []string // example configs
	openwrtInit string   // the procd init script
}

// unitNames are the systemd units in dist/systemd that the packages install:
// the daemon (one instance per config) and the balancer.
var unitNames = []string{"braid@.service", "braid-balance.service"}

func stageShared(src Source, stage string) (shared, error) {
	var s shared
	var err error
	// One source per unit: it names the path `go build` users install to, the
	// packages put the binary in /usr/bin.
	for _, name := range unitNames {
		unit, err := os.ReadFile(filepath.Join(src.Root, "dist/systemd", name))
		if err != nil {
			return s, err
		}
		staged := filepath.Join(stage, name)
		if err := os.WriteFile(staged, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/braid", "/usr/bin/braid")), 0o644); err != nil {
			return s, err
		}
		s.units = append(s.units, staged)
	}
	s.notice = filepath.Join(stage, "THIRD_PARTY_NOTICES")
	if err := os.WriteFile(s.notice, []byte(notice.For("braid")), 0o644); err != nil {
		return s, err
	}
	s.licence = filepath.Join(src.Root, "LICENSE")
	if s.man, err = writeMan(src, filepath.Join(stage, "man")); err != nil {
		return s, err
	}
	if s.bash, s.zsh, s.fish, err = writeCompletions(filepath.Join(stage, "completions")); err != nil {
		return s, err
	}
	s.openwrtInit = filepath.Join(src.Root, "dist/openwrt/braid.init")
	s.examples, err = filepath.Glob(filepath.Join(src.Root, "examples", "*.toml"))
	return s, err
}

// writeSums writes SHA256SUMS for the named files of dir, in the format
// `sha256sum -c` reads.
func writeSums(dir string, names []string) error {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	var b strings.Builder
	for _, name := range sorted {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
