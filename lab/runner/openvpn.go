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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/braid-vpn/braid/lab/proc"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/netns"
)

// The OpenVPN baselines (docs/lab.md): both ends must report openvpnReady
// within OpenVPNReadyTimeout.
const (
	OpenVPNPort         = 1194
	OpenVPNReadyTimeout = 20 * time.Second
	openvpnReady        = "Initialization Sequence Completed"
)

// The errors of an openvpn transport run where its binaries are missing.
var (
	ErrNoOpenVPN  = errors.New("openvpn is not installed (Debian: apt-get install openvpn; openvpn-mptcp also needs apt-get install mptcpize)")
	ErrNoMptcpize = errors.New("mptcpize is not installed, openvpn-mptcp needs it (Debian: apt-get install mptcpize)")
)

// OpenVPNArgs is the command line of one end. proto is "udp" or "tcp";
// the server listens on srv, the client connects to it. The tunnel
// addresses are braid's, so the testbed's return route from the web server
// serves both.
func OpenVPNArgs(server bool, proto string, srv netip.Addr, cipher, dir string) []string {
	port := strconv.Itoa(OpenVPNPort)
	a := []string{"--dev", "tun", "--dev-type", "tun", "--disable-dco", "--allow-compression", "no",
		"--ca", filepath.Join(dir, "ca.crt"), "--verb", "3", "--script-security", "0", "--ping", "5", "--ping-exit", "60"}
	local, remote, role := BraidServerAddr.Addr(), BraidClientAddr.Addr(), "server"
	if server {
		a = append(a, "--local", srv.String(), "--lport", port, "--tls-server", "--dh", "none")
	} else {
		local, remote, role = remote, local, "client"
		a = append(a, "--remote", srv.String(), port, "--nobind", "--connect-retry", "1", "--tls-client", "--remote-cert-tls", "server")
	}
	if proto == "tcp" {
		proto = "tcp-" + role
	}
	a = append(a, "--proto", proto, "--cert", filepath.Join(dir, role+".crt"), "--key", filepath.Join(dir, role+".key"),
		"--ifconfig", local.String(), remote.String())
	if cipher == scenario.CipherNone {
		a = append(a, "--data-ciphers", "none", "--cipher", "none", "--auth", "none")
	}
	return a
}

// startOpenVPN starts OpenVPN over proto on one path, or, mptcp, over TCP
// made MPTCP by mptcpize with subflows on every path.
func startOpenVPN(proto string, mptcp bool) StartFunc {
	return func(ctx context.Context, env *Env) (_ Session, err error) {
		exe, err := exec.LookPath("openvpn")
		if err != nil {
			return nil, ErrNoOpenVPN
		}
		s, cmd, path := &BaseSession{}, []string{exe}, env.TB.Plan.Paths[0]
		defer func() {
			if err != nil {
				s.Close()
			}
		}()
		if mptcp {
			mz, err := exec.LookPath("mptcpize")
			if err != nil {
				return nil, ErrNoMptcpize
			}
			cmd = []string{mz, "run", exe}
			if s.undo, err = setupMPTCP(ctx, env, env.TB.Server(), env.Point.Transport.Subflows); err != nil {
				return nil, err
			}
		} else if path, err = pathFor(env); err != nil {
			return nil, err
		}
		if err := writeOpenVPNCerts(env.Dir); err != nil {
			return nil, err
		}
		start := func(ns *netns.Namespace, name string, server bool) (*proc.Child, error) {
			a := slices.Concat(cmd, OpenVPNArgs(server, proto, path.ServerAddr, env.Point.Transport.Cipher, env.Dir))
			return proc.Start(ns, "openvpn "+name, exec.Command(a[0], a[1:]...))
		}
		if s.srv, err = start(env.TB.Server(), "server", true); err != nil {
			return nil, err
		}
		if s.cli, err = start(env.TB.Client(), "client", false); err != nil {
			return nil, err
		}
		if err := proc.Await(ctx, OpenVPNReadyTimeout, 50*time.Millisecond, func() error {
			if !strings.Contains(s.srv.Output(), openvpnReady) || !strings.Contains(s.cli.Output(), openvpnReady) {
				return fmt.Errorf("%s not ready after %v: %s", s.srv.Name, OpenVPNReadyTimeout, s.cli.LastLine())
			}
			return nil
		}, s.srv, s.cli); err != nil {
			return nil, err
		}
		// Into the tunnel: the web subnet through the server's tunnel
		// address, ahead of the client's direct route (DirectMetric).
		if _, err := env.TB.Client().Exec(ctx, "ip", "route", "add", env.TB.Plan.WebSubnet.String(),
			"via", BraidServerAddr.Addr().String(), "metric", "10"); err != nil {
			return nil, err
		}
		s.To, s.Dialer = webTarget(env, WebPort), Dialer{NS: env.TB.Client(), CC: env.CC, Via: BraidClientAddr.Masked()}
		return s, nil
	}
}

// writeOpenVPNCerts makes a throwaway CA and the two ends' certificates
// and keys (ECDSA P-256, valid for a day) in dir: ca, server and client
// .crt and .key.
func writeOpenVPNCerts(dir string) error {
	now := time.Now().Add(-time.Hour)
	var ca *x509.Certificate
	var caKey *ecdsa.PrivateKey
	for i, name := range []string{"ca", "server", "client"} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: "braid lab " + name},
			NotBefore: now, NotAfter: now.Add(25 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyAgreement,
		}
		if i == 0 {
			tmpl.Subject.CommonName, tmpl.IsCA, tmpl.BasicConstraintsValid = "braid lab CA", true, true
			tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
			ca, caKey = tmpl, key
		} else {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}[i-1]}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if i == 0 && err == nil {
			ca, err = x509.ParseCertificate(der)
		}
		if err != nil {
			return err
		}
		for ext, b := range map[string]*pem.Block{".crt": {Type: "CERTIFICATE", Bytes: der}, ".key": {Type: "PRIVATE KEY", Bytes: kb}} {
			if err := os.WriteFile(filepath.Join(dir, name+ext), pem.EncodeToMemory(b), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
