"""HDM address decode and attention-hint path: host line accesses in, tracker events out.

Golden model and the exact rules: :mod:`cxlkv.models.hdm`. Documentation: ``docs/hdm.md``.

Two input streams, accepted together (``ready`` is one signal, so one access and one hint
per clock at most), and a two-stage pipeline that moves in lockstep:

* stage 0 (the accept cycle) decodes the address: window check, shifts and masks by the
  configured layout (no multiplier), geometry check; and checks a hint against the geometry;
* stage 1 applies the hint (step, hint queue) and *then* the access (hint-first in a clock,
  the model's order): a read event takes the oldest pending hint of its entry, or the hint
  arriving with it, or ``default_sample``; the hint queue is a shift register of
  ``hint_depth`` entries, compacted in one clock (one match removal, one removal at the
  bottom, one append);
* the output register offers the event (line 0 of an entry in the window) on ``event`` (the
  tracker's ``event`` layout) and every access on ``route`` (per-access metadata, decode
  errors included); the pipeline holds while either output is pending and not taken, so
  backpressure loses nothing.

After a step advances, the previous step's pending hints are stale: they match nothing, and
are removed one per clock from the bottom of the queue (counted in ``hint_orphans``), or at
once when a new hint needs the room.
"""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from cxlkv.hdl.tracker import Geometry as TrackerGeometry
from cxlkv.models import hdm as M

COUNTER_BITS = 32


