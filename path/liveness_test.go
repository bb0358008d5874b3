package path

import (
	"testing"
	"time"
)

// A busy path (1200 B per ms, RTT 40 ms) whose link breaks must be Down
// within 0.5 s of the break, and also of the last ack.
func TestBusyPathDownFast(t *testing.T) {
	for _, tc := range []struct {
		name       string
		owd        time.Duration
		cutFwd     bool
		cutRev     bool
		wantAround time.Duration // expected delay from cut to Down (± 10 ms: timer tick, ack grouping)
	}{
		// The clock starts at the first packet whose ack never arrives:
		// sent at the cut when only data is cut, one owd before the cut
		// when acks are cut (acks of the packets then in flight are lost).
		// srtt 40: threshold clamp(2*40+4*rttvar, 200, 350) = 200 ms.
		{"rtt40-both", 20 * time.Millisecond, true, true, 200*time.Millisecond - 20*time.Millisecond},
		{"rtt40-acks-only", 20 * time.Millisecond, false, true, 200*time.Millisecond - 20*time.Millisecond},
		{"rtt40-data-only", 20 * time.Millisecond, true, false, 200 * time.Millisecond},
		// srtt 300: threshold capped at 350 ms; the 3rd unanswered packet
		// is overdue (srtt+4*rttvar+AckDelay) well before that.
		{"rtt300", 150 * time.Millisecond, true, true, 350*time.Millisecond - 150*time.Millisecond},
		{"rtt300-data-only", 150 * time.Millisecond, true, false, 350 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newSim(Config{}, tc.owd)
			m.dataGap = time.Millisecond
			m.run(3 * time.Second)
			if st := m.s.State(); st != Active || len(m.downAt) != 0 {
				t.Fatalf("healthy busy path: state %v, downs %v", st, m.downAt)
			}
			if got := m.s.Stats().SRTT; got < 2*tc.owd || got > 2*tc.owd+3*time.Millisecond {
				t.Fatalf("SRTT %v, want about %v", got, 2*tc.owd)
			}
			cut := m.now
			m.fwdUp, m.revUp = !tc.cutFwd, !tc.cutRev
			if !m.runUntil(time.Second, func() bool { return m.s.State() == Down }) {
				t.Fatalf("not Down 1 s after the cut (state %v)", m.s.State())
			}
			d := m.now.Sub(cut)
			t.Logf("Down %v after the cut, %v after the last ack", d, m.now.Sub(m.lastAck))
			if d > 500*time.Millisecond {
				t.Errorf("Down %v after the cut, want ≤ 500ms", d)
			}
			if d < tc.wantAround-10*time.Millisecond || d > tc.wantAround+10*time.Millisecond {
				t.Errorf("Down %v after the cut, expected about %v", d, tc.wantAround)
			}
			if m.now.Sub(m.lastAck) > 500*time.Millisecond {
				t.Errorf("Down %v after the last ack", m.now.Sub(m.lastAck))
			}
			if m.s.Usable() {
				t.Error("Down path is Usable")
			}
			// Everything outstanding was declared lost; only the probe sent
			// on going Down is in flight.
			if st := m.s.Stats(); st.InFlight != 40 || m.probes[len(m.probes)-1] != m.now {
				t.Errorf("Down path has %d bytes in flight, want the 40 B probe", st.InFlight)
			}
		})
	}
}

// A busy path whose acks stall for 100 ms (the reverse link drops them)
// stays in service, and so does a path with 10 % loss.
func TestBusyPathToleratesHiccupsAndLoss(t *testing.T) {
	m := newSim(Config{}, 20*time.Millisecond)
	m.dataGap = time.Millisecond
	m.run(2 * time.Second)
	m.revUp = false
	m.run(100 * time.Millisecond)
	m.revUp = true
	m.run(time.Second)
	if len(m.downAt) != 0 || m.s.State() != Active {
		t.Errorf("100 ms ack outage: downs at %v, state %v", m.downAt, m.s.State())
	}

	m = newSim(Config{}, 20*time.Millisecond)
	m.dataGap = time.Millisecond
	m.drop = func(seq uint32) bool { return seq%10 == 0 }
	m.run(5 * time.Second)
	st := m.s.Stats()
	if len(m.downAt) != 0 || st.State != Active {
		t.Errorf("10%% loss: downs at %v, state %v", m.downAt, st.State)
	}
	if st.LossRate < 0.08 || st.LossRate > 0.12 {
		t.Errorf("10%% loss: LossRate %v", st.LossRate)
	}
}

