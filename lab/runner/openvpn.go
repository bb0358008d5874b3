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
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/scenario"
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
var ErrNoOpenVPN = errors.New("openvpn is not installed (Debian: apt-get install openvpn; openvpn-mptcp also needs apt-get install mptcpize)")

// ErrNoMptcpize is returned when openvpn-mptcp runs where openvpn is
// installed but mptcpize, which puts it on MPTCP sockets, is not.
var ErrNoMptcpize = errors.New("mptcpize is not installed, openvpn-mptcp needs it (Debian: apt-get install mptcpize)")

// OpenVPNArgs is the command line of one end. proto is "udp" or "tcp";
// the server listens on server, the client connects to it. The tunnel
// addresses are braid's, so the testbed's return route from the web server
// serves both.
func OpenVPNArgs(server bool, proto string, srv netip.Addr, cipher, dir string) []string {
	a := []string{"--dev", "tun", "--dev-type", "tun", "--disable-dco", "--allow-compression", "no",
		"--ca", filepath.Join(dir, "ca.crt"), "--verb", "3", "--script-security", "0",
		"--ping", "5", "--ping-exit", "60"}
	local, remote := BraidServerAddr.Addr(), BraidClientAddr.Addr()
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
	BaseSession
	env      *Env
	srv, cli *proc.Child
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
				return nil, ErrNoMptcpize
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
		start := func(ns *netns.Namespace, name string, server bool) (*proc.Child, error) {
			args := append(append([]string(nil), wrap...), exe)
			args = append(args, OpenVPNArgs(server, proto, path.ServerAddr, tr.Cipher, env.Dir)...)
			return proc.Start(ns, "openvpn "+name, exec.Command(args[0], args[1:]...))
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
			"via", BraidServerAddr.Addr().String(), "metric", "10"); err != nil {
			return nil, err
		}
		s.To = netip.AddrPortFrom(env.Web.Addr, WebPort).String()
		s.Dialer = tunnelDialer(env)
		return s, nil
	}
}

func (s *openvpnSession) PIDs() (cli, srv int) { return s.cli.PID(), s.srv.PID() }

// Counters: OpenVPN has none the lab reads; the emulators count per path.
func (s *openvpnSession) Close() error {
	s.cli.Stop(braidStopTimeout)
	s.srv.Stop(braidStopTimeout)
	// The tunnel's route to the web subnet goes with the TUN device.
	runAll(s.env.TB.Client(), s.undo)
	return nil
}

// tunnelDialer dials from the client with the route table's choice and
// refuses a connection that did not leave through the tunnel (the web
// subnet also has a direct route).
func tunnelDialer(env *Env) Dialer {
	return Dialer{NS: env.TB.Client(), CC: env.CC, Via: BraidClientAddr.Masked()}
}

// waitOutput waits until every daemon has printed line.
func waitOutput(ctx context.Context, timeout time.Duration, line string, ds ...*proc.Child) error {
	return proc.Await(ctx, timeout, 50*time.Millisecond, func() error {
		for _, d := range ds {
			if !strings.Contains(d.Output(), line) {
				return fmt.Errorf("%s not ready after %v: %s", ds[0].Name, timeout, ds[len(ds)-1].LastLine())
			}
		}
		return nil
	}, ds...)
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
