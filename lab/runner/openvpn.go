package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/testbed"
	"github.com/braid-vpn/braid/netns"
)

// OpenVPN baseline settings: the paper's (§3.1: no compression; its runs
// had encryption off, which cipher = "none" reproduces), in point-to-point
// TLS mode with certificates made per point.
const (
	OpenVPNPort = 1194
	// OpenVPNReadyTimeout bounds waiting for both ends to report
	// "Initialization Sequence Completed".
	OpenVPNReadyTimeout = 20 * time.Second
	openvpnReady        = "Initialization Sequence Completed"
)

// ErrNoOpenVPN is returned when an openvpn transport runs on a machine
// without the binaries it needs.
var ErrNoOpenVPN = errors.New("openvpn is not installed (Debian: apt-get install openvpn; openvpn-mptcp also needs mptcpize from apt-get install mptcpd)")

// OpenVPNArgs is the command line of one end. proto is "udp" or "tcp";
// the server listens on server, the client connects to it. The tunnel
// addresses are braid's, so the testbed's return route from the web server
// serves both.
func OpenVPNArgs(server bool, proto string, srv netip.Addr, cipher, dir string) []string {
	a := []string{"--dev", "tun", "--dev-type", "tun", "--disable-dco", "--allow-compression", "no",
		"--ca", filepath.Join(dir, "ca.crt"), "--verb", "3", "--script-security", "0",
		"--ping", "5", "--ping-exit", "60"}
	local, remote := braidServerAddr.Addr(), braidClientAddr.Addr()
	if server {
		p := proto
		if proto == "tcp" {
			p = "tcp-server"
		}
		a = append(a, "--proto", p, "--local", srv.String(), "--lport", strconv.Itoa(OpenVPNPort),
			"--tls-server", "--dh", "none", "--cert", filepath.Join(dir, "server.crt"), "--key", filepath.Join(dir, "server.key"))
	} else {
		p := proto
		if proto == "tcp" {
			p = "tcp-client"
		}
		local, remote = remote, local
		a = append(a, "--proto", p, "--remote", srv.String(), strconv.Itoa(OpenVPNPort), "--nobind",
			"--connect-retry", "1", "--tls-client", "--remote-cert-tls", "server",
			"--cert", filepath.Join(dir, "client.crt"), "--key", filepath.Join(dir, "client.key"))
	}
	a = append(a, "--ifconfig", local.String(), remote.String())
	if cipher == scenario.CipherNone {
		a = append(a, "--data-ciphers", "none", "--cipher", "none", "--auth", "none")
	}
	return a
}

type openvpnSession struct {
	directSession
	env      *Env
	srv, cli *daemon
	undo     [][]string // client path manager set-up of openvpn-mptcp
}

func startOpenVPN(proto string, mptcp bool) StartFunc {
	return func(ctx context.Context, env *Env) (_ Session, err error) {
		exe, err := exec.LookPath("openvpn")
		if err != nil {
			return nil, ErrNoOpenVPN
		}
		var wrap []string
		if mptcp {
			mz, err := exec.LookPath("mptcpize")
			if err != nil {
				return nil, ErrNoOpenVPN
			}
			wrap = []string{mz, "run"}
		}
		tr := env.Point.Transport
		path := env.TB.Plan.Paths[0]
		if !mptcp {
			if path, err = pathFor(env, tr.Path); err != nil {
				return nil, err
			}
		}
		s := &openvpnSession{env: env}
		defer func() {
			if err != nil {
				s.Close()
			}
		}()
		if mptcp {
			if s.undo, err = setupMPTCP(ctx, env, env.TB.Server(), tr.Subflows); err != nil {
				return nil, err
			}
		}
		if err := writeOpenVPNCerts(env.Dir); err != nil {
			return nil, err
		}
		start := func(ns *netns.Namespace, name string, server bool) (*daemon, error) {
			args := append(append([]string(nil), wrap...), exe)
			args = append(args, OpenVPNArgs(server, proto, path.ServerAddr, tr.Cipher, env.Dir)...)
			return startProcess(ns, "openvpn "+name, args)
		}
		if s.srv, err = start(env.TB.Server(), "server", true); err != nil {
			return nil, err
		}
		if s.cli, err = start(env.TB.Client(), "client", false); err != nil {
			return nil, err
		}
		if err := waitOutput(ctx, OpenVPNReadyTimeout, openvpnReady, s.srv, s.cli); err != nil {
			return nil, err
		}
		// Into the tunnel: the web subnet through the server's tunnel
		// address, ahead of the client's direct route (DirectMetric).
		if _, err := env.TB.Client().Exec(ctx, "ip", "route", "add", env.TB.Plan.WebSubnet.String(),
			"via", braidServerAddr.Addr().String(), "metric", "10"); err != nil {
			return nil, err
		}
		s.target = netip.AddrPortFrom(env.Web.Addr, WebPort).String()
		s.dial = tunnelDial(env, "openvpn")
		return s, nil
	}
}

// Counters: OpenVPN has none the lab reads; the emulators count per path.
func (s *openvpnSession) Close() error {
	s.cli.stop()
	s.srv.stop()
	// The tunnel's route to the web subnet goes with the TUN device.
	runAll(s.env.TB.Client(), s.undo)
	return nil
}

