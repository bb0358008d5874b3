// Command release builds braid's release artifacts from the source tree:
//
//	go run ./tools/release [-out out/release] [-version 0.1.0] [-targets amd64,mips-softfloat]
//	go run ./tools/release -footprint out/release   # binary sizes, plain and compressed
//
// For every target of internal/targets: a static braid binary, a .deb, an
// .rpm and an OpenWrt .ipk (built with nfpm as a library); for amd64 and
// arm64 a braid-lab archive; man pages and shell completions generated from
// braid's command tree; SHA256SUMS. Two runs from the same commit give
// byte-identical artifacts: every timestamp is SOURCE_DATE_EPOCH (by default
// the commit's time) and nothing depends on the machine that builds.
// See docs/install.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/braid-vpn/braid/internal/targets"
)

func main() {
	var (
		out     = flag.String("out", "out/release", "directory for the artifacts (emptied first)")
		version = flag.String("version", "", "release version, semver without the v (default: 0.0.0-git<date>.<commit>)")
		only    = flag.String("targets", "", "comma-separated target names to build (default: all: "+strings.Join(targetNames(targets.All), ",")+")")
		foot    = flag.String("footprint", "", "build nothing; print the sizes of the braid binaries in this release directory")
	)
	flag.Parse()
	if *foot != "" {
		if err := footprint(os.Stdout, *foot); err != nil {
			fmt.Fprintf(os.Stderr, "release: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "release: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	ts, err := pickTargets(*only)
	if err == nil {
		var src Source
		if src, err = ReadSource(".", *version); err == nil {
			var arts []string
			arts, err = Build(src, ts, *out)
			if err == nil {
				fmt.Printf("%d artifacts in %s (version %s, commit %s, SOURCE_DATE_EPOCH %d)\n", len(arts), *out, src.Version, src.Commit, src.Time.Unix())
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func targetNames(ts []targets.Target) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name()
	}
	return names
}

// pickTargets is the targets named in a comma-separated list, all for "".
func pickTargets(list string) ([]targets.Target, error) {
	if list == "" {
		return targets.All, nil
	}
	var ts []targets.Target
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, t := range targets.All {
			if t.Name() == name {
				ts, found = append(ts, t), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown target %q (known: %s)", name, strings.Join(targetNames(targets.All), ", "))
		}
	}
	return ts, nil
}