// 30 % loss makes an Active path Degraded (still usable); once the loss
// stops it returns to Active.
func TestDegraded(t *testing.T) {
	m := newSim(Config{}, 20*time.Millisecond)
	m.dataGap = time.Millisecond
	m.run(time.Second)
	if m.s.State() != Active {
		t.Fatalf("state %v", m.s.State())
	}
	m.drop = func(seq uint32) bool { return seq%10 < 3 }
	m.run(3 * time.Second)
	st := m.s.Stats()
	if st.State != Degraded || !m.s.Usable() {
		t.Errorf("30%% loss: state %v usable %v", st.State, m.s.Usable())
	}
	if st.LossRate < 0.27 || st.LossRate > 0.33 {
		t.Errorf("30%% loss: LossRate %v", st.LossRate)
	}
	if len(m.downAt) != 0 {
		t.Errorf("30%% loss took the path down at %v", m.downAt)
	}
	m.drop = nil
	if !m.runUntil(3*time.Second, func() bool { return m.s.State() == Active }) {
		t.Errorf("loss stopped, still %v (loss rate %v)", m.s.State(), m.s.Stats().LossRate)
	}
}

// Idle path, RTT 40 ms: probes every ProbeInterval; after the link breaks
// right after a probe was answered (worst case) it is Down within 2 s; Down
// paths keep being probed (at once, then every ProbeInterval) and come back
// Probing → Active when the link returns.
func TestIdlePathProbesDownAndRecovery(t *testing.T) {
	m := newSim(Config{}, 20*time.Millisecond)
	// The first probe goes out on the first timer tick; its ack makes
	// the path usable, the second probe's ack makes it Active.
	if !m.runUntil(time.Second, m.s.Usable) {
		t.Fatal("new path never usable")
	}
	if m.s.State() != Probing || m.now != ms(45) {
		t.Errorf("usable at %v in %v, want at 45ms in probing", m.now.Sub(base), m.s.State())
	}
	m.run(500 * time.Millisecond)
	if m.s.State() != Active {
		t.Fatalf("state %v after two probes", m.s.State())
	}
	m.run(3100*time.Millisecond - m.now.Sub(base))
	// Probes at 5, 405, 805, ... ms.
	for i, p := range m.probes {
		if want := ms(5 + 400*float64(i)); p != want {
			t.Fatalf("probe %d at %v, want %v", i, p.Sub(base), want.Sub(base))
		}
	}
	if len(m.probes) != 8 {
		t.Fatalf("%d probes in 3.1 s, want 8", len(m.probes))
	}
	// The probe of 2805 ms was acked at 2845 ms. Break at 2846 ms.
	m.run(ms(2846).Sub(m.now))
	if m.lastAck != ms(2845) {
		t.Fatalf("last ack at %v, want 2845ms", m.lastAck.Sub(base))
	}
	cut := m.now
	m.fwdUp, m.revUp = false, false
	if !m.runUntil(3*time.Second, func() bool { return m.s.State() == Down }) {
		t.Fatal("idle path never Down")
	}
	// First unanswered probe at 3205; Down at 3205+1400 = 4605 ms.
	if d := m.now.Sub(cut); d > 2*time.Second || m.now != ms(4605) {
		t.Errorf("Down at %v, %v after the break; want 4605ms, ≤ 2s", m.now.Sub(base), d)
	}
	if m.s.Usable() {
		t.Error("Down path usable")
	}
	// Probes while Down: at once, then every ProbeInterval.
	n := len(m.probes)
	m.run(1300 * time.Millisecond)
	down := m.probes[n-1:]
	for i, p := range down {
		if want := ms(4605 + 400*float64(i)); p != want {
			t.Errorf("probe %d while Down at %v, want %v", i, p.Sub(base), want.Sub(base))
		}
	}
	if len(down) != 4 {
		t.Errorf("%d probes in the 1.3 s while Down, want 4", len(down))
	}
	// Link back at 5905 ms: the probe of 6205 is answered at 6245
	// (Probing, usable), the one of 6605 at 6645 (Active).
	m.fwdUp, m.revUp = true, true
	if !m.runUntil(time.Second, func() bool { return m.s.State() != Down }) {
		t.Fatal("path did not come back")
	}
	if m.s.State() != Probing || !m.s.Usable() || m.now != ms(6245) {
		t.Errorf("back at %v as %v usable=%v; want 6245ms probing usable", m.now.Sub(base), m.s.State(), m.s.Usable())
	}
	if got := m.s.Stats().SRTT; got != 40*time.Millisecond {
		t.Errorf("SRTT after revival %v, want a fresh 40ms", got)
	}
	if !m.runUntil(time.Second, func() bool { return m.s.State() == Active }) || m.now != ms(6645) {
		t.Errorf("Active at %v, want 6645ms", m.now.Sub(base))
	}
	if st := m.s.Stats(); st.LossRate != 0 {
		t.Errorf("loss rate after revival %v, want 0 (outage losses excluded)", st.LossRate)
	}
}

