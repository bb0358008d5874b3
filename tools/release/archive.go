package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/braid-vpn/braid/internal/notice"
	"github.com/braid-vpn/braid/internal/targets"
)

// labArchive builds braid-lab for t and writes the archive users unpack next
// to braid: the binary, its licences and the scenario files `braid lab run`
// takes. It returns the archive's name.
func labArchive(src Source, t targets.Target, stage, out string) (string, error) {
	base := fmt.Sprintf("braid-lab_%s_linux_%s", src.Version, t.Name())
	bin := filepath.Join(stage, base, "braid-lab")
	if err := goBuild(src, t, "./cmd/braid-lab", bin); err != nil {
		return "", err
	}
	members := map[string]member{
		"braid-lab":           {path: bin, mode: 0o755},
		"LICENSE":             {path: filepath.Join(src.Root, "LICENSE"), mode: 0o644},
		"THIRD_PARTY_NOTICES": {data: []byte(notice.For("braid-lab")), mode: 0o644},
	}
	scenarios, err := filepath.Glob(filepath.Join(src.Root, "lab/scenarios/*.toml"))
	if err != nil {
		return "", err
	}
	for _, s := range scenarios {
		members["lab/scenarios/"+filepath.Base(s)] = member{path: s, mode: 0o644}
	}
	name := base + ".tar.gz"
	tgz, err := tarGz(src, base, members)
	if err != nil {
		return "", err
	}
	return name, os.WriteFile(filepath.Join(out, name), tgz, 0o644)
}

// member is one file of an archive: its content from path, or data.
type member struct {
	path string
	data []byte
	mode int64
}

// tarGz is a gzipped tar of members under the directory prefix: sorted,
// owned by root, every time SOURCE_DATE_EPOCH, so that it depends on the
// files alone.
func tarGz(src Source, prefix string, members map[string]member) ([]byte, error) {
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, n := range names {
		// Parent directories first, each once.
		for _, d := range parents(prefix + "/" + n) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: src.Time, Format: tar.FormatUSTAR}); err != nil {
				return nil, err
			}
		}
		m := members[n]
		data := m.data
		if m.path != "" {
			var err error
			if data, err = os.ReadFile(m.path); err != nil {
				return nil, err
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: prefix + "/" + n, Mode: m.mode, Size: int64(len(data)), ModTime: src.Time, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return gzipBytes(buf.Bytes()), nil
}

// parents are the directories above a slash-separated path, outermost first.
func parents(p string) []string {
	var ds []string
	for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
		ds = append([]string{d}, ds...)
	}
	return ds
}
