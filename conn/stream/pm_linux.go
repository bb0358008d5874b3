//go:build linux

package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The MPTCP path manager's generic netlink interface (linux/mptcp.h), which is
// what `ip mptcp` speaks.
const (
	pmFamily  = "mptcp_pm"
	pmVersion = 1

	pmCmdAddAddr   = 1
	pmCmdDelAddr   = 2
	pmCmdGetAddr   = 3
	pmCmdSetLimits = 5
	pmCmdGetLimits = 6

	pmAttrAddr          = 1
	pmAttrRcvAddAddrs   = 2
	pmAttrSubflows      = 3
	pmAddrAttrFamily    = 1
	pmAddrAttrID        = 2
	pmAddrAttrAddr4     = 3
	pmAddrAttrAddr6     = 4
	pmAddrAttrPort      = 5
	pmAddrAttrFlags     = 6
	pmAddrAttrIfIdx     = 7
	nlaNested           = 1 << 15 // NLA_F_NESTED
	nlaTypeMask         = ^uint16(3 << 14)
	mptcpPMAddrMaxLimit = 8 // MPTCP_PM_ADDR_MAX: the kernel's ceiling for both limits
)

// EndpointFlags are the flags of an MPTCP endpoint (ip mptcp endpoint … FLAGS).
type EndpointFlags uint32

const (
	// FlagSignal: announce the address to peers (ADD_ADDR).
	FlagSignal EndpointFlags = 1 << 0
	// FlagSubflow: open subflows from the address.
	FlagSubflow EndpointFlags = 1 << 1
	// FlagBackup: subflows from the address are backups.
	FlagBackup EndpointFlags = 1 << 2
	// FlagFullmesh: open a subflow from the address to every address the peer has
	// (the initial one and every announced one), not just one.
	FlagFullmesh EndpointFlags = 1 << 3
)

func (f EndpointFlags) String() string {
	s := ""
	for _, x := range []struct {
		f    EndpointFlags
		name string
	}{{FlagSignal, "signal"}, {FlagSubflow, "subflow"}, {FlagBackup, "backup"}, {FlagFullmesh, "fullmesh"}} {
		if f&x.f != 0 {
			if s != "" {
				s += " "
			}
			s += x.name
		}
	}
	return s
}

// Endpoint is one entry of the in-kernel path manager's endpoint list.
type Endpoint struct {
	ID      uint8 // assigned by the kernel when 0
	Addr    netip.Addr
	Port    uint16 // only for signal endpoints: the peer joins to this port
	Ifindex int
	Flags   EndpointFlags
}

func (e Endpoint) String() string {
	s := e.Addr.String()
	if e.Port != 0 {
		s += fmt.Sprintf(" port %d", e.Port)
	}
	if e.Ifindex != 0 {
		s += fmt.Sprintf(" ifindex %d", e.Ifindex)
	}
	return s + " " + e.Flags.String()
}

// Limits are the per-connection limits of the in-kernel path manager.
type Limits struct {
	// Subflows is how many subflows a connection may have besides the first.
	Subflows uint32
	// AddAddrAccepted is how many announced peer addresses a connection uses.
	AddAddrAccepted uint32
}

// ErrNoPathManager is returned when the kernel has no MPTCP generic netlink family.
var ErrNoPathManager = errors.New("MPTCP path manager (generic netlink family mptcp_pm) not found")

// pmClient talks to the mptcp_pm family of the calling thread's network namespace.
type pmClient struct {
	family uint16
}

func newPMClient() (*pmClient, error) {
	f, err := netlink.GenlFamilyGet(pmFamily)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("%w (sysctl %s, CONFIG_MPTCP)", ErrNoPathManager, MPTCPSysctl)
		}
		return nil, fmt.Errorf("mptcp path manager: %w", err)
	}
	return &pmClient{family: f.ID}, nil
}

func (c *pmClient) request(cmd uint8, flags int, attrs ...*nl.RtAttr) ([][]byte, error) {
	req := nl.NewNetlinkRequest(int(c.family), flags|unix.NLM_F_ACK)
	req.AddData(&nl.Genlmsg{Command: cmd, Version: pmVersion})
	for _, a := range attrs {
		req.AddData(a)
	}
	return req.Execute(unix.NETLINK_GENERIC, 0)
}