class Hdm(wiring.Component):
    """HDM decode + hint path; parameters as :class:`cxlkv.models.hdm.HdmGeometry`."""

    def __init__(self, n_layers=4, n_kv_heads=2, n_positions=1024, addr_width=52, tag_width=16, hint_depth=8):
        self.geom = g = M.HdmGeometry(n_layers, n_kv_heads, n_positions, addr_width, tag_width, hint_depth)
        self.event_layout = TrackerGeometry(n_layers, n_kv_heads, n_positions, 128).event_layout()
        self.access_layout = data.StructLayout({"addr": addr_width, "write": 1, "tag": tag_width})
        self.hint_layout = data.StructLayout({"step": M.STEP_BITS, "has_sample": 1, "layer": g.lb,
                                              "head": g.hb, "position": g.pb, "sample": M.SAMPLE_BITS})
        self.route_layout = data.StructLayout({
            "addr": addr_width, "tag": tag_width, "write": 1, "status": 2, "event": 1, "hinted": 1,
            "layer": g.lb, "head": g.hb, "queue": g.qb, "position": g.pb, "line": M.LINE_BITS})
        ports = {
            "access": In(stream.Signature(self.access_layout)),
            "hint": In(stream.Signature(self.hint_layout)),
            "event": Out(stream.Signature(self.event_layout)),
            "route": Out(stream.Signature(self.route_layout)),
            # configuration (static while traffic flows)
            "base": In(addr_width),
            "size": In(addr_width),
            "entry_shift": In(M.ENTRY_SHIFT_BITS),
            "pos_shift": In(M.POS_SHIFT_BITS),
            "head_shift": In(M.HEAD_SHIFT_BITS),
            "n_layers": In(M.bits_for(n_layers + 1)),
            "n_kv_heads": In(M.bits_for(n_kv_heads + 1)),
            "n_positions": In(M.bits_for(n_positions + 1)),
            "default_sample": In(M.SAMPLE_BITS),
            # status
            "cfg_error": Out(1),
            "step": Out(M.STEP_BITS),
            "hints_pending": Out(M.bits_for(hint_depth + 1)),
        }
        for name in M.COUNTER_NAMES:
            ports[name] = Out(COUNTER_BITS)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        aw, N = g.addr_width, g.hint_depth
        cb = M.bits_for(N + 1)

        # ---- configuration check (the model's HdmConfig.problems)
        def over(n, mx):
            return (n == 0) | (n > mx)
        npos_m1 = Signal.like(self.n_positions)
        nh_m1 = Signal.like(self.n_kv_heads)
        m.d.comb += [npos_m1.eq(self.n_positions - 1), nh_m1.eq(self.n_kv_heads - 1)]
        m.d.comb += self.cfg_error.eq(
            (self.base[:M.LINE_SHIFT] != 0) | (self.size[:M.LINE_SHIFT] != 0)
            | (self.entry_shift < M.ENTRY_SHIFT_MIN) | (self.entry_shift > M.ENTRY_SHIFT_MAX)
            | over(self.n_layers, g.n_layers) | over(self.n_kv_heads, g.n_kv_heads)
            | over(self.n_positions, g.n_positions)
            | ((npos_m1 >> self.pos_shift) != 0) | ((nh_m1 >> self.head_shift) != 0))

        # ---- pipeline control: the output register holds until both its streams took their item
        ev_pend, rt_pend = Signal(), Signal()
        adv = Signal()
        m.d.comb += [
            adv.eq(~((ev_pend & ~self.event.ready) | (rt_pend & ~self.route.ready))),
            self.access.ready.eq(adv),
            self.hint.ready.eq(adv),
            self.event.valid.eq(ev_pend),
            self.route.valid.eq(rt_pend),
        ]

        # ---- stage 0: address decode (shifts and masks), hint check
        acc = self.access.payload
        a = Signal(aw)
        m.d.comb += a.eq(Cat(Const(0, M.LINE_SHIFT), acc.addr[M.LINE_SHIFT:]))
        off = Signal(aw)
        inwin = Signal()
        m.d.comb += [off.eq((a - self.base)[:aw]),
                     inwin.eq(~self.cfg_error & (a >= self.base) & (off < self.size))]
        es_m6 = Signal(3)
        m.d.comb += es_m6.eq((self.entry_shift - M.ENTRY_SHIFT_MIN)[:3])
        line_mask = Signal(M.LINE_BITS)
        m.d.comb += line_mask.eq(~(Const((1 << M.LINE_BITS) - 1, M.LINE_BITS) << es_m6)[:M.LINE_BITS])
        idx = Signal(aw)
        m.d.comb += idx.eq(off >> self.entry_shift)
        ones = Const((1 << aw) - 1, aw)
        pos_f, lh, head_f, layer_f = Signal(aw), Signal(aw), Signal(aw), Signal(aw)
        m.d.comb += [
            pos_f.eq(idx & ~(ones << self.pos_shift)[:aw]),
            lh.eq(idx >> self.pos_shift),
            head_f.eq(lh & ~(ones << self.head_shift)[:aw]),
            layer_f.eq(lh >> self.head_shift),
        ]
        beyond = Signal()
        m.d.comb += beyond.eq((layer_f >= self.n_layers) | (head_f >= self.n_kv_heads)
                              | (pos_f >= self.n_positions))
        ok0 = Signal()
        m.d.comb += ok0.eq(inwin & ~beyond)
        status0 = Signal(2)
        m.d.comb += status0.eq(Mux(~inwin, M.OUTSIDE, Mux(beyond, M.BEYOND, M.OK)))

        hin = self.hint.payload
        hbad0 = Signal()
        m.d.comb += hbad0.eq(self.cfg_error | (hin.has_sample & (
            (hin.layer >= self.n_layers) | (hin.head >= self.n_kv_heads) | (hin.position >= self.n_positions))))

        # ---- stage-1 registers (move with the pipeline)
        s1_a, s1_h = Signal(), Signal()
        s1 = Signal(data.StructLayout({
            "addr": aw, "tag": g.tag_width, "write": 1, "status": 2,
            "layer": g.lb, "head": g.hb, "position": g.pb, "line": M.LINE_BITS}))
        s1h = Signal(self.hint_layout)
        s1_hbad = Signal()
        with m.If(adv):
            m.d.sync += [
                s1_a.eq(self.access.valid), s1_h.eq(self.hint.valid),
                s1.addr.eq(acc.addr), s1.tag.eq(acc.tag), s1.write.eq(acc.write), s1.status.eq(status0),
                s1.layer.eq(Mux(ok0, layer_f[:g.lb], 0)), s1.head.eq(Mux(ok0, head_f[:g.hb], 0)),
                s1.position.eq(Mux(ok0, pos_f[:g.pb], 0)),
                s1.line.eq(Mux(ok0, off[M.LINE_SHIFT:M.LINE_SHIFT + M.LINE_BITS] & line_mask, 0)),
                s1h.eq(hin), s1_hbad.eq(hbad0),
            ]

        # ---- stage 1: the hint queue and the step
        ent_layout = data.StructLayout({"layer": g.lb, "head": g.hb, "position": g.pb, "sample": M.SAMPLE_BITS})
        ents = [Signal(ent_layout, name=f"hq{j}") for j in range(N)]
        count = Signal(cb)
        nstale = Signal(cb)
        cur_step = Signal(M.STEP_BITS)
        m.d.comb += [self.step.eq(cur_step), self.hints_pending.eq(count - nstale)]

        h_go = Signal()      # a well-formed hint is applied this clock
        a_go = Signal()      # an access is applied this clock
        m.d.comb += [h_go.eq(adv & s1_h & ~s1_hbad), a_go.eq(adv & s1_a)]
        step_up, step_back = Signal(), Signal()
        m.d.comb += [step_up.eq(h_go & (s1h.step > cur_step)), step_back.eq(h_go & (s1h.step < cur_step))]
        step_eff = Signal(M.STEP_BITS)
        nstale_eff = Signal(cb)
        m.d.comb += [step_eff.eq(Mux(step_up, s1h.step, cur_step)),
                     nstale_eff.eq(Mux(step_up, count, nstale))]
        rb = Signal()                         # remove the bottom (a stale hint: an orphan)
        m.d.comb += rb.eq(nstale_eff != 0)
        push_req, room, push_ok = Signal(), Signal(), Signal()
        m.d.comb += [push_req.eq(h_go & s1h.has_sample),
                     room.eq((count - rb) < N),
                     push_ok.eq(push_req & room)]

        is_ev, rd = Signal(), Signal()
        m.d.comb += [is_ev.eq(a_go & (s1.status == M.OK) & (s1.line == 0)),
                     rd.eq(is_ev & ~s1.write)]
        match = Signal(N)
        for j in range(N):
            e = ents[j]
            m.d.comb += match[j].eq((j >= nstale_eff) & (j < count) & (e.layer == s1.layer)
                                    & (e.head == s1.head) & (e.position == s1.position))
        any_m = Signal()
        mi = Signal(range(N))
        m.d.comb += any_m.eq(match.any())
        for j in reversed(range(N)):          # the lowest index (the oldest) wins
            with m.If(match[j]):
                m.d.comb += mi.eq(j)
        m_sample = Signal(M.SAMPLE_BITS)
        with m.Switch(mi):
            for j in range(N):
                with m.Case(j):
                    m.d.comb += m_sample.eq(ents[j].sample)
        fwd = Signal()                        # the hint of this clock is this read's
        m.d.comb += fwd.eq(rd & ~any_m & push_ok & (s1h.layer == s1.layer) & (s1h.head == s1.head)
                           & (s1h.position == s1.position))
        rm = Signal()
        m.d.comb += rm.eq(rd & any_m)
        hinted = Signal()
        m.d.comb += hinted.eq(rm | fwd)
        sample = Signal(M.SAMPLE_BITS)
        m.d.comb += sample.eq(Mux(rd, Mux(any_m, m_sample, Mux(fwd, s1h.sample, self.default_sample)), 0))
        store = Signal()
        m.d.comb += store.eq(push_ok & ~fwd)

        # compaction: drop the bottom (rb) and the match (rm), append the new hint (store)
        kept = Signal(cb)
        m.d.comb += kept.eq(count - rb - rm)
        new_ent = Signal(ent_layout)
        m.d.comb += [new_ent.layer.eq(s1h.layer), new_ent.head.eq(s1h.head),
                     new_ent.position.eq(s1h.position), new_ent.sample.eq(s1h.sample)]
        for j in range(N):
            src = [ents[k] if k < N else ents[N - 1] for k in (j, j + 1, j + 2)]
            shift = Signal(2, name=f"hq_shift{j}")
            m.d.comb += shift.eq(rb + (rm & ((j + rb) >= mi)))
            with m.If(store & (kept == j)):
                m.d.sync += ents[j].eq(new_ent)
            with m.Else():
                m.d.sync += ents[j].eq(Mux(shift == 0, src[0], Mux(shift == 1, src[1], src[2])))
        m.d.sync += [count.eq(kept + store), nstale.eq(nstale_eff - rb), cur_step.eq(step_eff)]

        # ---- output register
        with m.If(adv):
            m.d.sync += [ev_pend.eq(is_ev), rt_pend.eq(a_go)]
        with m.Else():
            m.d.sync += [ev_pend.eq(ev_pend & ~self.event.ready), rt_pend.eq(rt_pend & ~self.route.ready)]
        ok1 = Signal()
        m.d.comb += ok1.eq(s1.status == M.OK)
        with m.If(adv):
            ev, rt = self.event.payload, self.route.payload
            m.d.sync += [
                ev.layer.eq(s1.layer), ev.head.eq(s1.head), ev.position.eq(s1.position),
                ev.write.eq(s1.write), ev.sample.eq(sample), ev.step.eq(step_eff),
                rt.addr.eq(s1.addr), rt.tag.eq(s1.tag), rt.write.eq(s1.write), rt.status.eq(s1.status),
                rt.event.eq(is_ev), rt.hinted.eq(hinted), rt.layer.eq(s1.layer), rt.head.eq(s1.head),
                rt.queue.eq(Mux(ok1, s1.layer * g.n_kv_heads + s1.head, 0)),
                rt.position.eq(s1.position), rt.line.eq(s1.line),
            ]

        # ---- counters (each steps by at most one per clock)
        incs = {
            "accesses": a_go, "events": is_ev,
            "decode_errors": a_go & (s1.status != M.OK), "beyond_geometry": a_go & (s1.status == M.BEYOND),
            "hints": adv & s1_h, "bad_hints": adv & s1_h & s1_hbad,
            "hints_used": rd & hinted, "default_samples": rd & ~hinted,
            "hint_drops": push_req & ~room, "hint_orphans": rb, "step_errors": step_back,
        }
        for name in M.COUNTER_NAMES:
            cnt = getattr(self, name)
            with m.If(incs[name]):
                m.d.sync += cnt.eq(cnt + 1)
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"hdm": lambda: Hdm(),
            # the Llama-70B geometry (the tracker_full one) on a 52-bit HPA
            "hdm_llama70b": lambda: Hdm(n_layers=80, n_kv_heads=8, n_positions=131072, addr_width=52)}
