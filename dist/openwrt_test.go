package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenWrtInit runs the procd init script's start_service under sh with
// procd's functions replaced by ones that print their arguments: one instance
// per config file, each running `braid up -c FILE`, reloaded by SIGHUP.
func TestOpenWrtInit(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	conf := t.TempDir()
	for _, name := range []string{"office.toml", "lte.toml", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(conf, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs("openwrt/braid.init")
	if err != nil {
		t.Fatal(err)
	}
	prog := `
procd_open_instance() { echo "open $*"; }
procd_set_param() { echo "param $*"; }
procd_close_instance() { echo close; }
. "$1"
[ "$USE_PROCD" = 1 ] || echo "USE_PROCD unset"
start_service
`
	cmd := exec.Command(sh, "-c", prog, "sh", script)
	cmd.Env = append(os.Environ(), "BRAID_CONF_DIR="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"open lte\nparam command /usr/bin/braid up -c " + conf + "/lte.toml\n",
		"open office\nparam command /usr/bin/braid up -c " + conf + "/office.toml\n",
		"param reload_signal HUP\n",
		"param respawn",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("start_service lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "close\n") != 2 || strings.Contains(got, "notes") || strings.Contains(got, "USE_PROCD unset") {
		t.Errorf("want two instances, one per .toml:\n%s", got)
	}
}