// One lost probe on an idle path is loss, not an outage; three are not yet
// an outage either (the idle rule wants DownIdle = 1.4 s of silence).
func TestIdlePathLostProbes(t *testing.T) {
	for _, lost := range []int{1, 3} {
		m := newSim(Config{}, 20*time.Millisecond)
		m.run(2 * time.Second)
		first := m.s.NextSeq() + 1 // skip the probe in flight now
		m.drop = func(seq uint32) bool { return seq >= first && seq < first+uint32(lost) }
		m.run(3 * time.Second)
		if len(m.downAt) != 0 || m.s.State() != Active {
			t.Errorf("%d lost probes: downs at %v, state %v", lost, m.downAt, m.s.State())
		}
		if got := m.s.Stats().LostPackets; got != uint64(lost) {
			t.Errorf("%d lost probes: LostPackets %d", lost, got)
		}
	}
}

// A busy path that goes Down recovers by itself: probes are answered, the
// path is usable again, data resumes and it is Active.
func TestBusyPathRecovery(t *testing.T) {
	m := newSim(Config{}, 20*time.Millisecond)
	m.dataGap = time.Millisecond
	m.run(2 * time.Second)
	m.fwdUp, m.revUp = false, false
	if !m.runUntil(time.Second, func() bool { return m.s.State() == Down }) {
		t.Fatal("not Down")
	}
	downAt := m.now
	tx := m.s.Stats().TxPackets
	m.run(2 * time.Second)
	// Only probes while Down: one at once, then one per 400 ms.
	if got := m.s.Stats().TxPackets - tx; got != 5 {
		t.Errorf("%d packets sent in 2 s while Down, want 5 probes", got)
	}
	m.fwdUp, m.revUp = true, true
	back := m.now
	if !m.runUntil(time.Second, m.s.Usable) {
		t.Fatal("not usable 1 s after the link came back")
	}
	if d := m.now.Sub(back); d > 400*time.Millisecond+45*time.Millisecond {
		t.Errorf("usable %v after the link came back", d)
	}
	if !m.runUntil(100*time.Millisecond, func() bool { return m.s.State() == Active }) {
		t.Errorf("data flowing but not Active (%v)", m.s.State())
	}
	m.run(2 * time.Second)
	if len(m.downAt) != 1 || m.downAt[0] != downAt || m.s.State() != Active {
		t.Errorf("after recovery: downs %v state %v", m.downAt, m.s.State())
	}
	if st := m.s.Stats(); st.DeliveryRate < 1.1e6 || st.DeliveryRate > 1.3e6 {
		t.Errorf("delivery rate after recovery %v, want about 1.2e6", st.DeliveryRate)
	}
}

