package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/braid-vpn/braid/control"
	"github.com/braid-vpn/braid/keys"
)

// braid runs one command line and returns exit code, stdout and stderr.
func braid(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// checkOneLineError asserts a failed run printed exactly one "braid: " line.
func checkOneLineError(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	if !strings.HasPrefix(stderr, "braid: ") || !strings.HasSuffix(stderr, "\n") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting with \"braid: \"", stderr)
	}
}

func TestGenkeyPubkeyRoundTrip(t *testing.T) {
	code, priv, stderr := braid(t, "", "genkey")
	if code != 0 || stderr != "" {
		t.Fatalf("genkey: %d %q", code, stderr)
	}
	if len(priv) != 45 || priv[44] != '\n' {
		t.Fatalf("genkey printed %q, want 44 base64 characters and a newline", priv)
	}
	k, err := keys.Parse(priv)
	if err != nil {
		t.Fatal(err)
	}
	if k[0]&7 != 0 || k[31]&0x80 != 0 || k[31]&0x40 == 0 {
		t.Errorf("private key not clamped: %x", k)
	}

	code, pub, stderr := braid(t, priv, "pubkey")
	if code != 0 || stderr != "" {
		t.Fatalf("pubkey: %d %q", code, stderr)
	}
	if pub != k.Public().String()+"\n" {
		t.Errorf("pubkey = %q, want %q", pub, k.Public().String()+"\n")
	}

	// Two keys differ.
	_, priv2, _ := braid(t, "", "genkey")
	if priv2 == priv {
		t.Errorf("genkey printed the same key twice")
	}
}

func TestPubkeyKnownVector(t *testing.T) {
	// RFC 7748 section 6.1: Alice's private and public key.
	privHex := "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
	pubHex := "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
	priv, _ := hex.DecodeString(privHex)
	pub, _ := hex.DecodeString(pubHex)
	code, out, stderr := braid(t, "  "+base64.StdEncoding.EncodeToString(priv)+"\r\n", "pubkey")
	if code != 0 || stderr != "" {
		t.Fatalf("pubkey: %d %q", code, stderr)
	}
	if want := base64.StdEncoding.EncodeToString(pub) + "\n"; out != want {
		t.Errorf("pubkey = %q, want %q", out, want)
	}
}

func TestPubkeyBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, stdin, want string
	}{
		{"garbage", "this is not a key\n", "braid: invalid private key on stdin: bad key: not base64\n"},
		{"short", "AAAA\n", "braid: invalid private key on stdin: bad key: 3 bytes, want 32\n"},
		{"empty", "", "braid: no private key on stdin (try: braid genkey | braid pubkey)\n"},
		{"blank", " \n\n", "braid: no private key on stdin (try: braid genkey | braid pubkey)\n"},
		{"huge", strings.Repeat("A", 5000), "braid: stdin holds more than a key; expected one base64 private key\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := braid(t, tc.stdin, "pubkey")
			checkOneLineError(t, code, out, stderr)
			if stderr != tc.want {
				t.Errorf("stderr = %q, want %q", stderr, tc.want)
			}
		})
	}
}

func TestGenpsk(t *testing.T) {
	code, a, _ := braid(t, "", "genpsk")
	_, b, _ := braid(t, "", "genpsk")
	if code != 0 || len(a) != 45 {
		t.Fatalf("genpsk: %d %q", code, a)
	}
	if _, err := keys.Parse(a); err != nil {
		t.Errorf("genpsk output does not parse: %v", err)
	}
	if a == b {
		t.Errorf("genpsk printed the same key twice")
	}
}

func TestGenkeyWarnsOnWorldReadableFile(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o640, true}, {0o600, false}} {
		path := filepath.Join(t.TempDir(), "k")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Chmod(tc.mode); err != nil { // umask may have narrowed it
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		code := run(context.Background(), []string{"genkey"}, strings.NewReader(""), f, &errOut)
		f.Close()
		if code != 0 {
			t.Fatalf("genkey exit %d: %s", code, errOut.String())
		}
		if got := strings.Contains(errOut.String(), "other users can read"); got != tc.warn {
			t.Errorf("mode %v: warning %v, want %v (%q)", tc.mode, got, tc.warn, errOut.String())
		}
		b, _ := os.ReadFile(path)
		if _, err := keys.Parse(string(b)); err != nil {
			t.Errorf("key file: %v", err)
		}
	}
}

func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, args := range [][]string{{"genky"}, {"genkey", "extra"}, {"status", "--frobnicate"}, {"nonsense"}} {
		code, out, stderr := braid(t, "", args...)
		checkOneLineError(t, code, out, stderr)
	}
	_, _, stderr := braid(t, "", "genky")
	if want := "braid: unknown command \"genky\" for \"braid\" (Did you mean this? genkey)\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := braid(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "braid devel (commit ") || !strings.Contains(out, ", go1.") || strings.Count(out, "\n") != 1 {
		t.Errorf("version: %d %q", code, out)
	}
	_, out2, _ := braid(t, "", "--version")
	if out2 != out {
		t.Errorf("--version = %q, version = %q", out2, out)
	}
}

