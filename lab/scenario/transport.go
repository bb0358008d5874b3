package scenario

import (
	"fmt"
	"slices"
)

// Transport option keys, as written in a [[transports]] entry (docs/lab.md
// says what each sets). Their meaning and validation are the same for every
// kind that accepts them.
const (
	OptPath       = "path"
	OptScheduler  = "scheduler"
	OptReorder    = "reorder"
	OptCongestion = "congestion"
	OptWeights    = "weights"
	OptCipher     = "cipher"
	OptSubflows   = "subflows"
	OptRecovery   = "recovery"
	OptPriorities = "priorities"
)

var optionKeys = []string{OptPath, OptScheduler, OptWeights, OptReorder, OptCongestion, OptRecovery, OptCipher, OptSubflows, OptPriorities}

// OpenVPN data channel ciphers (OptCipher), and the bound of OptSubflows.
const (
	CipherDefault = "default"
	CipherNone    = "none"
	MaxSubflows   = 8
)

// TransportKind describes a transport the lab can measure. Other packages
// may add kinds with RegisterTransport, from an init function (the registry
// has no lock), so that a scenario naming them parses.
type TransportKind struct {
	Name string
	// Summary is one line for help text.
	Summary string
	// Options lists the option keys (Opt*) the kind accepts; any other
	// option set in the file is an error naming the ones it takes.
	Options []string
	// Braid says that the download runs through a braid client and server,
	// whose server a competing braid client can share (competing_transport
	// = "braid").
	Braid bool
}

// Accepts reports whether the kind takes option opt.
func (k *TransportKind) Accepts(opt string) bool { return slices.Contains(k.Options, opt) }

// Built-in transport kinds (their summaries below say what each is).
const (
	TransportDirect       = "direct"
	TransportMPTCPDirect  = "mptcp-direct"
	TransportBraid        = "braid"
	TransportUDPTunnel    = "udp-tunnel"
	TransportTCPTunnel    = "tcp-tunnel"
	TransportMPTCPTunnel  = "mptcp-tunnel"
	TransportOpenVPNUDP   = "openvpn-udp"
	TransportOpenVPNTCP   = "openvpn-tcp"
	TransportOpenVPNMPTCP = "openvpn-mptcp"
)

var kinds = []TransportKind{
	{Name: TransportDirect, Summary: "no tunnel: the download runs over one path with plain TCP", Options: []string{OptPath}},
	{Name: TransportMPTCPDirect, Summary: "no tunnel: the download itself uses the kernel's MPTCP with full-mesh subflows over every path"},
	{Name: TransportBraid, Summary: "the download runs through a braid tunnel over every path", Options: []string{OptScheduler, OptWeights, OptReorder, OptCongestion, OptRecovery, OptPriorities}, Braid: true},
	{Name: TransportUDPTunnel, Summary: "a braid tunnel over one path (UDP): the paper's TCP-in-UDP", Options: []string{OptPath, OptReorder, OptRecovery}, Braid: true},
	{Name: TransportTCPTunnel, Summary: "a braid tunnel over one TCP connection on one path: the paper's TCP-in-TCP", Options: []string{OptPath}, Braid: true},
	{Name: TransportMPTCPTunnel, Summary: "a braid tunnel over one kernel MPTCP connection with subflows on every path: the paper's TCP-in-MPTCP", Options: []string{OptSubflows}, Braid: true},
	{Name: TransportOpenVPNUDP, Summary: "OpenVPN over UDP on one path", Options: []string{OptPath, OptCipher}},
	{Name: TransportOpenVPNTCP, Summary: "OpenVPN over TCP on one path", Options: []string{OptPath, OptCipher}},
	{Name: TransportOpenVPNMPTCP, Summary: "OpenVPN over TCP turned into MPTCP by mptcpize, subflows on every path", Options: []string{OptCipher, OptSubflows}},
}

// RegisterTransport adds a kind. It panics on an empty or duplicate name or
// an unknown option key: those are programming errors, found at start-up.
func RegisterTransport(k TransportKind) {
	if k.Name == "" {
		panic("scenario: RegisterTransport with empty name")
	}
	if i := slices.IndexFunc(k.Options, func(o string) bool { return !slices.Contains(optionKeys, o) }); i >= 0 {
		panic(fmt.Sprintf("scenario: transport %q: unknown option %q", k.Name, k.Options[i]))
	}
	if _, dup := LookupTransport(k.Name); dup {
		panic(fmt.Sprintf("scenario: transport %q registered twice", k.Name))
	}
	k.Options = slices.Clone(k.Options)
	kinds = append(kinds, k)
}

// TransportNames lists the registered kinds in registration order.
func TransportNames() []string {
	return mapf(kinds, func(k TransportKind) string { return k.Name })
}

// LookupTransport returns the kind registered as name.
func LookupTransport(name string) (TransportKind, bool) {
	if k := find(kinds, func(k *TransportKind) bool { return k.Name == name }); k != nil {
		return *k, true
	}
	return TransportKind{}, false
}