// Acks of packets sent before the outage do not revive a Down path; an ack
// of a probe sent afterwards does.
func TestReviveNeedsPostDownAck(t *testing.T) {
	s := NewSender(Config{}, base)
	if !s.OnTimer(ms(0)) {
		t.Fatal("new path: no probe requested")
	}
	sendAck(s, 40, 0, 40, 0)
	sendAck(s, 40, 100, 140, 0)
	if s.State() != Active {
		t.Fatalf("state %v", s.State())
	}
	if s.OnTimer(ms(140)) {
		t.Error("probe requested 40 ms after a packet")
	}
	for i := 0; i < 10; i++ {
		s.OnSent(s.NextSeq(), 1000, true, ms(200+float64(i)))
	}
	s.OnSent(s.NextSeq(), 60, false, ms(210)) // a pure ack, seq 13
	for ts := 200.0; s.State() != Down; ts += 5 {
		if ts > 700 {
			t.Fatal("not Down by 700 ms")
		}
		s.OnTimer(ms(ts))
	}
	if !s.OnTimer(ms(700)) {
		t.Error("Down path: no immediate probe")
	}
	late := Ack{Largest: 13, Bitmap: allBelow}
	s.OnAck(late, ms(710))
	if s.State() != Down {
		t.Errorf("late ack of pre-outage packets revived the path: %v", s.State())
	}
	if st := s.Stats(); st.SpuriousLost != 10 || st.AckedPackets != 3 {
		t.Errorf("SpuriousLost %d AckedPackets %d, want 10, 3", st.SpuriousLost, st.AckedPackets)
	}
	probe := s.NextSeq()
	s.OnSent(probe, 40, true, ms(720))
	if s.OnTimer(ms(721)) {
		t.Error("probe still requested after OnSent")
	}
	s.OnAck(Ack{Largest: probe}, ms(750))
	if s.State() != Probing || !s.Usable() {
		t.Errorf("after post-outage ack: %v usable %v", s.State(), s.Usable())
	}
	eqDur(t, "fresh SRTT", s.Stats().SRTT, 30*time.Millisecond)
}

// A new path that never answers goes from Probing to Down after DownIdle
// from its first probe (sent on the first 5 ms tick), and is probed on.
func TestNewPathNeverAnswers(t *testing.T) {
	m := newSim(Config{}, 20*time.Millisecond)
	m.fwdUp = false
	m.dataGap = time.Millisecond // the engine would send data if it were usable
	if !m.runUntil(3*time.Second, func() bool { return m.s.State() == Down }) {
		t.Fatal("never Down")
	}
	if m.now != ms(1405) {
		t.Errorf("Down at %v, want 1405ms", m.now.Sub(base))
	}
	m.run(time.Second)
	if st := m.s.Stats(); st.TxPackets != 7 || st.AckedPackets != 0 {
		t.Errorf("sent %d packets (want 7 probes: 5, 405, 805, 1205, 1405, 1805, 2205 ms), acked %d",
			st.TxPackets, st.AckedPackets)
	}
}

// A packet overtaken by an ack is loss, never evidence of an outage, even
// when the loss thresholds are so lax that it stays outstanding for long.
func TestOvertakenPacketIsNotOutage(t *testing.T) {
	m := newSim(Config{ReorderThreshold: 1000, TimeThreshold: 100}, 20*time.Millisecond)
	m.run(2 * time.Second)
	lost := m.s.NextSeq() + 1
	m.drop = func(seq uint32) bool { return seq == lost }
	m.run(4 * time.Second)
	if len(m.downAt) != 0 || m.s.State() != Active {
		t.Errorf("downs at %v, state %v", m.downAt, m.s.State())
	}
	if st := m.s.Stats(); st.InFlight != 40 || st.LostPackets != 0 {
		t.Errorf("the lost probe should still be outstanding: inflight %d lost %d", st.InFlight, st.LostPackets)
	}
}

