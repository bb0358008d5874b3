package config

import "testing"

func TestTransport(t *testing.T) {
	dir := keyDir(t)
	cl, sv := minimalClient(dir), minimalServer(dir)

	cfg := mustParse(t, "client.toml", cl)
	if cfg.Client.Transport != "udp" || cfg.Client.TCPCongestion != "" {
		t.Errorf("client default transport %q, tcp_congestion %q", cfg.Client.Transport, cfg.Client.TCPCongestion)
	}
	cfg = mustParse(t, "server.toml", sv)
	if cfg.Server.Transport != "udp" || cfg.Server.TCPCongestion != "" {
		t.Errorf("server default transport %q, tcp_congestion %q", cfg.Server.Transport, cfg.Server.TCPCongestion)
	}
	for _, tr := range []string{"udp", "tcp", "mptcp"} {
		cfg = mustParse(t, "client.toml", cl+"transport = \""+tr+"\"\n")
		if cfg.Client.Transport != tr {
			t.Errorf("client transport = %q parsed as %q", tr, cfg.Client.Transport)
		}
		cfg = mustParse(t, "server.toml", edit(t, sv, "[[server.clients]]", "transport = \""+tr+"\"\n[[server.clients]]"))
		if cfg.Server.Transport != tr {
			t.Errorf("server transport = %q parsed as %q", tr, cfg.Server.Transport)
		}
	}
	cfg = mustParse(t, "client.toml", cl+"transport = \"mptcp\"\ntcp_congestion = \"cubic\"\n")
	if cfg.Client.TCPCongestion != "cubic" {
		t.Errorf("tcp_congestion parsed as %q", cfg.Client.TCPCongestion)
	}
	cfg = mustParse(t, "server.toml", edit(t, sv, "[[server.clients]]", "transport = \"tcp\"\ntcp_congestion = \"reno\"\n[[server.clients]]"))
	if cfg.Server.TCPCongestion != "reno" {
		t.Errorf("server tcp_congestion parsed as %q", cfg.Server.TCPCongestion)
	}
	// The weighted scheduler still works with tcp: each path is its own connection.
	cfg = mustParse(t, "client.toml", cl+"transport = \"tcp\"\nscheduler = \"weighted\"\nweights = [2]\n")
	if len(cfg.Client.Weights) != 1 {
		t.Errorf("weights %v", cfg.Client.Weights)
	}
}

func TestTransportErrors(t *testing.T) {
	dir := keyDir(t)
	cl, sv := minimalClient(dir), minimalServer(dir)
	cases := []struct {
		name, file, doc, want string
	}{
		{"unknown client transport", "client.toml", cl + "transport = \"x\"\n",
			`client.toml: client.transport: unknown transport "x" (valid: udp, tcp, mptcp)`},
		{"transport is case sensitive", "client.toml", cl + "transport = \"TCP\"\n",
			`client.toml: client.transport: unknown transport "TCP" (valid: udp, tcp, mptcp)`},
		{"unknown server transport", "server.toml", edit(t, sv, "[[server.clients]]", "transport = \"quic\"\n[[server.clients]]"),
			`server.toml: server.transport: unknown transport "quic" (valid: udp, tcp, mptcp)`},
		{"transport is a string", "client.toml", cl + "transport = 1\n",
			`client.toml: line 10: client.transport: expected a string, found an integer`},
		{"tcp_congestion with udp", "client.toml", cl + "tcp_congestion = \"cubic\"\n",
			`client.toml: client.tcp_congestion: set, but transport = "udp" opens no TCP sockets (it applies to "tcp" and "mptcp")`},
		{"tcp_congestion with udp server", "server.toml", edit(t, sv, "[[server.clients]]", "tcp_congestion = \"bbr\"\n[[server.clients]]"),
			`server.toml: server.tcp_congestion: set, but transport = "udp" opens no TCP sockets (it applies to "tcp" and "mptcp")`},
		{"bad tcp_congestion name", "client.toml", cl + "transport = \"tcp\"\ntcp_congestion = \"Cubic!\"\n",
			`client.toml: client.tcp_congestion: "Cubic!" is not a congestion control name (lower-case letters, digits and '_', at most 15; see /proc/sys/net/ipv4/tcp_available_congestion_control)`},
		{"weights with mptcp", "client.toml", cl + "transport = \"mptcp\"\nscheduler = \"weighted\"\nweights = [1]\n",
			`client.toml: client.weights: set, but transport = "mptcp" runs the tunnel as one path (the kernel spreads its subflows)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.file, []byte(c.doc))
			if err == nil || err.Error() != c.want {
				t.Fatalf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}
