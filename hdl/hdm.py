"""HDM address decode and attention-hint path: host line accesses in, tracker events out.

Golden model and the exact rules: :mod:`cxlkv.models.hdm`. Documentation: ``docs/hdm.md``.

Two input streams, accepted together (``ready`` is one signal, so one access and one hint
per clock at most), and a five-stage pipeline that moves in lockstep:

* stage A (the accept clock): the offset into the window and the window check (a subtraction
  and a compare, in parallel); the hint's entry against the geometry;
* stage B: the geometry check as three compares of the masked offset against the configured
  limits shifted to their fields' places (precomputed from the configuration in register
  stages), each registered on its own; the fields by narrow shifts (no multiplier); the hint's
  step compared with the current step and with the steps of the two hints ahead of it;
* stage C: the status from B's compares; the queue search: the access's entry compared with
  every slot of the hint queue as the slot will be when the access is in D (a slot written at
  this clock's edge compares with the hint in D that writes it) and with the hint of its own
  clock; which of B's step compares holds, chosen by the advance flags of the hints ahead;
* stage D applies the hint (step, push into the lowest free slot) and *then* the access
  (hint-first in a clock, the model's order): a read event takes the oldest live matching
  hint (ages in a triangular matrix), or the hint arriving with it, or ``default_sample``;
  nothing in the queue moves (a push writes one slot, a read clears one live bit, a step
  advance clears them all);
* stage E: the taken slot's sample (the slot is not rewritten before E reads it: D pushes into
  free slots only); two 2-deep output buffers, registered at their heads (:class:`OutBuf`),
  offer the event (line 0 of an entry in the window) on ``event`` (the tracker's ``event``
  layout) and every access on ``route`` (per-access metadata, decode errors included); the
  pipeline moves while both have room (a registered condition), so backpressure loses nothing
  and the outputs' ``ready`` reaches no pipeline enable.

After a step advances, the previous step's pending hints are orphans: they leave the queue at
once and are counted in ``hint_orphans`` one per clock. The counters step one clock after D.
"""
from amaranth import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._params import refusals, require_int
from cxlkv.hdl.tracker import Geometry as TrackerGeometry
from cxlkv.models import hdm as M

COUNTER_BITS = 32


class OutBuf(Elaboratable):
    """A 2-deep first-word-fall-through buffer whose head is a register: ``r_data`` and
    ``r_rdy`` come straight from flip-flops (no read multiplexer after the clock), and
    ``w_rdy`` is a flip-flop too (room while the second place is empty). The ports are
    :class:`amaranth.lib.fifo.SyncFIFO`'s (``w_en`` only while ``w_rdy``)."""

    def __init__(self, width):
        self.width = width
        self.w_en, self.w_data, self.w_rdy = Signal(name="w_en"), Signal(width, name="w_data"), Signal(name="w_rdy")
        self.r_en, self.r_data, self.r_rdy = Signal(name="r_en"), Signal(width, name="r_data"), Signal(name="r_rdy")

    def elaborate(self, platform):
        m = Module()
        v0, v1 = Signal(name="v0"), Signal(name="v1")  # the head (the output) and the second place
        d1 = Signal(self.width)
        pop = Signal()
        m.d.comb += [self.r_rdy.eq(v0), self.w_rdy.eq(~v1), pop.eq(v0 & self.r_en)]
        with m.If(pop & v1):                          # the second moves up (no write: w_rdy = 0)
            m.d.sync += [self.r_data.eq(d1), v1.eq(0)]
        with m.Elif(pop | ~v0):                       # the head is free: a write goes there
            m.d.sync += [self.r_data.eq(self.w_data), v0.eq(self.w_en)]
        with m.Elif(self.w_en):                       # the head is held: a write goes second
            m.d.sync += [d1.eq(self.w_data), v1.eq(1)]
        return m