// A path in use that the scheduler stops using the moment it breaks (two packets
// unanswered, nothing sent after) is probed at its PTO and taken Down by the busy
// rule, not left for the idle timer's 1.4 s. Packets go every 30 ms and are
// acked 20 ms later, so at most one is in flight when the path breaks.
func TestAbandonedBusyPathProbed(t *testing.T) {
	s := NewSender(Config{}, base)
	var rx uint64
	var inflight []uint32
	ts := 0.0
	for ; ts < 3000; ts++ {
		if int(ts)%30 == 0 {
			seq := s.NextSeq()
			s.OnSent(seq, 1000, true, ms(ts))
			inflight = append(inflight, seq)
		}
		if int(ts)%30 == 20 {
			rx += 1000
			s.OnAck(Ack{Largest: inflight[0], Bitmap: allBelow, RxBytes: rx, OWDRaw: 10000}, ms(ts))
			inflight = inflight[1:]
		}
		s.OnTimer(ms(ts))
	}
	// The path breaks now; two more packets go out, then only what OnTimer asks for.
	cut := ts
	s.OnSent(s.NextSeq(), 1000, true, ms(ts))
	for ; ts < 6000 && s.State() != Down; ts++ {
		if ts == cut+30 {
			s.OnSent(s.NextSeq(), 1000, true, ms(ts))
		}
		if s.OnTimer(ms(ts)) {
			s.OnSent(s.NextSeq(), 60, true, ms(ts))
		}
	}
	if s.State() != Down {
		t.Fatal("never Down")
	}
	if d := ts - cut; d > 500 {
		t.Fatalf("Down %v ms after the break, want ≤ 500", d)
	}
}

// A loss burst (a TCP start-up overshoot, say) makes a path Degraded; when the
// scheduler then avoids it and only probes cross it, it returns to Active within
// about a LossWindow rather than waiting for traffic that never comes.
func TestDegradedRecoversWithoutTraffic(t *testing.T) {
	s := NewSender(Config{}, base)
	var rx uint64
	ts := 0.0
	// 200 ms of healthy traffic: Active.
	for ; ts < 200; ts++ {
		seq := s.NextSeq()
		s.OnSent(seq, 1000, true, ms(ts))
		if ts >= 10 {
			rx += 1000
			s.OnAck(Ack{Largest: seq - 10, Bitmap: allBelow, RxBytes: rx, OWDRaw: 5000}, ms(ts))
		}
		s.OnTimer(ms(ts))
	}
	// 300 ms in which every packet with an even seq is lost: acks name odd
	// largest seqs, and bit i (seq L-1-i) is set for odd i, the odd seqs.
	for ; ts < 500; ts++ {
		seq := s.NextSeq()
		s.OnSent(seq, 1000, true, ms(ts))
		if l := seq - 10; l%2 == 1 {
			rx += 1000
			s.OnAck(Ack{Largest: l, Bitmap: 0xAAAAAAAAAAAAAAAA, RxBytes: rx, OWDRaw: 5000}, ms(ts))
		}
		s.OnTimer(ms(ts))
	}
	if s.State() != Degraded {
		t.Fatalf("after the loss burst: %v (loss rate %.2f)", s.State(), s.Stats().LossRate)
	}
	burstEnd := ts
	// Now only probes, all answered.
	for ; ts < 6000 && s.State() != Active; ts++ {
		if s.OnTimer(ms(ts)) {
			seq := s.NextSeq()
			s.OnSent(seq, 60, true, ms(ts))
			rx += 60
			s.OnAck(Ack{Largest: seq, Bitmap: allBelow, RxBytes: rx, OWDRaw: 5000}, ms(ts+10))
		}
	}
	if s.State() != Active {
		t.Fatal("still Degraded after 4.8 s of clean probes")
	}
	if d := ts - burstEnd; d > 2500 {
		t.Fatalf("back to Active only %v ms after the burst", d)
	}
}

