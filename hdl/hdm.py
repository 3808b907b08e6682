"""HDM address decode and attention-hint path: host line accesses in, tracker events out.

Golden model and the exact rules: :mod:`cxlkv.models.hdm`. Documentation: ``docs/hdm.md``.

Two input streams, accepted together (``ready`` is one signal, so one access and one hint
per clock at most), and a three-stage pipeline that moves in lockstep:

* stage A (the accept clock): the offset into the window and the window check (a subtraction
  and a compare, in parallel); the hint's entry against the geometry;
* stage B: the geometry check as three compares of the masked offset against the configured
  limits shifted to their fields' places (precomputed from the configuration in two register
  stages), the fields by narrow shifts (no multiplier), and the hint's step compared with the
  current step and with the step of the hint ahead of it;
* stage C applies the hint (step, hint queue) and *then* the access (hint-first in a clock,
  the model's order): a read event takes the oldest pending hint of its entry, or the hint
  arriving with it, or ``default_sample``; the hint queue is a shift register of
  ``hint_depth`` entries, compacted in one clock (one match removal, one removal at the
  bottom, one append);
* two 2-deep output buffers offer the event (line 0 of an entry in the window) on ``event``
  (the tracker's ``event`` layout) and every access on ``route`` (per-access metadata, decode
  errors included); the pipeline moves while both have room (a registered condition), so
  backpressure loses nothing and the outputs' ``ready`` reaches no pipeline enable.

After a step advances, the previous step's pending hints are stale: they match nothing, and
are removed one per clock from the bottom of the queue (counted in ``hint_orphans``), or at
once when a new hint needs the room.
"""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
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
        cfg_err = Signal()
        m.d.comb += [npos_m1.eq(self.n_positions - 1), nh_m1.eq(self.n_kv_heads - 1)]
        m.d.comb += cfg_err.eq(
            (self.base[:M.LINE_SHIFT] != 0) | (self.size[:M.LINE_SHIFT] != 0)
            | (self.entry_shift < M.ENTRY_SHIFT_MIN) | (self.entry_shift > M.ENTRY_SHIFT_MAX)
            | over(self.n_layers, g.n_layers) | over(self.n_kv_heads, g.n_kv_heads)
            | over(self.n_positions, g.n_positions)
            | ((npos_m1 >> self.pos_shift) != 0) | ((nh_m1 >> self.head_shift) != 0))

        # ---- the configuration as the decode uses it, in two register stages (static while
        # traffic flows; not reset, so it is settled when reset ends; a change takes 2 clocks)
        def kreg(shape, name):
            return Signal(shape, name=name, reset_less=True)
        k_err = kreg(1, "k_err")
        k_base, k_end = kreg(aw, "k_base"), kreg(aw + 1, "k_end")
        k_es, k_t1, k_t2 = kreg(M.ENTRY_SHIFT_BITS, "k_es"), kreg(7, "k_t1"), kreg(8, "k_t2")
        k_nl, k_nh, k_np = (kreg(len(self.n_layers), "k_nl"), kreg(len(self.n_kv_heads), "k_nh"),
                            kreg(len(self.n_positions), "k_np"))
        k_line_mask = kreg(M.LINE_BITS, "k_line_mask")
        k_pmask, k_hmask = kreg(g.pb, "k_pmask"), kreg(g.hb, "k_hmask")
        es_m6 = Signal(3)
        m.d.comb += es_m6.eq((self.entry_shift - M.ENTRY_SHIFT_MIN)[:3])
        m.d.sync += [
            k_err.eq(cfg_err), k_base.eq(self.base), k_end.eq(self.base + self.size),
            k_es.eq(self.entry_shift), k_t1.eq(self.entry_shift + self.pos_shift),
            k_t2.eq(self.entry_shift + self.pos_shift + self.head_shift),
            k_nl.eq(self.n_layers), k_nh.eq(self.n_kv_heads), k_np.eq(self.n_positions),
            k_line_mask.eq(~(Const((1 << M.LINE_BITS) - 1, M.LINE_BITS) << es_m6)[:M.LINE_BITS]),
            k_pmask.eq(~(Const((1 << g.pb) - 1, g.pb) << self.pos_shift)[:g.pb]),
            k_hmask.eq(~(Const((1 << g.hb) - 1, g.hb) << self.head_shift)[:g.hb]),
        ]
        # second stage: field masks in place and the limits shifted to the fields' positions,
        # saturated at 2**aw (a field that starts beyond the address never exceeds its limit)
        k_pm, k_hm = kreg(aw, "k_pm"), kreg(aw, "k_hm")
        k_pl, k_hl, k_ll = kreg(aw + 1, "k_pl"), kreg(aw + 1, "k_hl"), kreg(aw + 1, "k_ll")

        def sat_shift(n, sh):
            wide = Signal(len(n) + 63)
            m.d.comb += wide.eq(n << sh[:6])
            return Mux((sh >= aw) | (wide[aw:] != 0), 1 << aw, wide[:aw])
        m.d.sync += [
            k_pm.eq(Cat(*[((k >= k_es) if k < (1 << len(k_es)) - 1 else 1) & (k < k_t1) for k in range(aw)])),
            k_hm.eq(Cat(*[(k >= k_t1) & (k < k_t2) for k in range(aw)])),
            k_pl.eq(sat_shift(k_np, k_es)), k_hl.eq(sat_shift(k_nh, k_t1)), k_ll.eq(sat_shift(k_nl, k_t2)),
        ]
        m.d.comb += self.cfg_error.eq(k_err)

        # ---- pipeline control: the stages move while both output buffers (2 deep) have room, a
        # registered condition, so the outputs' ready never reaches the pipeline's enables
        m.submodules.ev_out = ev_fifo = SyncFIFO(width=self.event_layout.size, depth=2)
        m.submodules.rt_out = rt_fifo = SyncFIFO(width=self.route_layout.size, depth=2)
        adv = Signal()
        m.d.comb += [
            adv.eq(ev_fifo.w_rdy & rt_fifo.w_rdy),
            self.access.ready.eq(adv),
            self.hint.ready.eq(adv),
            self.event.valid.eq(ev_fifo.r_rdy), self.event.payload.eq(ev_fifo.r_data),
            ev_fifo.r_en.eq(self.event.ready),
            self.route.valid.eq(rt_fifo.r_rdy), self.route.payload.eq(rt_fifo.r_data),
            rt_fifo.r_en.eq(self.route.ready),
        ]

        # ---- stage A (the accept clock): offset into the window, window check, hint check
        acc = self.access.payload
        a = Signal(aw)
        m.d.comb += a.eq(Cat(Const(0, M.LINE_SHIFT), acc.addr[M.LINE_SHIFT:]))
        inwin0 = Signal()
        m.d.comb += inwin0.eq(~k_err & (a >= k_base) & (a < k_end))
        hin = self.hint.payload
        hbad0 = Signal()
        m.d.comb += hbad0.eq(k_err | (hin.has_sample & (
            (hin.layer >= k_nl) | (hin.head >= k_nh) | (hin.position >= k_np))))
        ra_a, ra_h = Signal(), Signal()
        ra = Signal(data.StructLayout({"addr": aw, "tag": g.tag_width, "write": 1, "off": aw, "inwin": 1}))
        ra_hint = Signal(self.hint_layout)
        ra_hbad = Signal()
        with m.If(adv):
            m.d.sync += [
                ra_a.eq(self.access.valid), ra_h.eq(self.hint.valid),
                ra.addr.eq(acc.addr), ra.tag.eq(acc.tag), ra.write.eq(acc.write),
                ra.off.eq((a - k_base)[:aw]), ra.inwin.eq(inwin0),
                ra_hint.eq(hin), ra_hbad.eq(hbad0),
            ]

        # ---- stage B: geometry check (masked compares against the shifted limits) and the
        # fields (narrow shifts by the configured amounts)
        off = ra.off
        beyond = Signal()
        m.d.comb += beyond.eq(((off & k_pm) >= k_pl) | ((off & k_hm) >= k_hl) | (off >= k_ll))
        ok0 = Signal()
        m.d.comb += ok0.eq(ra.inwin & ~beyond)
        status0 = Signal(2)
        m.d.comb += status0.eq(Mux(~ra.inwin, M.OUTSIDE, Mux(beyond, M.BEYOND, M.OK)))
        pos_f, head_f, layer_f = Signal(g.pb), Signal(g.hb), Signal(g.lb)
        m.d.comb += [
            pos_f.eq((off >> k_es)[:g.pb] & k_pmask),
            head_f.eq((off >> k_t1)[:g.hb] & k_hmask),
            layer_f.eq((off >> k_t2)[:g.lb]),
        ]

        # ---- stage-1 (C) registers (move with the pipeline)
        s1_a, s1_h = Signal(), Signal()
        s1 = Signal(data.StructLayout({
            "addr": aw, "tag": g.tag_width, "write": 1, "status": 2,
            "layer": g.lb, "head": g.hb, "position": g.pb, "line": M.LINE_BITS}))
        s1h = Signal(self.hint_layout)
        s1_hbad = Signal()
        with m.If(adv):
            m.d.sync += [
                s1_a.eq(ra_a), s1_h.eq(ra_h),
                s1.addr.eq(ra.addr), s1.tag.eq(ra.tag), s1.write.eq(ra.write), s1.status.eq(status0),
                s1.layer.eq(Mux(ok0, layer_f, 0)), s1.head.eq(Mux(ok0, head_f, 0)),
                s1.position.eq(Mux(ok0, pos_f, 0)),
                s1.line.eq(Mux(ok0, off[M.LINE_SHIFT:M.LINE_SHIFT + M.LINE_BITS] & k_line_mask, 0)),
                s1h.eq(ra_hint), s1_hbad.eq(ra_hbad),
            ]

        # ---- stage C: the hint queue and the step
        ent_layout = data.StructLayout({"layer": g.lb, "head": g.hb, "position": g.pb, "sample": M.SAMPLE_BITS})
        ents = [Signal(ent_layout, name=f"hq{j}") for j in range(N)]
        count = Signal(cb)
        nstale = Signal(cb)
        cur_step = Signal(M.STEP_BITS)
        m.d.comb += [self.step.eq(cur_step), self.hints_pending.eq(count - nstale)]

        h_go = Signal()      # a well-formed hint is applied this clock
        a_go = Signal()      # an access is applied this clock
        m.d.comb += [h_go.eq(adv & s1_h & ~s1_hbad), a_go.eq(adv & s1_a)]
        # the step compares were made in stage B, against the current step and against the step
        # of the hint then in this stage; ``sel`` says which of the two is the current step now
        cmp_cur_gt, cmp_cur_lt, cmp_prev_gt, cmp_prev_lt, sel = (Signal(name=n) for n in (
            "cmp_cur_gt", "cmp_cur_lt", "cmp_prev_gt", "cmp_prev_lt", "cmp_sel"))
        step_up, step_back = Signal(), Signal()
        m.d.comb += [step_up.eq(h_go & Mux(sel, cmp_prev_gt, cmp_cur_gt)),
                     step_back.eq(h_go & Mux(sel, cmp_prev_lt, cmp_cur_lt))]
        with m.If(adv):
            m.d.sync += [cmp_cur_gt.eq(ra_hint.step > cur_step), cmp_cur_lt.eq(ra_hint.step < cur_step),
                         cmp_prev_gt.eq(ra_hint.step > s1h.step), cmp_prev_lt.eq(ra_hint.step < s1h.step),
                         sel.eq(step_up)]
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

        # ---- into the output buffers
        ok1 = Signal()
        m.d.comb += ok1.eq(s1.status == M.OK)
        ev, rt = Signal(self.event_layout), Signal(self.route_layout)
        m.d.comb += [
            ev.layer.eq(s1.layer), ev.head.eq(s1.head), ev.position.eq(s1.position),
            ev.write.eq(s1.write), ev.sample.eq(sample), ev.step.eq(step_eff),
            rt.addr.eq(s1.addr), rt.tag.eq(s1.tag), rt.write.eq(s1.write), rt.status.eq(s1.status),
            rt.event.eq(is_ev), rt.hinted.eq(hinted), rt.layer.eq(s1.layer), rt.head.eq(s1.head),
            rt.queue.eq(Mux(ok1, s1.layer * g.n_kv_heads + s1.head, 0)),
            rt.position.eq(s1.position), rt.line.eq(s1.line),
            ev_fifo.w_en.eq(is_ev), ev_fifo.w_data.eq(ev),
            rt_fifo.w_en.eq(a_go), rt_fifo.w_data.eq(rt),
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
