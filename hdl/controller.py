"""The controller top level (being integrated; docs/controller.md).

Today: the register block (AXI4-Lite), geometry constants, the per-queue
storage-format table behind FMT_SEL/FMT_DATA, the cold-list ring memory, and the
access tracker (hdl/tracker.py) with

* an ``event`` input stream and a ``decision`` output stream: the stand-in for the HDM
  address decode and the tier mover, which join with the integration issue;
* its per-position metadata and link regions in on-chip ``lib.memory`` RAMs behind
  :class:`TrackerMemory` (small geometries), or as memory ports on the top (``external``:
  device DRAM behind them);
* its configuration from the registers (QUEUE_BUDGET, PINS, ALPHA, and TAU through the
  scoring unit's decay-rate divider), its counters into the register block's 64-bit
  counters, CONTROL.enable holding it cleared while 0, CONTROL.counters_clear.

CAPS says which blocks are present.
"""
from amaranth import Const, Module, Mux, Signal
from amaranth.hdl import ResetInserter
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl.regs import AXI4LiteSignature, RegisterBlock
from cxlkv.hdl.scoring import TAU_EFF_BITS, DecayRateDivider
from cxlkv.hdl.tracker import META_BITS, Geometry, Tracker
from cxlkv.models import regmap
from cxlkv.models.controller import COUNTER_SOURCES, TrackerStatics, tracker_placement

COLDLIST = regmap.MEMORIES[0]
FMT_DATA = regmap.BY_NAME["FMT_DATA"]
COUNTER_WIDTH = 64