// tunnelDial dials from the client with the route table's choice and
// refuses a connection that did not leave through the tunnel (the web
// subnet also has a direct route).
func tunnelDial(env *Env, what string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	plain := dialFrom(env.TB.Client(), netip.Addr{}, env.CC, false)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if la, ok := c.LocalAddr().(*net.TCPAddr); ok {
			if a, _ := netip.AddrFromSlice(la.IP); !braidClientAddr.Contains(a.Unmap()) {
				c.Close()
				return nil, fmt.Errorf("%s: the download left from %v, not through the tunnel", what, la)
			}
		}
		return c, nil
	}
}

// startProcess starts argv inside ns with its output kept for errors.
func startProcess(ns *netns.Namespace, name string, argv []string) (*daemon, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	d := &daemon{name: name, cmd: cmd, out: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := ns.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(d.done) }()
	return d, nil
}

// waitOutput waits until every daemon has printed line.
func waitOutput(ctx context.Context, timeout time.Duration, line string, ds ...*daemon) error {
	deadline := time.Now().Add(timeout)
	for {
		ready := true
		for _, d := range ds {
			if d.exited() {
				return fmt.Errorf("%s exited: %s", d.name, d.lastLine())
			}
			if !strings.Contains(d.out.String(), line) {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %s", ds[0].name, timeout, ds[len(ds)-1].lastLine())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// setupMPTCP checks MPTCP in the client and peer namespaces and configures
// the client's in-kernel path manager (MPTCPSubflowCommands). It returns the
// commands that undo it: the testbed outlives the point.
func setupMPTCP(ctx context.Context, env *Env, peer *netns.Namespace, subflows int) (undo [][]string, err error) {
	cli := env.TB.Client()
	for _, ns := range []*netns.Namespace{cli, peer} {
		v, err := ns.Sysctl("net.mptcp.enabled")
		if err != nil {
			if os.IsNotExist(err) || strings.Contains(err.Error(), "no such file") {
				return nil, fmt.Errorf("MPTCP is not available: this kernel has no net.mptcp (CONFIG_MPTCP)")
			}
			return nil, fmt.Errorf("MPTCP: %w", err)
		}
		if strings.TrimSpace(v) != "1" {
			return nil, fmt.Errorf("MPTCP is disabled in namespace %s (net.mptcp.enabled=%s)", ns, strings.TrimSpace(v))
		}
	}
	if _, err := peer.Exec(ctx, "ip", MPTCPCommands(nil)[0]...); err != nil {
		return nil, fmt.Errorf("MPTCP limits in %s: %w", peer, err)
	}
	do, undo := MPTCPSubflowCommands(env.TB.Plan.Paths, subflows)
	for i, args := range do {
		if _, err := cli.Exec(ctx, "ip", args...); err != nil {
			runAll(cli, undo[len(undo)-i:])
			return nil, fmt.Errorf("MPTCP path manager: %w", err)
		}
	}
	return undo, nil
}

// runAll runs ip commands, best effort (an undo list).
func runAll(ns *netns.Namespace, cmds [][]string) {
	for _, args := range cmds {
		ns.Exec(context.Background(), "ip", args...)
	}
}

// MPTCPSubflowCommands is the client's path manager set-up for an MPTCP
// tunnel and the commands that undo it, in reverse order. subflows = 1 is
// MPTCPCommands: a subflow endpoint on every path after the first, the full
// mesh with one server address. subflows = n > 1 is the paper's
// ndiffports-like variant, n subflows on every path: the in-kernel path
// manager takes one endpoint per address, so each path gets n-1 extra
// addresses (the path's address + 16·k) with a policy rule into the path's
// routing table, each an endpoint of its own.
func MPTCPSubflowCommands(paths []testbed.Path, subflows int) (do, undo [][]string) {
	do = MPTCPCommands(paths)
	undo = [][]string{{"mptcp", "endpoint", "flush"}}
	for _, p := range paths {
		a := p.ClientAddr
		for k := 1; k < subflows; k++ {
			for range 16 {
				a = a.Next()
			}
			pfx := netip.PrefixFrom(a, p.Subnet.Bits()).String()
			host := netip.PrefixFrom(a, 32).String()
			table := strconv.Itoa(p.Table)
			do = append(do,
				[]string{"addr", "add", pfx, "dev", p.ClientIf},
				[]string{"rule", "add", "from", host, "table", table},
				[]string{"mptcp", "endpoint", "add", a.String(), "dev", p.ClientIf, "subflow"})
			undo = append(undo,
				[]string{"rule", "del", "from", host, "table", table},
				[]string{"addr", "del", pfx, "dev", p.ClientIf})
		}
	}
	return do, undo
}

// writeOpenVPNCerts makes a throwaway CA and the two ends' certificates
// (ECDSA P-256, valid for a day) in dir.
func writeOpenVPNCerts(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "braid lab CA"},
		NotBefore: now, NotAfter: now.Add(25 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDER); err != nil {
		return err
	}
	for i, end := range []struct {
		name string
		eku  x509.ExtKeyUsage
	}{{"server", x509.ExtKeyUsageServerAuth}, {"client", x509.ExtKeyUsageClientAuth}} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: "braid lab " + end.name},
			NotBefore: now, NotAfter: now.Add(25 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyAgreement, ExtKeyUsage: []x509.ExtKeyUsage{end.eku},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, end.name+".crt"), "CERTIFICATE", der); err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, end.name+".key"), "PRIVATE KEY", kb); err != nil {
			return err
		}
	}
	return nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