// A standby path (a backup tier) probes every StandbyProbeInterval, 800 ms;
// one lost probe does not take it Down (the next is answered 840 ms after
// it, before DownIdle); broken, it goes Down and probes every ProbeInterval.
func TestStandbyProbes(t *testing.T) {
	m := newSim(Config{}, 20*time.Millisecond)
	if !m.runUntil(time.Second, func() bool { return m.s.State() == Active }) {
		t.Fatal("never Active")
	}
	m.s.SetStandby(true)
	start := len(m.probes)
	m.run(4 * time.Second)
	idle := m.probes[start:]
	for i := 1; i < len(idle); i++ {
		if d := idle[i].Sub(idle[i-1]); d != 800*time.Millisecond {
			t.Fatalf("standby probes %v apart, want 800ms", d)
		}
	}
	if len(idle) < 4 || len(idle) > 6 {
		t.Fatalf("%d standby probes in 4 s, want 5", len(idle))
	}
	// Lose exactly the next probe.
	next := m.s.NextSeq()
	m.drop = func(seq uint32) bool { return seq == next }
	m.run(3 * time.Second)
	if len(m.downAt) != 0 {
		t.Fatalf("one lost standby probe took the path Down at %v", m.downAt)
	}
	m.drop = nil
	m.fwdUp, m.revUp = false, false
	if !m.runUntil(4*time.Second, func() bool { return m.s.State() == Down }) {
		t.Fatal("broken standby path never Down")
	}
	n := len(m.probes)
	m.run(1300 * time.Millisecond)
	if down := m.probes[n-1:]; len(down) != 4 {
		t.Errorf("%d probes in the 1.3 s while Down, want 4 (every ProbeInterval)", len(down))
	}
}

// A busy path that breaks is suspect about one probe timeout after the first
// unanswered packet left, long before it is Down; a path with 10 % loss and an
// idle path's single lost probe are never suspect; the first ack of a later
// packet clears it.
func TestSuspect(t *testing.T) {
	suspect := func(m *sim) bool { _, ok := m.s.SuspectSince(m.now); return ok }
	m := newSim(Config{}, 20*time.Millisecond)
	m.dataGap = time.Millisecond
	m.drop = func(seq uint32) bool { return seq%10 == 0 }
	if m.runUntil(3*time.Second, func() bool { return suspect(m) }) {
		t.Fatalf("a busy path with 10%% loss was suspect at %v", m.now.Sub(base))
	}
	m.drop = nil
	pto := m.s.PTO()
	cut := m.now
	m.fwdUp = false
	if !m.runUntil(time.Second, func() bool { return suspect(m) }) {
		t.Fatal("never suspect after the cut")
	}
	d := m.now.Sub(cut)
	since, _ := m.s.SuspectSince(m.now)
	t.Logf("PTO %v: suspect %v after the cut (oldest unanswered sent %v after it), state %v", pto, d, since.Sub(cut), m.s.State())
	if since.Before(cut) || d > pto+6*time.Millisecond || d < pto {
		t.Errorf("suspect %v after the cut, its oldest unanswered packet %v after; want PTO %v plus at most a timer tick", d, since.Sub(cut), pto)
	}
	if m.s.State() == Down {
		t.Error("already Down when first suspect")
	}
	m.fwdUp = true
	if !m.runUntil(200*time.Millisecond, func() bool { return !suspect(m) }) {
		t.Fatal("still suspect 200 ms after the link returned")
	}
	if m.s.State() == Down {
		t.Errorf("Down: the link returned %v after the cut, before the busy rule", m.now.Sub(cut))
	}

	// Acks that stall for 100 ms: suspect (nobody can tell that from an outage
	// yet), and clear one ack's way after they flow again, without going Down.
	m.run(2 * time.Second)
	m.revUp = false
	m.run(100 * time.Millisecond)
	m.revUp = true
	back := m.now
	if !m.runUntil(m.owd+6*time.Millisecond, func() bool { return !suspect(m) }) {
		t.Errorf("still suspect %v after the acks returned", m.now.Sub(back))
	}
	if m.s.State() == Down {
		t.Error("Down after a 100 ms ack stall")
	}

	// An idle path: one lost probe.
	m = newSim(Config{}, 20*time.Millisecond)
	m.run(2 * time.Second)
	lost := m.s.NextSeq()
	m.drop = func(seq uint32) bool { return seq == lost }
	if m.runUntil(2*time.Second, func() bool { return suspect(m) }) {
		t.Errorf("an idle path's lost probe made it suspect at %v", m.now.Sub(base))
	}
}