// TestVersionNamesCommit: a binary built in a git checkout names the commit
// it was built from (go build stamps it; the release tool asks for it).
func TestVersionNamesCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err1 := exec.LookPath("go")
	head, err2 := exec.Command("git", "rev-parse", "HEAD").Output()
	if err1 != nil || err2 != nil {
		t.Skip("needs the go tool and a git checkout")
	}
	bin := t.TempDir() + "/braid"
	if out, err := exec.Command(goTool, "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if want := "(commit " + string(head[:12]); err != nil || !strings.Contains(string(out), want) {
		t.Errorf("braid version = %q (%v), want it to contain %q", out, err, want)
	}
}

// TestLicenses: the binary carries its third-party notice.
func TestLicenses(t *testing.T) {
	code, out, _ := braid(t, "", "licenses")
	if code != 0 || !strings.HasPrefix(out, "Third-party software in braid\n") || !strings.Contains(out, "github.com/flynn/noise") || !strings.Contains(out, "Apache License") {
		t.Errorf("licenses: exit %d, %d bytes", code, len(out))
	}
}

func TestExtraCommands(t *testing.T) {
	saved := extraCommands
	t.Cleanup(func() { extraCommands = saved })
	extraCommands = append(extraCommands[:len(extraCommands):len(extraCommands)], func() *cobra.Command {
		return &cobra.Command{Use: "hello", RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.OutOrStdout().Write([]byte("hi\n"))
			return nil
		}}
	})
	code, out, _ := braid(t, "", "hello")
	if code != 0 || out != "hi\n" {
		t.Errorf("extra command: %d %q", code, out)
	}
}

// statusServer serves a fixed status on a socket in a fresh directory.
func statusServer(t *testing.T, s control.Status) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "braid0.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { control.ServeListener(ctx, ln, func() control.Status { return s }); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

func sampleStatus() control.Status {
	return control.Status{
		Role: "client", Interface: "braid0", PublicKey: "K=",
		Time:   time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Uptime: 90 * time.Second,
		Peers: []control.PeerStatus{{Name: "server", PublicKey: "S=", Established: true, Scheduler: "minrtt",
			Paths: []control.PathStatus{{ID: 0, Local: "198.18.1.1:1", Remote: "198.18.1.2:7000", State: "active", SRTTMs: 10}}}},
	}
}

func TestStatus(t *testing.T) {
	want := sampleStatus()
	sock := statusServer(t, want)

	var table bytes.Buffer
	control.FormatStatus(&table, want)
	code, out, stderr := braid(t, "", "status", "--socket", sock)
	if code != 0 || stderr != "" {
		t.Fatalf("status: %d %q", code, stderr)
	}
	if out != table.String() {
		t.Errorf("status output:\n%s\nwant:\n%s", out, table.String())
	}

	code, out, _ = braid(t, "", "status", "--json", "--socket", sock)
	var got control.Status
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("status --json: %d %v %q", code, err, out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status --json = %+v, want %+v", got, want)
	}
	if !strings.Contains(out, "\n  \"role\": \"client\",\n") {
		t.Errorf("JSON is not indented: %q", out)
	}

	// -c FILE: the socket comes from the config file, which need not have a
	// readable key file.
	cfgPath := filepath.Join(t.TempDir(), "client.toml")
	doc := "role = \"client\"\nprivate_key_file = \"/nonexistent.key\"\n[control]\nsocket = \"" + sock + "\"\n"
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = braid(t, "", "status", "-c", cfgPath)
	if code != 0 || out != table.String() {
		t.Errorf("status -c: %d %q %q", code, out, stderr)
	}
}

func TestStatusErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.sock")
	code, out, stderr := braid(t, "", "status", "--socket", missing)
	checkOneLineError(t, code, out, stderr)
	if want := "braid: braid is not running? no control socket at " + missing + "\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}

	code, out, stderr = braid(t, "", "status", "-c", "x.toml", "--socket", missing)
	checkOneLineError(t, code, out, stderr)
	if want := "braid: status: use -c FILE or --socket PATH, not both\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}

	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("role = \"client\"\n[control]\nsockte = \"/x\"\n"), 0o600)
	code, out, stderr = braid(t, "", "status", "-c", bad)
	checkOneLineError(t, code, out, stderr)
	if want := "braid: " + bad + ": line 3: unknown key \"control.sockte\" (did you mean \"socket\"?)\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}

func TestStatusDefaultSocket(t *testing.T) {
	const defaultSocket = "/run/braid/braid0.sock"
	if _, err := os.Stat(defaultSocket); err == nil {
		t.Skip("a braid is running on this machine; not testing the default socket")
	}
	code, out, stderr := braid(t, "", "status")
	checkOneLineError(t, code, out, stderr)
	if want := "braid: braid is not running? no control socket at /run/braid/braid0.sock\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}
