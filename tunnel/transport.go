package tunnel

import (
	"net/netip"

	"github.com/braid-vpn/braid/conn"
	// Named so as not to collide with the engine tests' stream helper.
	streamconn "github.com/braid-vpn/braid/conn/stream"
	"github.com/braid-vpn/braid/control"
)

// streamStatus describes the TCP or MPTCP connection under a path of a stream
// transport (conn/stream), for status; nil for a UDP socket. The engine treats a
// stream Conn like any path socket: this is the only place that knows the
// difference.
func streamStatus(c conn.Conn, remote netip.AddrPort) *control.StreamStatus {
	in, ok := streamconn.InfoOf(c, remote)
	if !ok {
		return nil
	}
	st := &control.StreamStatus{
		Kind:      in.Kind.String(),
		Connected: in.Connected,
		Since:     in.Since,
		Connects:  in.Connects,
		LastError: in.LastError,
		TxBytes:   in.TxBytes,
		RxBytes:   in.RxBytes,
	}
	if in.Connected {
		st.Local, st.Remote = in.Local.String(), in.Remote.String()
	}
	if t := in.TCP; t != nil {
		st.RTTMs = ms(t.RTT)
		st.CwndSegments = t.Cwnd
		st.Retransmits = t.Retransmits
	}
	if m := in.MPTCP; m != nil {
		st.ExtraSubflows = m.Subflows
		st.ExtraSubflowsMax = m.SubflowsMax
		for _, sf := range m.SubflowList {
			st.Subflows = append(st.Subflows, control.SubflowStatus{
				Local:        sf.Local.String(),
				Remote:       sf.Remote.String(),
				RTTMs:        ms(sf.TCP.RTT),
				CwndSegments: sf.TCP.Cwnd,
				TxBytes:      sf.TCP.BytesSent,
				RxBytes:      sf.TCP.BytesReceived,
				AckedBytes:   sf.TCP.BytesAcked,
				RetransBytes: sf.TCP.BytesRetrans,
			})
		}
	}
	return st
}