class TrackerMemory(wiring.Component):
    """The tracker's metadata and link regions as on-chip RAMs behind its valid/ready ports.

    On an FPGA these are block RAM for small geometries, or the board's SDRAM/DDR behind
    the same ports; here they make the top exact and fast to simulate. A read is answered
    in the next cycle and held until taken; writes are posted. The link word is four RAMs,
    one per field (prev, next, key, resident), so the tracker's masked writes need no
    read-modify-write. After reset both regions are swept to zero, one word per cycle
    (``busy`` meanwhile; requests wait): the tracker needs them zero before first use.
    """

    def __init__(self, geom):
        self.geom = geom
        super().__init__({
            "meta_req": In(stream.Signature(geom.meta_req_layout())),
            "meta_resp": Out(stream.Signature(META_BITS)),
            "link_req": In(stream.Signature(geom.link_req_layout())),
            "link_resp": Out(stream.Signature(geom.link_layout().size)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        depth = g.n_queues * g.n_positions          # address {queue, position} < depth
        clr = Signal(range(depth + 1))
        clearing = Signal()
        m.d.comb += [clearing.eq(clr < depth), self.busy.eq(clearing)]
        with m.If(clearing):
            m.d.sync += clr.eq(clr + 1)

        def port(name, req, resp, fields):
            """One request/response port over ``fields``: [(memory, wdata slice, write enable bit)]."""
            pend = Signal(name=f"{name}_pend")      # a read answer is on resp, not yet taken
            can = Signal(name=f"{name}_can")
            take = Signal(name=f"{name}_take")
            m.d.comb += [can.eq(~clearing & (~pend | resp.ready)), req.ready.eq(can),
                         take.eq(req.valid & can), resp.valid.eq(pend)]
            with m.If(take & ~req.payload.write):
                m.d.sync += pend.eq(1)
            with m.Elif(resp.ready):
                m.d.sync += pend.eq(0)
            rdata = []
            for mem, wdata, wen in fields:
                wr = mem.write_port()
                rd = mem.read_port()                # not transparent: a read never meets a write
                m.d.comb += [rd.addr.eq(req.payload.addr), rd.en.eq(take & ~req.payload.write),
                             wr.addr.eq(Mux(clearing, clr, req.payload.addr)),
                             wr.data.eq(Mux(clearing, 0, wdata)),
                             wr.en.eq(clearing | (take & req.payload.write & wen))]
                rdata.append(rd.data)
            return rdata

        m.submodules.meta = meta = Memory(shape=META_BITS, depth=depth, init=[])
        (meta_rd,) = port("meta", self.meta_req, self.meta_resp, [(meta, self.meta_req.payload.wdata, 1)])
        m.d.comb += self.meta_resp.payload.eq(meta_rd)

        llay = g.link_layout()
        lw = data.View(llay, self.link_req.payload.wdata)
        mask = self.link_req.payload.wmask
        fields = []
        for i, name in enumerate(("prev", "next", "key", "resident")):   # wmask bit i (tracker WM_*)
            mem = Memory(shape=llay[name].shape, depth=depth, init=[])
            m.submodules[f"link_{name}"] = mem
            fields.append((mem, getattr(lw, name), mask[i]))
        rd = port("link", self.link_req, self.link_resp, fields)
        lr = data.View(llay, self.link_resp.payload)
        m.d.comb += [lr.prev.eq(rd[0]), lr.next.eq(rd[1]), lr.key.eq(rd[2]), lr.resident.eq(rd[3])]
        return m


class Controller(wiring.Component):
    """Controller top.

    Parameters: ``n_layers``, ``n_kv_heads`` (queues = their product),
    ``entries_log2`` (positions tracked per queue), ``bitags`` (BI-snoop tags),
    ``tracker``: 'auto' (on chip when queues x positions <= ONCHIP_MAX_WORDS, else none),
    'onchip', 'external' (memory ports on the top) or 'none'; and the ``hw`` parameters that
    have no register yet (``hw_rank_tau``, ``hw_rank_tau_long``, ``hw_bucket_bits``,
    ``hw_write_sample``, ``hw_read_credit``; defaults as models.policy.PolicyParams).

    Ports: ``s_axil`` (AXI4-Lite register slave), ``irq``; with a tracker ``event`` (in) and
    ``decision`` (out) streams (tracker layouts); with 'external' ``meta_req``/``meta_resp``
    and ``link_req``/``link_resp`` (the tracker's memory ports).
    """

    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16, tracker="auto", **statics):
        self.n_layers, self.n_kv_heads = n_layers, n_kv_heads
        self.entries_log2, self.bitags = entries_log2, bitags
        self.statics = TrackerStatics(**statics)
        self.placement = tracker_placement(tracker, n_layers * n_kv_heads, 1 << entries_log2)
        ports = {"s_axil": In(AXI4LiteSignature()), "irq": Out(1)}
        self.geom = None
        if self.placement != "none":
            self.geom = g = Geometry(n_layers, n_kv_heads, 1 << entries_log2, self.statics.n_buckets)
            ports["event"] = In(stream.Signature(g.event_layout()))
            ports["decision"] = Out(stream.Signature(g.decision_layout()))
            if self.placement == "external":            # the tracker's memory ports, same directions
                ports["meta_req"] = Out(stream.Signature(g.meta_req_layout()))
                ports["meta_resp"] = In(stream.Signature(META_BITS))
                ports["link_req"] = Out(stream.Signature(g.link_req_layout()))
                ports["link_resp"] = In(stream.Signature(g.link_layout().size))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock()
        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        m.d.comb += [
            self.irq.eq(regs.irq),
            regs.geometry_n_layers.eq(self.n_layers),
            regs.geometry_n_kv_heads.eq(self.n_kv_heads),
            regs.geometry2_entries_log2.eq(self.entries_log2),
            regs.geometry2_bitags.eq(self.bitags),
            regs.geometry2_coldlist_depth.eq(COLDLIST.entries),
        ]

        # external window: answers one cycle after the strobe
        n_queues = self.n_layers * self.n_kv_heads
        m.submodules.formats = fmt = Memory(shape=2, depth=n_queues, init=[])
        fmt_rd = fmt.read_port(domain="comb")
        fmt_wr = fmt.write_port()
        m.submodules.coldlist = cold = Memory(shape=64, depth=COLDLIST.entries, init=[])
        cold_rd = cold.read_port(domain="comb")

        ext = regs.ext
        sel = regs.fmt_sel_queue
        sel_ok = sel < n_queues
        is_fmt = ext.addr == FMT_DATA.offset
        word = Signal(range(COLDLIST.size // 4))
        m.d.comb += [
            word.eq((ext.addr - COLDLIST.offset) >> 2),
            fmt_rd.addr.eq(sel),
            cold_rd.addr.eq(word >> 1),
        ]
        # the table write is registered (timing); the next bus access is cycles away
        m.d.sync += [fmt_wr.addr.eq(sel), fmt_wr.data.eq(ext.wdata[:2]),
                     fmt_wr.en.eq(ext.we & is_fmt & sel_ok & ext.wstrb[0])]
        rdata = Signal(32)
        err = Signal()
        with m.If(ext.re | ext.we):
            with m.If(is_fmt):
                m.d.sync += [rdata.eq(Mux(sel_ok, fmt_rd.data, 0)), err.eq(~sel_ok)]
            with m.Else():                              # cold-list window (read only)
                m.d.sync += [rdata.eq(Mux(word[0], cold_rd.data[32:], cold_rd.data[:32])), err.eq(ext.we)]
        m.d.comb += [ext.rdata.eq(rdata), ext.err.eq(err)]

        if self.geom is not None:
            self._elaborate_tracker(m, regs)
        return m

    def _elaborate_tracker(self, m, regs):
        g = self.geom
        trk = Tracker(g.n_layers, g.n_kv_heads, g.n_positions, g.n_buckets)
        st = self.statics
        m.d.comb += regs.caps_tracker.eq(1)

        # CONTROL.enable = 0 holds the tracker (and its memory sweep) in reset: a replay starts
        # from the empty state the policy model starts from
        held = Signal()
        m.d.comb += held.eq(~regs.control_enable)
        m.submodules.tracker = ResetInserter(held)(trk)
        mem_busy = Const(0, 1)
        if self.placement == "onchip":
            mem = TrackerMemory(g)
            m.submodules.tracker_memory = ResetInserter(held)(mem)
            wiring.connect(m, trk.meta_req, mem.meta_req)
            wiring.connect(m, trk.meta_resp, mem.meta_resp)
            wiring.connect(m, trk.link_req, mem.link_req)
            wiring.connect(m, trk.link_resp, mem.link_resp)
            mem_busy = mem.busy
        else:
            for name in ("meta_req", "link_req"):
                wiring.connect(m, getattr(trk, name), wiring.flipped(getattr(self, name)))
            for name in ("meta_resp", "link_resp"):
                wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(trk, name))

        # τe -> decay constants, recomputed after every TAU change (as the scoring pipeline does)
        m.submodules.decay_rate = div = DecayRateDivider()
        tau = Signal(TAU_EFF_BITS)
        tau_loaded = Signal(TAU_EFF_BITS)             # 0 at reset: never a valid τ
        tau_pending = Signal(TAU_EFF_BITS)
        stale = Signal()
        was_busy = Signal()
        m.d.comb += [tau.eq(regs.tau_value), stale.eq(tau != tau_loaded),
                     div.tau.eq(tau), div.start.eq(stale & ~div.busy)]
        with m.If(div.start):
            m.d.sync += tau_pending.eq(tau)
        m.d.sync += was_busy.eq(div.busy)
        with m.If(was_busy & ~div.busy):
            m.d.sync += tau_loaded.eq(tau_pending)

        n_pos = g.n_positions
        budget, pins = regs.queue_budget_entries, regs.pins_first_n
        m.d.comb += [
            # a budget or pin count beyond the positions a queue has is the same as all of them
            trk.budget.eq(Mux(budget > n_pos, n_pos, budget)),
            trk.pinned.eq(Mux(pins > n_pos, n_pos, pins)),
            trk.alpha.eq(regs.alpha_value),
            trk.rate_mant.eq(div.mant),
            trk.rate_shift.eq(div.shift),
            trk.tln_r.eq(st.tln_r),
            trk.tln_d.eq(st.tln_d),
            trk.bucket_bits.eq(st.hw_bucket_bits),
            trk.write_sample.eq(st.hw_write_sample),
            trk.read_credit.eq(st.hw_read_credit),
            trk.decode_lock.eq(regs.control_decode_lock.replicate(g.n_queues)),
            trk.victim_req.valid.eq(0),               # no background eviction yet
            trk.victim_resp.ready.eq(1),
        ]

        # events only while enabled, cleared and configured (configuration is static while
        # events flow: the host changes it between batches)
        open_ = Signal()
        m.d.comb += [
            open_.eq(regs.control_enable & ~trk.busy & ~mem_busy & ~stale & ~div.busy),
            trk.event.payload.eq(self.event.payload),
            trk.event.valid.eq(self.event.valid & open_),
            self.event.ready.eq(trk.event.ready & open_),
        ]
        wiring.connect(m, trk.decision, wiring.flipped(self.decision))

        # the tracker's 32-bit counters step by at most one per cycle: each step is a pulse into
        # a 64-bit counter that CONTROL.counters_clear zeroes (the tracker's own reset does not)
        pulses = {}
        for name in sorted({n for names in COUNTER_SOURCES.values() for n in names}):   # stable Verilog
            cnt = getattr(trk, name)
            prev = Signal.like(cnt, name=f"prev_{name}")
            m.d.sync += prev.eq(Mux(held, 0, cnt))
            pulses[name] = Signal(name=f"pulse_{name}")
            m.d.comb += pulses[name].eq(cnt != prev)
        counters = {}
        for reg, names in COUNTER_SOURCES.items():
            c = Signal(COUNTER_WIDTH, name=f"count_{reg.lower()}")
            counters[reg] = c
            step = sum(pulses[n] for n in names)
            with m.If(regs.control_counters_clear):
                m.d.sync += c.eq(0)
            with m.Else():
                m.d.sync += c.eq(c + step)
            m.d.comb += getattr(regs, f"{reg.lower()}_count").eq(c)
        m.d.comb += regs.fills_count.eq(counters["READS"] - counters["READ_HITS"])


def verilog_tops():
    return {"controller": lambda: Controller(),
            # the full Llama-70B geometry must elaborate and lint, with the tracker's memories
            # as ports (device DRAM)
            "controller_llama70b": lambda: Controller(n_layers=80, n_kv_heads=8, entries_log2=17,
                                                      tracker="external")}
