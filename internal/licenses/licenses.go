// Package licenses finds the modules a Go program links and the licence of
// each, from the module cache, and writes the third-party notice that braid's
// binaries and packages carry. It refuses a module whose licence it cannot
// recognise or that braid, under Apache-2.0, may not redistribute.
//
// It is a build-time package: the binaries embed its output (package
// internal/notice), never the package itself.
package licenses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/licensecheck"

	"github.com/braid-vpn/braid/internal/targets"
)

// Compatible lists the licences (SPDX ids, as licensecheck reports them) under
// which a dependency may be linked into braid and shipped with it: permissive
// licences whose terms a notice satisfies. OFL-1.1 covers the fonts that
// braid-lab embeds to draw its plots; CC-BY-4.0 (attribution only) covers
// the SVG writer and FTL (BSD-like, asks for credit in the documentation,
// which the notice gives) the font rasteriser, both linked by braid-lab's
// plotting library.
var Compatible = map[string]bool{
	"Apache-2.0":   true,
	"BSD-2-Clause": true,
	"BSD-3-Clause": true,
	"CC-BY-4.0":    true,
	"FTL":          true,
	"ISC":          true,
	"MIT":          true,
	"OFL-1.1":      true,
	"Zlib":         true,
}

// Override corrects the plain rule (every LICENSE*/COPYING* file at the
// module's root is a licence text) for a module that keeps its licence
// elsewhere or beside a statement about it.
type Override struct {
	Licence    string   // a further file, relative to the module root, holding the licence braid takes
	Statements []string // root files that state the choice or point to the licence: carried as text, not classified
}

// Overrides are the modules that need one.
var Overrides = map[string]Override{
	// "your choice of exactly one of" the FreeType License (licenses/ftl.txt)
	// or GPL-2.0+; the root LICENSE says so.
	"github.com/golang/freetype": {Licence: "licenses/ftl.txt", Statements: []string{"LICENSE"}},
	// The console's charting library, vendored with its licence.
	"uPlot (npm package uplot), in console/assets": {Licence: "uPlot.LICENSE.txt"},
	// LICENSE holds CC-BY-4.0; LICENSE-link.txt only names it.
	"github.com/ajstarks/svgo": {Statements: []string{"LICENSE-link.txt"}},
}

// minCoverage is how much of a licence file licensecheck must recognise: a
// file that is mostly unrecognised text may add terms the id does not carry.
const minCoverage = 75

// Vendored are third-party files kept in braid's own packages (and so in no
// module of their own), by the package that embeds them: a program that
// links the package carries them, and its notice lists them as modules whose
// Dir is relative to braid's module root.
var Vendored = map[string][]Module{
	"github.com/braid-vpn/braid/console": {{Path: "uPlot (npm package uplot), in console/assets", Version: "1.6.32", Dir: "console/assets"}},
}

// Module is one module a program links.
type Module struct {
	Path    string // module path; "std" for Go's standard library and runtime
	Version string
	Dir     string // where its source is (the module cache, or GOROOT/src)
}

// File is one licence-related file of a module.
type File struct {
	Name string
	Text string
	IDs  []string // the licences recognised in it; none for NOTICE and PATENTS files
}

// Entry is a module with its licence files.
type Entry struct {
	Module
	Files []File
}