func addrAttr(e Endpoint) *nl.RtAttr {
	a := nl.NewRtAttr(pmAttrAddr|nlaNested, nil)
	ne := binary.NativeEndian
	fam := make([]byte, 2)
	if e.Addr.Is4() {
		ne.PutUint16(fam, unix.AF_INET)
		a.AddRtAttr(pmAddrAttrFamily, fam)
		b := e.Addr.As4()
		a.AddRtAttr(pmAddrAttrAddr4, b[:])
	} else if e.Addr.IsValid() {
		ne.PutUint16(fam, unix.AF_INET6)
		a.AddRtAttr(pmAddrAttrFamily, fam)
		b := e.Addr.As16()
		a.AddRtAttr(pmAddrAttrAddr6, b[:])
	}
	if e.ID != 0 {
		a.AddRtAttr(pmAddrAttrID, []byte{e.ID})
	}
	if e.Port != 0 {
		p := make([]byte, 2)
		ne.PutUint16(p, e.Port)
		a.AddRtAttr(pmAddrAttrPort, p)
	}
	if e.Flags != 0 {
		f := make([]byte, 4)
		ne.PutUint32(f, uint32(e.Flags))
		a.AddRtAttr(pmAddrAttrFlags, f)
	}
	if e.Ifindex != 0 {
		i := make([]byte, 4)
		ne.PutUint32(i, uint32(int32(e.Ifindex)))
		a.AddRtAttr(pmAddrAttrIfIdx, i)
	}
	return a
}

func (c *pmClient) add(e Endpoint) error {
	_, err := c.request(pmCmdAddAddr, 0, addrAttr(e))
	return err
}

func (c *pmClient) del(e Endpoint) error {
	_, err := c.request(pmCmdDelAddr, 0, addrAttr(Endpoint{ID: e.ID, Addr: e.Addr}))
	return err
}

func (c *pmClient) endpoints() ([]Endpoint, error) {
	msgs, err := c.request(pmCmdGetAddr, unix.NLM_F_DUMP)
	if err != nil {
		return nil, err
	}
	var out []Endpoint
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask != pmAttrAddr {
				continue
			}
			e, err := parseEndpoint(a.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func parseEndpoint(b []byte) (Endpoint, error) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return Endpoint{}, err
	}
	ne := binary.NativeEndian
	var e Endpoint
	for _, a := range attrs {
		v := a.Value
		switch a.Attr.Type & nlaTypeMask {
		case pmAddrAttrID:
			if len(v) >= 1 {
				e.ID = v[0]
			}
		case pmAddrAttrAddr4:
			if len(v) >= 4 {
				e.Addr = netip.AddrFrom4([4]byte(v[:4]))
			}
		case pmAddrAttrAddr6:
			if len(v) >= 16 {
				e.Addr = netip.AddrFrom16([16]byte(v[:16]))
			}
		case pmAddrAttrPort:
			if len(v) >= 2 {
				e.Port = ne.Uint16(v)
			}
		case pmAddrAttrFlags:
			if len(v) >= 4 {
				e.Flags = EndpointFlags(ne.Uint32(v))
			}
		case pmAddrAttrIfIdx:
			if len(v) >= 4 {
				e.Ifindex = int(int32(ne.Uint32(v)))
			}
		}
	}
	return e, nil
}

func (c *pmClient) limits() (Limits, error) {
	msgs, err := c.request(pmCmdGetLimits, 0)
	if err != nil {
		return Limits{}, err
	}
	var l Limits
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return Limits{}, err
		}
		for _, a := range attrs {
			if len(a.Value) < 4 {
				continue
			}
			switch a.Attr.Type & nlaTypeMask {
			case pmAttrRcvAddAddrs:
				l.AddAddrAccepted = binary.NativeEndian.Uint32(a.Value)
			case pmAttrSubflows:
				l.Subflows = binary.NativeEndian.Uint32(a.Value)
			}
		}
	}
	return l, nil
}

func (c *pmClient) setLimits(l Limits) error {
	ne := binary.NativeEndian
	s := make([]byte, 4)
	a := make([]byte, 4)
	ne.PutUint32(s, l.Subflows)
	ne.PutUint32(a, l.AddAddrAccepted)
	_, err := c.request(pmCmdSetLimits, 0, nl.NewRtAttr(pmAttrRcvAddAddrs, a), nl.NewRtAttr(pmAttrSubflows, s))
	return err
}
