package main

import (
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // the packagers register themselves
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/ipk"
	_ "github.com/goreleaser/nfpm/v2/rpm"

	"github.com/braid-vpn/braid/internal/targets"
)

// format is one package format and where it puts things.
type format struct {
	packager string
	arch     func(targets.Target) string
	// router packages (OpenWrt) carry the binary, the init script and the
	// licences only: flash is small and there is no man or systemd.
	router bool
}

var formats = []format{
	{packager: "deb", arch: func(t targets.Target) string { return t.Deb }},
	{packager: "rpm", arch: func(t targets.Target) string { return t.RPM }},
	{packager: "ipk", arch: func(t targets.Target) string { return t.IPK }, router: true},
}

const (
	description = `multipath VPN: one encrypted tunnel over several network paths
braid carries one VPN tunnel over several paths at once (two ISPs, Wi-Fi plus
LTE, fibre plus DSL) over UDP, adds their capacity, survives the loss of any
one of them and schedules each packet with knowledge of each path's delay.`
	homepage = "https://github.com/braid-vpn/braid"
	docDir   = "/usr/share/doc/braid"
)

// contents are the files of one package of bin.
func contents(f format, bin string, s shared) files.Contents {
	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode}}
	}
	c := files.Contents{
		file(bin, "/usr/bin/braid", 0o755),
		// Keys live here; the unit's ReadOnlyPaths needs it to exist.
		{Destination: "/etc/braid", Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o700}},
		file(s.licence, docDir+"/LICENSE", 0o644),
		file(s.notice, docDir+"/THIRD_PARTY_NOTICES", 0o644),
	}
	if f.router {
		return append(c, file(s.openwrtInit, "/etc/init.d/braid", 0o755))
	}
	for _, u := range s.units {
		c = append(c, file(u, "/usr/lib/systemd/system/"+filepath.Base(u), 0o644))
	}
	c = append(c,
		file(s.bash, "/usr/share/bash-completion/completions/braid", 0o644),
		file(s.zsh, "/usr/share/zsh/vendor-completions/_braid", 0o644),
		file(s.fish, "/usr/share/fish/vendor_completions.d/braid.fish", 0o644),
	)
	for _, m := range s.man {
		c = append(c, file(m, "/usr/share/man/man1/"+filepath.Base(m), 0o644))
	}
	for _, e := range s.examples {
		c = append(c, file(e, docDir+"/examples/"+filepath.Base(e), 0o644))
	}
	return c
}

// buildPackage writes the f package of bin for t into out and returns its name.
func buildPackage(src Source, t targets.Target, f format, bin string, s shared, out string) (string, error) {
	info := &nfpm.Info{
		Name:        "braid",
		Arch:        f.arch(t),
		Platform:    "linux",
		Version:     src.Version,
		Section:     "net",
		Priority:    "optional",
		Maintainer:  "braid developers <braid@braid-vpn.invalid>",
		Description: description,
		Vendor:      "braid",
		Homepage:    homepage,
		License:     "Apache-2.0",
		MTime:       src.Time,
		Overridables: nfpm.Overridables{
			Contents: contents(f, bin, s),
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(src.Root, "dist/packaging/postinstall.sh"),
				PostRemove:  filepath.Join(src.Root, "dist/packaging/postremove.sh"),
			},
			RPM: nfpm.RPM{
				Summary:   "multipath VPN",
				Group:     "Applications/Internet",
				BuildHost: "braid-release", // not the machine's name
			},
		},
	}
	if f.router {
		info.Scripts = nfpm.Scripts{
			PostInstall: filepath.Join(src.Root, "dist/openwrt/postinstall.sh"),
			PreRemove:   filepath.Join(src.Root, "dist/openwrt/preremove.sh"),
		}
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, f.packager); err != nil {
		return "", err
	}
	p, err := nfpm.Get(f.packager)
	if err != nil {
		return "", err
	}
	name := p.ConventionalFileName(info)
	w, err := os.Create(filepath.Join(out, name))
	if err != nil {
		return "", err
	}
	if err := p.Package(info, w); err != nil {
		w.Close()
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return name, nil
}
