package scenario

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestZZDump(t *testing.T) {
	out := os.Getenv("SCEN_DUMP")
	if out == "" {
		t.Skip()
	}
	files, _ := filepath.Glob("../scenarios/*.toml")
	res := map[string]any{}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			res[f] = err.Error()
			continue
		}
		res[f] = map[string]any{"name": s.Name, "file": s.File, "desc": s.Description, "top": s.Topology, "exp": s.Experiment, "tr": s.Transports, "axes": s.Axes(), "points": s.Points()}
	}
	d := Default()
	res["default"] = map[string]any{"top": d.Topology, "exp": d.Experiment, "tr": d.Transports, "axes": d.Axes(), "points": d.Points()}
	b, _ := json.MarshalIndent(res, "", " ")
	os.WriteFile(out, b, 0o644)
}