// IDs are the distinct licences of the entry.
func (e Entry) IDs() []string {
	seen := map[string]bool{}
	var ids []string
	for _, f := range e.Files {
		for _, id := range f.IDs {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// Platform is a GOOS/GOARCH pair to list a program's dependencies for.
type Platform struct{ OS, Arch string }

// Modules lists the modules that the main package pkg links on any of the
// platforms, the standard library included, sorted by path. It runs `go list`
// in dir (inside the module).
func Modules(dir, pkg string, platforms []Platform) ([]Module, error) {
	byPath := map[string]Module{}
	var root string // the main module's directory, read when a vendored package needs it
	for _, p := range platforms {
		cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Module", pkg)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s (%s/%s): %v: %s", pkg, p.OS, p.Arch, err, strings.TrimSpace(stderr.String()))
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var lp struct {
				ImportPath string
				Standard   bool
				Module     *struct {
					Path, Version, Dir string
					Main               bool
				}
			}
			if err := dec.Decode(&lp); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list -deps %s: %v", pkg, err)
			}
			for _, v := range Vendored[lp.ImportPath] {
				if root == "" {
					if root, err = moduleRoot(dir); err != nil {
						return nil, err
					}
				}
				v.Dir = filepath.Join(root, v.Dir)
				byPath[v.Path] = v
			}
			switch {
			case lp.Standard:
				byPath["std"] = Module{Path: "std"}
			case lp.Module != nil && !lp.Module.Main:
				byPath[lp.Module.Path] = Module{Path: lp.Module.Path, Version: lp.Module.Version, Dir: lp.Module.Dir}
			}
		}
	}
	if m, ok := byPath["std"]; ok {
		root, err := goEnv(dir, "GOROOT")
		if err != nil {
			return nil, err
		}
		m.Dir = root
		byPath["std"] = m
	}
	mods := make([]Module, 0, len(byPath))
	for _, m := range byPath {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	return mods, nil
}

// moduleRoot is the directory of the main module that dir is in.
func moduleRoot(dir string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func goEnv(dir, key string) (string, error) {
	cmd := exec.Command("go", "env", key)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// isLicence and isNotice tell the files of a module's root that a notice
// carries: its licence texts, and the NOTICE and PATENTS files that some
// licences (Apache-2.0's §4(d)) or grants ask to pass on.
func isLicence(name string) bool {
	n := strings.ToUpper(name)
	for _, p := range []string{"LICENSE", "LICENCE", "COPYING", "UNLICENSE"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func isNotice(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasPrefix(n, "NOTICE") || n == "PATENTS"
}

// Classify reads the licence files at the root of m.Dir and recognises each.
// It fails when there is none, when one is mostly unrecognised, or when one
// names a licence that is not Compatible.
func Classify(m Module) (Entry, error) {
	e := Entry{Module: m}
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		return e, fmt.Errorf("%s: %v", m.Path, err)
	}
	var names []string
	for _, de := range ents {
		if name := de.Name(); de.Type().IsRegular() && (isLicence(name) || isNotice(name)) {
			names = append(names, name)
		}
	}
	o := Overrides[m.Path]
	if o.Licence != "" {
		names = append(names, o.Licence)
	}
	licences := 0
	for _, name := range names {
		text, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil {
			return e, fmt.Errorf("%s: %v", m.Path, err)
		}
		f := File{Name: name, Text: string(text)}
		if isLicence(name) && !slices.Contains(o.Statements, name) || name == o.Licence {
			licences++
			cov := licensecheck.Scan(text)
			if cov.Percent < minCoverage {
				return e, fmt.Errorf("%s: %s: licence not recognised (%.0f%% of the text matches a known licence)", m.Path, name, cov.Percent)
			}
			for _, match := range cov.Match {
				if !Compatible[match.ID] {
					return e, fmt.Errorf("%s: %s: licence %s is not one braid may ship (compatible: %s)", m.Path, name, match.ID, strings.Join(compatibleIDs(), ", "))
				}
				f.IDs = append(f.IDs, match.ID)
			}
		}
		e.Files = append(e.Files, f)
	}
	if licences == 0 {
		return e, fmt.Errorf("%s: no licence file in %s", m.Path, m.Dir)
	}
	return e, nil
}

func compatibleIDs() []string {
	ids := make([]string, 0, len(Compatible))
	for id := range Compatible {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Notice is the third-party notice of program (a name, as the header says)
// for the entries: each module with its licences and their full texts. Every
// error of Classify is collected, so that one run lists every offender.
func Notice(program string, mods []Module) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Third-party software in %s\n\n", program)
	fmt.Fprintf(&b, "%s is licensed under the Apache License 2.0 (the LICENSE file of its source).\n", program)
	fmt.Fprintf(&b, "It includes the following software, each under its own licence, reproduced\nbelow. This file is generated by `go generate ./internal/notice`; do not edit.\n\n")
	var errs []error
	var entries []Entry
	for _, m := range mods {
		e, err := Classify(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, e)
		fmt.Fprintf(&b, "  %-50s %s\n", label(m), strings.Join(e.IDs(), ", "))
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	rule := strings.Repeat("=", 78)
	for _, e := range entries {
		fmt.Fprintf(&b, "\n%s\n%s\n%s\n", rule, label(e.Module), rule)
		for _, f := range e.Files {
			fmt.Fprintf(&b, "\n--- %s\n\n%s\n", f.Name, strings.TrimRight(f.Text, "\n"))
		}
	}
	return b.String(), nil
}

// label names a module in the notice: path and version, or the Go
// distribution for the standard library (whose version the notice leaves out,
// so that it does not change with the toolchain that builds it).
func label(m Module) string {
	if m.Path == "std" {
		return "Go standard library and runtime (go.dev)"
	}
	return m.Path + " " + m.Version
}

// Generate is the notice of the main package pkg, named program, over every
// release target; dir is any directory inside the module.
func Generate(dir, program, pkg string) (string, error) {
	var platforms []Platform
	for _, t := range targets.All {
		platforms = append(platforms, Platform{OS: "linux", Arch: t.GOARCH})
	}
	mods, err := Modules(dir, pkg, platforms)
	if err != nil {
		return "", err
	}
	return Notice(program, mods)
}