class Hdm(wiring.Component):
    """HDM decode + hint path; parameters as :class:`cxlkv.models.hdm.HdmGeometry`, integers (not
    bools) in the ranges of ``cxlkv.models.hdm.GEOMETRY_BOUNDS``, ``n_positions`` a power of two."""

    def __init__(self, n_layers=4, n_kv_heads=2, n_positions=1024, addr_width=52, tag_width=16, hint_depth=8):
        with refusals(self):
            given = dict(n_layers=n_layers, n_kv_heads=n_kv_heads, n_positions=n_positions, addr_width=addr_width,
                         tag_width=tag_width, hint_depth=hint_depth)
            for name, (lo, hi) in M.GEOMETRY_BOUNDS.items():      # named as the block's, before the model's
                require_int(self, name, given[name], lo, hi)
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
        # in two register stages: the simple terms and n - 1 of the two strided counts, then the
        # strides' checks (``n - 1 >> shift`` nonzero) on the registered values
        cfg_err0 = Signal()
        m.d.comb += cfg_err0.eq(
            (self.base[:M.LINE_SHIFT] != 0) | (self.size[:M.LINE_SHIFT] != 0)
            | (self.entry_shift < M.ENTRY_SHIFT_MIN) | (self.entry_shift > M.ENTRY_SHIFT_MAX)
            | over(self.n_layers, g.n_layers) | over(self.n_kv_heads, g.n_kv_heads)
            | over(self.n_positions, g.n_positions))
        e_err0 = Signal(reset_less=True)
        e_npm1 = Signal.like(self.n_positions, reset_less=True)
        e_nhm1 = Signal.like(self.n_kv_heads, reset_less=True)
        e_ps = Signal.like(self.pos_shift, reset_less=True)
        e_hs = Signal.like(self.head_shift, reset_less=True)
        m.d.sync += [e_err0.eq(cfg_err0), e_npm1.eq(self.n_positions - 1), e_nhm1.eq(self.n_kv_heads - 1),
                     e_ps.eq(self.pos_shift), e_hs.eq(self.head_shift)]
        cfg_err = Signal()
        m.d.comb += cfg_err.eq(e_err0 | ((e_npm1 >> e_ps) != 0) | ((e_nhm1 >> e_hs) != 0))

        # ---- the configuration as the decode uses it, in register stages (static while
        # traffic flows; not reset, so it is settled when reset ends; a change takes 3 clocks:
        # ``cfg_error`` and the limits are made in two stages each, after a first one)
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
        # with an overflow flag each; third stage: the limits saturated at 2**aw (a field that
        # starts beyond the address never exceeds its limit)
        k_pm, k_hm = kreg(aw, "k_pm"), kreg(aw, "k_hm")
        # the head and layer fields' masks, 0 for a field that starts at or beyond the address's
        # top (the one-hot places below have no bit there either; the masks keep it explicit)
        k_hmask2, k_lmask = kreg(g.hb, "k_hmask2"), kreg(g.lb, "k_lmask")
        m.d.sync += [k_hmask2.eq(Mux(k_t1 >= aw, 0, k_hmask)), k_lmask.eq(Mux(k_t2 >= aw, 0, (1 << g.lb) - 1))]
        # the fields' places one-hot, so that stage B selects each field bit by an AND-OR of
        # the offset's bits (3 LUT levels) rather than a 6-level barrel shifter
        k_oh_es, k_oh_t1, k_oh_t2 = kreg(1 << len(k_es), "k_oh_es"), kreg(aw, "k_oh_t1"), kreg(aw, "k_oh_t2")
        m.d.sync += [k_oh_es.eq(Cat(*[k_es == k for k in range(1 << len(k_es))])),
                     k_oh_t1.eq(Cat(*[k_t1 == k for k in range(aw)])),
                     k_oh_t2.eq(Cat(*[k_t2 == k for k in range(aw)]))]
        k_pl, k_hl, k_ll = kreg(aw + 1, "k_pl"), kreg(aw + 1, "k_hl"), kreg(aw + 1, "k_ll")

        def sat_shift(n, sh, name):
            wide = Signal(len(n) + 63)
            w, o = kreg(aw, f"{name}_w"), kreg(1, f"{name}_o")
            m.d.comb += wide.eq(n << sh[:6])
            m.d.sync += [w.eq(wide[:aw]), o.eq((sh >= aw) | (wide[aw:] != 0))]
            return Mux(o, 1 << aw, w)
        m.d.sync += [
            k_pm.eq(Cat(*[((k >= k_es) if k < (1 << len(k_es)) - 1 else 1) & (k < k_t1) for k in range(aw)])),
            k_hm.eq(Cat(*[(k >= k_t1) & (k < k_t2) for k in range(aw)])),
            k_pl.eq(sat_shift(k_np, k_es, "k_pl")), k_hl.eq(sat_shift(k_nh, k_t1, "k_hl")),
            k_ll.eq(sat_shift(k_nl, k_t2, "k_ll")),
        ]
        m.d.comb += self.cfg_error.eq(k_err)

        # ---- pipeline control: the stages move while both output buffers (2 deep) have room, a
        # registered condition, so the outputs' ready never reaches the pipeline's enables
        m.submodules.ev_out = ev_fifo = OutBuf(self.event_layout.size)
        m.submodules.rt_out = rt_fifo = OutBuf(self.route_layout.size)
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
        ra_a, ra_h = Signal(name="ra_a"), Signal(name="ra_h")
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

        # ---- stage B: geometry check (masked compares against the shifted limits, each
        # registered on its own) and the fields (AND-OR by their places one-hot); the
        # status and the fields' zeroing outside OK are made later, off this stage's carry chains
        off = ra.off
        def field(oh, width):                 # off >> place, the place given one-hot
            return Cat(*[Cat(*[oh[k] & off[k + b] for k in range(len(oh)) if k + b < aw]).any()
                         for b in range(width)])
        pos_f, head_f, layer_f = Signal(g.pb, name="pos_f"), Signal(g.hb, name="head_f"), Signal(g.lb, name="layer_f")
        m.d.comb += [
            pos_f.eq(field(k_oh_es, g.pb) & k_pmask),
            head_f.eq(field(k_oh_t1, g.hb) & k_hmask2),
            layer_f.eq(field(k_oh_t2, g.lb) & k_lmask),
        ]

        # ---- stage-1 (C) registers (move with the pipeline); fields as decoded, whatever the status
        s1_a, s1_h = Signal(name="s1_a"), Signal(name="s1_h")
        s1 = Signal(data.StructLayout({
            "addr": aw, "tag": g.tag_width, "write": 1,
            "layer": g.lb, "head": g.hb, "position": g.pb, "line": M.LINE_BITS}))
        s1_inwin, s1_bp, s1_bh, s1_bl = Signal(name="s1_inwin"), Signal(name="s1_bp"), Signal(name="s1_bh"), Signal(name="s1_bl")
        s1h = Signal(self.hint_layout)
        s1_hbad = Signal()
        with m.If(adv):
            m.d.sync += [
                s1_a.eq(ra_a), s1_h.eq(ra_h),
                s1.addr.eq(ra.addr), s1.tag.eq(ra.tag), s1.write.eq(ra.write),
                s1_inwin.eq(ra.inwin), s1_bp.eq((off & k_pm) >= k_pl), s1_bh.eq((off & k_hm) >= k_hl),
                s1_bl.eq(off >= k_ll),
                s1.layer.eq(layer_f), s1.head.eq(head_f), s1.position.eq(pos_f),
                s1.line.eq(off[M.LINE_SHIFT:M.LINE_SHIFT + M.LINE_BITS] & k_line_mask),
                s1h.eq(ra_hint), s1_hbad.eq(ra_hbad),
            ]
        status1 = Signal(2)
        m.d.comb += status1.eq(Mux(~s1_inwin, M.OUTSIDE, Mux(s1_bp | s1_bh | s1_bl, M.BEYOND, M.OK)))

        # ---- the hint queue: ``hint_depth`` slots in no particular order, a live bit each, and
        # their ages as a triangular matrix (``older[i, j]``: slot i was written before slot j),
        # so a push writes one free slot and a read clears one live bit: nothing moves
        ent_layout = data.StructLayout({"layer": g.lb, "head": g.hb, "position": g.pb, "sample": M.SAMPLE_BITS})
        ents = [Signal(ent_layout, name=f"hq{j}") for j in range(N)]
        live = Signal(N)
        older = {(i, j): Signal(name=f"hq_older{i}_{j}") for i in range(N) for j in range(i + 1, N)}

        def is_older(j, i):                   # slot j was written before slot i
            return older[j, i] if j < i else ~older[i, j]
        count = Signal(cb)                    # live hints (the ones set in ``live``)
        orph = Signal(cb + 1)                 # stale hints not yet counted in hint_orphans
        cur_step = Signal(M.STEP_BITS)
        m.d.comb += [self.step.eq(cur_step), self.hints_pending.eq(count)]

        def same(x, y):
            return (x.layer == y.layer) & (x.head == y.head) & (x.position == y.position)

        # ---- stage D registers: the hint and the access applied this clock (hint first)
        d_a, d_h = Signal(name="d_a"), Signal(name="d_h")
        d = Signal(data.StructLayout({"status": 2, **{k: v.shape for k, v in s1.shape()}}))
        dh = Signal(self.hint_layout)
        d_hbad = Signal()
        d_m = Signal(N)        # the access's entry equals slot j's (as the slot is in this clock)
        d_same = Signal()      # the access's entry equals the hint's of its own clock
        d_up = Signal()        # the hint is applied and advances the step
        d_back = Signal()      # the hint is applied and is behind the step

        # stage D, the part stage C's corrections need: the slot the hint is written into
        push_req, room, push_ok = Signal(name="push_req"), Signal(name="room"), Signal(name="push_ok")
        m.d.comb += [push_req.eq(d_h & ~d_hbad & dh.has_sample),
                     room.eq(d_up | (count != N)),
                     push_ok.eq(push_req & room)]
        free = Signal(N)                      # the lowest free slot (slot 0 when the step advances)
        for j in range(N):
            m.d.comb += free[j].eq(Mux(d_up, j == 0, ~live[j] & (live[:j].all() if j else 1)))
        wr = Signal(N)                        # the slot written at this clock's edge
        m.d.comb += wr.eq(Mux(push_ok, free, 0))

        # the hint's step compares, made in stage B against the three steps that can be the
        # current one when it reaches stage D: the current step, and the steps of the hints then in
        # C and in D (which of them it is is chosen in C, by the two hints' advance flags)
        c_gt, c_lt = Signal(3, name="c_gt"), Signal(3, name="c_lt")
        p_up = Signal()        # the hint that last left D advanced the step (d_up, one clock later)
        with m.If(adv):
            for k, ref in enumerate((cur_step, s1h.step, dh.step)):
                m.d.sync += [c_gt[k].eq(ra_hint.step > ref), c_lt[k].eq(ra_hint.step < ref)]

        # ---- stage C: the queue search against the slots as they will be when the access is
        # in stage D (a slot written at this edge compares with the hint that writes it), the
        # access against the hint of its own clock, and the step compares (against the current
        # step, or against the step of the hint in D when that one advances it)
        m_next = Signal(N)
        for j in range(N):
            m.d.comb += m_next[j].eq(Mux(wr[j], same(dh, s1), same(ents[j], s1)))
        h_ok1 = Signal()
        m.d.comb += h_ok1.eq(s1_h & ~s1_hbad)
        with m.If(adv):
            m.d.sync += [
                d_a.eq(s1_a), d_h.eq(s1_h), d.eq(Cat(status1, s1)), dh.eq(s1h), d_hbad.eq(s1_hbad),
                d_m.eq(m_next), d_same.eq(same(s1h, s1)),
                d_up.eq(h_ok1 & Mux(d_up, c_gt[1], Mux(p_up, c_gt[2], c_gt[0]))),
                d_back.eq(h_ok1 & Mux(d_up, c_lt[1], Mux(p_up, c_lt[2], c_lt[0]))),
                p_up.eq(d_up),
            ]

        # ---- stage D: the hint (step, push), then the access (the oldest live match)
        is_ev, rd = Signal(name="is_ev"), Signal(name="rd")
        m.d.comb += [is_ev.eq(d_a & (d.status == M.OK) & (d.line == 0)),
                     rd.eq(is_ev & ~d.write)]
        mm = Signal(N)                        # live matches (none survive a step advance)
        m.d.comb += mm.eq(d_m & live & ~d_up.replicate(N))
        any_m = Signal()
        m.d.comb += any_m.eq(mm.any())
        take = Signal(N)                      # the oldest live match, when the access is a read
        for i in range(N):
            younger = [mm[j] & is_older(j, i) for j in range(N) if j != i]
            m.d.comb += take[i].eq(rd & mm[i] & ~(Cat(*younger).any() if younger else 0))
        rm, fwd, hinted, store = Signal(name="rm"), Signal(name="fwd"), Signal(name="hinted"), Signal(name="store")
        m.d.comb += [rm.eq(rd & any_m),
                     fwd.eq(rd & ~any_m & push_ok & d_same),      # the hint of this clock is this read's
                     hinted.eq(rm | fwd),
                     store.eq(push_ok & ~fwd)]
        step_eff = Signal(M.STEP_BITS)
        m.d.comb += step_eff.eq(Mux(d_up, dh.step, cur_step))
        new_ent = Signal(ent_layout)
        m.d.comb += [new_ent.layer.eq(dh.layer), new_ent.head.eq(dh.head),
                     new_ent.position.eq(dh.position), new_ent.sample.eq(dh.sample)]
        with m.If(adv):
            m.d.sync += [
                live.eq((live & ~d_up.replicate(N) & ~take) | Mux(store, free, 0)),
                count.eq(Mux(d_up, 0, count) + store - rm),
                cur_step.eq(step_eff),
            ]
            for j in range(N):
                with m.If(wr[j]):
                    m.d.sync += ents[j].eq(new_ent)
            for (i, j), o in older.items():
                with m.If(wr[j]):
                    m.d.sync += o.eq(1)
                with m.Elif(wr[i]):
                    m.d.sync += o.eq(0)
        # orphans: the live hints of a step advance, counted one per clock from the next clock
        rb = Signal()
        m.d.comb += rb.eq(orph != 0)
        with m.If(adv):
            m.d.sync += orph.eq(orph - rb + Mux(d_up, count, 0))
        with m.Else():
            m.d.sync += orph.eq(orph - rb)

        # ---- stage E: the records, and the sample of the slot taken in D (the slot is not
        # rewritten before this clock's edge: a push in D writes a slot that was free)
        ok1 = Signal()
        m.d.comb += ok1.eq(d.status == M.OK)
        ev, rt = Signal(self.event_layout, name="ev"), Signal(self.route_layout, name="rt")
        m.d.comb += [
            ev.layer.eq(d.layer), ev.head.eq(d.head), ev.position.eq(d.position),
            ev.write.eq(d.write), ev.step.eq(step_eff),
            rt.addr.eq(d.addr), rt.tag.eq(d.tag), rt.write.eq(d.write), rt.status.eq(d.status),
            rt.event.eq(is_ev), rt.hinted.eq(hinted),
            rt.layer.eq(Mux(ok1, d.layer, 0)), rt.head.eq(Mux(ok1, d.head, 0)),
            rt.queue.eq(Mux(ok1, d.layer * g.n_kv_heads + d.head, 0)),
            rt.position.eq(Mux(ok1, d.position, 0)), rt.line.eq(Mux(ok1, d.line, 0)),
        ]
        e_a, e_ev = Signal(name="e_a"), Signal(name="e_ev")
        e_evr, e_rt = Signal(self.event_layout, name="e_evr"), Signal(self.route_layout, name="e_rt")
        e_take, e_any, e_alt = Signal(N, name="e_take"), Signal(name="e_any"), Signal(M.SAMPLE_BITS, name="e_alt")
        with m.If(adv):
            m.d.sync += [
                e_a.eq(d_a), e_ev.eq(is_ev), e_evr.eq(ev), e_rt.eq(rt), e_take.eq(take), e_any.eq(rm),
                # without an older match: the hint of its own clock, else the default
                e_alt.eq(Mux(rd, Mux(push_ok & d_same, dh.sample, self.default_sample), 0)),
            ]
        taken = [Mux(e_take[j], ents[j].sample, 0) for j in range(N)]
        e_sample = Signal(M.SAMPLE_BITS)
        m.d.comb += e_sample.eq(Mux(e_any, Cat(*[Cat(*[t[b] for t in taken]).any()
                                                 for b in range(M.SAMPLE_BITS)]), e_alt))
        ev_w = Signal(self.event_layout)
        m.d.comb += [
            ev_w.eq(e_evr), ev_w.sample.eq(e_sample),
            ev_fifo.w_en.eq(adv & e_ev), ev_fifo.w_data.eq(ev_w),
            rt_fifo.w_en.eq(adv & e_a), rt_fifo.w_data.eq(e_rt),
        ]

        # ---- counters (each steps by at most one per clock), one clock after stage D
        incs = {
            "accesses": d_a, "events": is_ev,
            "decode_errors": d_a & (d.status != M.OK), "beyond_geometry": d_a & (d.status == M.BEYOND),
            "hints": d_h, "bad_hints": d_h & d_hbad,
            "hints_used": rd & hinted, "default_samples": rd & ~hinted,
            "hint_drops": push_req & ~room, "hint_orphans": 0, "step_errors": d_back,
        }
        inc_r = Signal(len(M.COUNTER_NAMES))
        m.d.sync += inc_r.eq(Cat(*[(rb if name == "hint_orphans" else adv & incs[name])
                                   for name in M.COUNTER_NAMES]))
        for k, name in enumerate(M.COUNTER_NAMES):
            cnt = getattr(self, name)
            with m.If(inc_r[k]):
                m.d.sync += cnt.eq(cnt + 1)
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"hdm": lambda: Hdm(),
            # the Llama-70B geometry (the tracker_full one) on a 52-bit HPA
            "hdm_llama70b": lambda: Hdm(n_layers=80, n_kv_heads=8, n_positions=131072, addr_width=52)}
