"""The controller top level (docs/controller.md; the whole picture in docs/architecture.md).

The register block (AXI4-Lite, generated from hdl/regs.rdl), the geometry, the per-queue
storage-format table behind FMT_SEL/FMT_DATA, the cold-list ring, and around the access
tracker (hdl/tracker.py): the HDM address decode and hint path in front of it (``access``,
``hint`` in, ``route`` out; a direct ``event`` port beside it), the phase detector on the
events it accepts, the tier mover behind it (DRAM/flash models or memory ports), the prefetch
engine inserting through its prefetch input; as build options the host data path with the
quantizer (``host_data``) and, on its CXL.mem side, the BI-snoop engine (``bisnoop``). The
tracker's metadata lives in on-chip ``lib.memory`` RAMs (small geometries) or behind memory
ports on the top (``external``). Configuration comes from the registers, counters go to the
register block's 64-bit counters, CONTROL.enable holds the blocks cleared while 0.

CAPS says which blocks are present.
"""
from amaranth import Cat, ClockDomain, Const, Module, Mux, Signal, Value
from amaranth.hdl import DomainRenamer, ResetInserter
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._tiermem import TierMemory
from cxlkv.hdl.bisnoop import CHANNELS as BI_CHANNELS
from cxlkv.hdl.bisnoop import BISnoopEngine
from cxlkv.hdl.hdm import Hdm
from cxlkv.hdl.phase import PhaseDetector
from cxlkv.hdl.prefetch import PrefetchEngine
from cxlkv.hdl.quant import LineDequantizer, LineQuantizer
from cxlkv.hdl.regs import AXI4LiteSignature, RegisterBlock
from cxlkv.hdl.scoring import TAU_EFF_BITS, DecayRateDivider
from cxlkv.hdl.tiermover import TierMover
from cxlkv.hdl.tracker import META_BITS, Geometry, Tracker, times_log2_score_max
from cxlkv.models import bisnoop as MB
from cxlkv.models.tracker import check_select
from cxlkv.models import regmap
from cxlkv.models.controller import (COUNTER_SOURCES, DEFAULT_N_BUCKETS, HDM_COUNTERS, HDM_PARAMS,
                                     PREFETCH_ENGINE_COUNTERS, PREFETCH_PARAMS, PREFETCH_SOURCES, TIER_COUNTERS,
                                     TIER_DEFAULTS, TIER_PROTO, BI_ACCESS_DEPTH, BI_PARK_DEPTH, BI_PROTO_KINDS, BI_TICK_CYCLES,
                                     bisnoop_lines, check_bisnoop, check_geometry, check_host_data, check_n_buckets,
                                     check_tier_geometry, max_slots, tier_entry, tier_placement, tracker_placement)

COLDLIST = regmap.MEMORIES[0]
FMT_DATA = regmap.BY_NAME["FMT_DATA"]
COUNTER_WIDTH = 64
#: the low bits of a cold-list entry (CHMU counter_width): the eviction's ordinal, mod 2^16
COLDLIST_COUNT_BITS = 16
#: the tier mover's memory ports (ports of the top with tiers = 'external')
TIER_MEMORY_PORTS = ("dram_req", "dram_resp", "flash_req", "flash_resp")
#: write bits of the events inside the tracker, waiting for their decisions (the decision does not
#: carry it); a full queue holds the event sources
WRITE_QUEUE_DEPTH = 32
#: the host data path's response for every access, in access order (``host_rsp``)
HOST_RSP_LAYOUT = data.StructLayout({"tag": 16, "write": 1, "status": 2, "resident": 1, "bad": 1, "data": 512})
#: accesses between the route and their response (the order queue) and host line ops between the
#: route and their tier command (the line queue): deep enough for the tracker's records in flight
#: (WRITE_QUEUE_DEPTH), the mover's ring and the quantizers' stages
HOST_QUEUE_DEPTH = 64
#: the CXL.mem channels of the top with the BI-snoop engine (its layouts, 512-bit data)
BI_HOST_CHANNELS = ("m2s_req", "m2s_rwd", "m2s_birsp", "s2m_ndr", "s2m_drs", "s2m_bisnp")
#: the RwD opcode a partial MemWrPtl reaches the engine with (reserved: bad_msg, Cmp, nothing written)
BI_RWD_REFUSED = 7
#: cycles the evict gate waits before asking again for a line the engine answered Busy
BI_RETRY_CYCLES = 16
#: Busy answers the evict gate takes per eviction before it leaves the line it asked for to the host
#: (unsnooped, counted in BI_SNOOPS_SKIPPED): Busy means no free BITag (or the line already in BIP), and
#: a BITag frees only on a BIRsp, which can wait on a BIConflictAck behind a MemWr that waits on the data
#: path that waits on this grant (docs/controller.md, "BI-snoop")
BI_BUSY_LIMIT = 16


def hold_domain(sync: ClockDomain, name: str = "hold") -> ClockDomain:
    """The domain a parent defines for ``Controller(hold_domain=name)``: ``sync``'s clock signal
    itself (not a copy made in ``comb``, which Amaranth's simulator would see a delta cycle late,
    so that registers of the two domains would race) and no reset of its own."""
    cd = ClockDomain(name, reset_less=True)
    cd.clk = sync.clk
    return cd


def _previous(m, held, cnt, name):
    """``cnt`` one cycle ago (0 while ``held``): a block's counter turned into steps for the 64-bit
    registers (the blocks' own counters restart when CONTROL.enable = 0 holds them in reset)."""
    prev = Signal.like(cnt, name=name)
    m.d.sync += prev.eq(Mux(held, 0, cnt))
    return prev


def _pulse(m, held, cnt, label):
    """One step of a counter that steps by at most one per cycle (``pulse_<label>``)."""
    p = Signal(name=f"pulse_{label}")
    m.d.comb += p.eq(cnt != _previous(m, held, cnt, f"prev_{label}"))
    return p


class TrackerMemory(wiring.Component):
    """The tracker's per-position metadata as an on-chip RAM behind its split channels.

    ``ports`` are the tracker's signature members; the memory takes the flipped metadata read
    channel (``meta_rd`` -> ``meta_rd_data``) and write channel (``meta_wr``): one 64-bit RAM of
    ``queues x positions`` words addressed ``{queue, position}``; a read sees every write to its
    word accepted in an earlier cycle or in the same cycle (the same-cycle one forwarded).

    On an FPGA this is block RAM for small geometries, or the board's SDRAM/DDR behind the same
    ports; here it makes the top exact and fast to simulate. A read is answered two cycles after
    it is accepted (the RAM's read, then a register: the block RAM's slow output goes straight
    into flip-flops) and held until taken; one read per cycle when the answers are taken; writes
    are posted. After reset the RAM is swept to zero, one word per cycle (``busy`` meanwhile;
    requests wait): the tracker needs it zero before first use.
    """

    NAMES = ("meta_rd", "meta_rd_data", "meta_wr")
    #: cycles from a read's acceptance to its answer on ``meta_rd_data``
    READ_LATENCY = 2
    #: words per RAM bank: an ECP5 DP16KD is 2048 words deep at 9 bits wide (its deepest
    #: mode that is not narrower); a deeper memory is split into banks, each with its own
    #: output register
    BANK_DEPTH = 2048

    def __init__(self, geom, ports):
        self.geom = geom
        members = {name: ports[name].flip() for name in self.NAMES}
        members["busy"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        depth = g.n_queues * g.n_positions          # address {queue, position} < depth
        clr = Signal(range(depth + 1))
        # a register (clr < depth as a compare was in front of the read channel's ready, and so
        # of the tracker's accept)
        clearing = Signal(init=1)
        m.d.comb += self.busy.eq(clearing)
        with m.If(clearing):
            m.d.sync += clr.eq(clr + 1)
            with m.If(clr == depth - 1):
                m.d.sync += clearing.eq(0)

        # Two stages: s1, the RAM read (its answer in ram_q, held until s1 moves on); s2, the answer
        # registered again (``q``) on resp. s1 moves on when s2 is empty or being taken.
        req, resp, wreq = self.meta_rd, self.meta_rd_data, self.meta_wr
        p1 = Signal()                               # a read in s1
        p2 = Signal()                               # an answer on resp, not yet taken
        adv2 = Signal()                             # s2 loads from s1 this cycle
        can = Signal()
        rd_take = Signal()
        wr_take = Signal()
        m.d.comb += [adv2.eq(~p2 | resp.ready),
                     can.eq(~clearing & (~p1 | adv2)), req.ready.eq(can),
                     rd_take.eq(req.valid & can), resp.valid.eq(p2),
                     wreq.ready.eq(~clearing), wr_take.eq(wreq.valid & ~clearing)]
        with m.If(adv2):
            m.d.sync += p2.eq(p1)
        with m.If(~p1 | adv2):
            m.d.sync += p1.eq(rd_take)

        # The read: an asynchronous port and a register (``ram_q``, enabled by the read) that Yosys
        # folds into the block RAM's synchronous port. no_rw_check lets it leave a read in the same
        # cycle as a write to its word undefined instead of emulating "old data" with a mux behind
        # the RAM's (slow) output; that case is forwarded below (fwd1), so it is never used.
        # The RAM is split into banks of BANK_DEPTH words (the block RAM's deepest mode at 9 bits
        # wide), each with its own ``q``: a bank is one block RAM deep, so its slow output goes
        # into flip-flops with no mux in between, and the banks are chosen after ``q`` (as one
        # RAM, Yosys cascaded two block RAMs and put their mux in front of ``q``: 5.8 ns from
        # the clock to the block RAM's output, a 2.8 ns route, the mux: 9.32 ns at 0f14eae).
        n_banks = -(-depth // self.BANK_DEPTH)
        bb = self.BANK_DEPTH.bit_length() - 1

        def lo(a):                                  # the word within its bank
            return a[:bb] if len(a) > bb else a

        def hi(a):                                  # the bank
            return a[bb:] if len(a) > bb else Const(0, 1)
        # the bank of s1's read, and of s2's (none with one bank: a 0-bit register lints as [-1:0])
        bank_of = Signal(range(n_banks)) if n_banks > 1 else None
        waddr = Signal(range(depth))
        wdata = Signal(META_BITS)
        writing = Signal()                          # the RAM takes waddr/wdata this cycle
        m.d.comb += [waddr.eq(Mux(clearing, clr, wreq.payload.addr)),
                     wdata.eq(Mux(clearing, 0, wreq.payload.wdata)), writing.eq(clearing | wr_take)]
        qs = []
        for k in range(n_banks):
            bank_depth = min(self.BANK_DEPTH, depth - k * self.BANK_DEPTH)
            bank = Memory(shape=META_BITS, depth=bank_depth, init=[], attrs={"no_rw_check": 1})
            m.submodules["meta" if n_banks == 1 else f"meta{k}"] = bank
            wr = bank.write_port()
            rd = bank.read_port(domain="comb")
            ram_q, q = Signal(META_BITS, name=f"ram_q{k}"), Signal(META_BITS, name=f"q{k}")
            with m.If(rd_take):
                m.d.sync += ram_q.eq(rd.data)
            with m.If(adv2):
                m.d.sync += q.eq(ram_q)
            m.d.comb += [wr.addr.eq(lo(waddr)), wr.data.eq(wdata),
                         wr.en.eq(writing & (hi(waddr) == k)),
                         rd.addr.eq(lo(req.payload.addr))]
            qs.append(q)
        fwd1 = Signal()                             # s1's read met a write to its word when accepted
        fdata1 = Signal(META_BITS)
        with m.If(rd_take):
            m.d.sync += [fwd1.eq(writing & (waddr == req.payload.addr)), fdata1.eq(wdata)]
            if bank_of is not None:
                m.d.sync += bank_of.eq(hi(req.payload.addr))
        fwd2 = Signal()
        fdata2 = Signal(META_BITS)
        bank2 = Signal.like(bank_of) if bank_of is not None else None
        with m.If(adv2):
            m.d.sync += [fwd2.eq(fwd1), fdata2.eq(fdata1)]
            if bank2 is not None:
                m.d.sync += bank2.eq(bank_of)
        q_bank = qs[0]
        for k in range(1, n_banks):
            q_bank = Mux(bank2 == k, qs[k], q_bank)
        m.d.comb += resp.payload.eq(Mux(fwd2, fdata2, q_bank))
        return m


class Controller(wiring.Component):
    """Controller top.

    Parameters: ``n_layers``, ``n_kv_heads`` (queues = their product),
    ``entries_log2`` (positions tracked per queue), ``bitags`` (BI-snoop tags),
    ``tracker``: 'auto' (on chip when queues x positions <= ONCHIP_MAX_WORDS, else none),
    'onchip', 'external' (memory ports on the top) or 'none'; ``n_buckets``: the tracker's
    deadline ring per queue (a power of two; HW_RING reads its log2); ``max_budget``: the
    tracker's slots per queue (default min(positions, 65,536); HW_RING.slots_log2). The other ``hw``
    parameters are registers (TLN_R, TLN_D, HW_BUCKET, HW_SAMPLE). ``tiers``: the tier mover
    behind the tracker with its DRAM and flash as memory models inside the top ('model', the
    latencies from TIER_LAT), as ports of the top ('external') or no tier mover ('none'; also
    without a tracker); ``tier_lines`` lines of ``tier_line_bits`` per entry, ``tier_depth`` jobs
    in flight (frames per queue = ``max_budget``). ``prefetch``: the prefetch engine behind the
    tracker (with a tracker; CAPS.prefetch), configured by PREFETCH/PREFETCH_PERIOD.
    ``tracker_select``: the tracker's victim selection, "ring" or "matrix" (max_budget <= 64;
    the same decisions, docs/tracker.md "Matrix selection"). ``hold_domain``: None, or the name of
    a domain the parent defines with :func:`hold_domain` (sync's clock, no reset), in which the
    blocks CONTROL.enable = 0 holds cleared then run, with that hold as their only reset (the ECP5
    board top's timing; :meth:`_cleared_by`).

    Ports: ``s_axil`` (AXI4-Lite register slave), ``irq``; with a tracker ``event`` (in) and
    ``decision`` (out) streams (tracker layouts); with 'external' the tracker's memory ports
    (``meta_rd``/``meta_rd_data``/``meta_wr``); with
    tiers = 'external' the tier mover's ``dram_req``/``dram_resp``/``flash_req``/``flash_resp``.
    """

    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16, tracker="auto",
                 n_buckets=DEFAULT_N_BUCKETS, max_budget=None, tiers="model", tier_lines=None,
                 tier_line_bits=None, tier_depth=TIER_DEFAULTS["tier_depth"],
                 prefetch=True, host_data=False, bisnoop=False, tracker_select="ring", hold_domain=None):
        self.n_layers, self.n_kv_heads = n_layers, n_kv_heads
        self.hold_domain = hold_domain
        self.tracker_select = tracker_select
        self.entries_log2, self.bitags = entries_log2, bitags
        try:
            check_geometry(n_layers, n_kv_heads, entries_log2, bitags)
            self.n_buckets = check_n_buckets(n_buckets)
            self.max_budget = max_slots(1 << entries_log2, max_budget)
            self.placement = tracker_placement(tracker, n_layers * n_kv_heads, 1 << entries_log2)
            self.tiers = tier_placement(tiers, self.placement)
            self.host_data = check_host_data(host_data, self.tiers)
            tier_lines, tier_line_bits = tier_entry(self.host_data, tier_lines, tier_line_bits)
            self.bisnoop = check_bisnoop(bisnoop, self.host_data, n_layers, n_kv_heads, entries_log2, tier_lines)
            check_tier_geometry(tier_lines, tier_line_bits, tier_depth)
            check_select(tracker_select, self.max_budget)
            if prefetch not in (False, True):         # 0 and 1 too (a board's --param)
                raise ValueError(f"prefetch must be True or False, got {prefetch!r}")
            if hold_domain is not None and (not isinstance(hold_domain, str) or hold_domain in ("sync", "comb")):
                raise ValueError(f"hold_domain must be None or the name of a domain other than sync, got {hold_domain!r}")
        except ValueError:
            self._MustUse__silence = True        # never built: no unused-elaboratable warning
            raise
        self.tier_lines, self.tier_line_bits, self.tier_depth = tier_lines, tier_line_bits, tier_depth
        self.prefetch = bool(prefetch) and self.placement != "none"
        ports = {"s_axil": In(AXI4LiteSignature()), "irq": Out(1)}
        self.geom = None
        self._tracker_ports = {}
        if self.placement != "none":
            self.geom = g = Geometry(n_layers, n_kv_heads, 1 << entries_log2, n_buckets)
            # the tracker's ports (the decision's fields, the memory channels) from a probe that is
            # never elaborated (the top builds its own in elaborate)
            probe = self._new_tracker()
            probe._MustUse__silence = True
            self._tracker_ports = dict(probe.signature.members)
            ports["event"] = In(stream.Signature(g.event_layout()))
            ports["decision"] = self._tracker_ports["decision"]
            # the HDM decode's host side: line accesses, hints, and a route record per access
            probe = self._new_hdm()
            probe._MustUse__silence = True
            for name in ("access", "hint", "route"):
                if name == "access" and self.bisnoop:
                    continue                            # the accesses come from the CXL.mem side
                ports[name] = probe.signature.members[name]
            if self.placement == "external":            # the tracker's memory ports, same directions
                for name in self._memory_ports():
                    ports[name] = self._tracker_ports[name]
            if self.bisnoop:                            # CXL.mem messages (the BI-snoop engine's layouts)
                for name in BI_HOST_CHANNELS:
                    d, lay = BI_CHANNELS[name]
                    ports[name] = d(stream.Signature(lay(512)))
            elif self.host_data:                        # write data in, a response per access out
                ports["host_wdata"] = In(stream.Signature(512))
                ports["host_rsp"] = Out(stream.Signature(HOST_RSP_LAYOUT))
            if self.tiers == "external":                # the tier mover's memory ports, same directions
                probe = self._new_tiermover()
                probe._MustUse__silence = True
                for name in TIER_MEMORY_PORTS:
                    ports[name] = probe.signature.members[name]
        super().__init__(ports)

    def _new_tiermover(self):
        g = self.geom
        return TierMover(n_queues=g.n_queues, n_positions=g.n_positions, frames_per_queue=self.max_budget,
                         lines_per_entry=self.tier_lines, line_bits=self.tier_line_bits, depth=self.tier_depth,
                         **({"host_ops": True} if self.host_data else {}))

    def _new_hdm(self):
        return Hdm(self.n_layers, self.n_kv_heads, 1 << self.entries_log2, **HDM_PARAMS)

    def _cleared_by(self, held, block):
        """``block`` (a sync-domain elaboratable) reset while ``held`` (CONTROL.enable = 0).

        By default it is reset by ``held`` or the sync domain's reset, an OR that synthesis puts in
        one LUT in front of the reset input of every register of the tracker, its memory and the
        HDM decode: on the ECP5 board top that net, thousands of loads behind that LUT, was the
        most frequent failing group at 125 MHz (docs/fpga-timing-log.md). With ``hold_domain`` the block runs
        in that domain instead (the parent's, made by :func:`hold_domain`: sync's clock, no reset)
        and ``held`` is its only reset: ``held`` is a sync register that the sync domain's reset
        sets, so that reset still clears the block, from the cycle after it is asserted until
        software enables it (a board's reset lasts many cycles)."""
        if self.hold_domain is None:
            return ResetInserter(held)(block)
        return ResetInserter({self.hold_domain: held})(DomainRenamer({"sync": self.hold_domain})(block))

    def _new_tracker(self):
        g = self.geom
        return Tracker(g.n_layers, g.n_kv_heads, g.n_positions, g.n_buckets, max_budget=self.max_budget,
                       select=self.tracker_select)

    def _memory_ports(self):
        return TrackerMemory.NAMES

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
            self._elaborate_tracker(m, regs, cold, fmt)
        return m

    def _elaborate_tracker(self, m, regs, cold, fmt):  # noqa: C901 (one top, wired in one place)
        g = self.geom
        trk = self._new_tracker()
        self._write_queue_full = Signal()             # set by _elaborate_decisions
        self._prefetch_hold = Signal()                # set by _elaborate_prefetch
        m.d.comb += [regs.caps_tracker.eq(1), regs.caps_quant.eq(int(self.host_data)), regs.hw_ring_buckets_log2.eq(g.n_buckets.bit_length() - 1),
                     regs.hw_ring_slots_log2.eq(self.max_budget.bit_length() - 1)]

        # CONTROL.enable = 0 holds the tracker (and its memory sweep) in reset: a replay starts
        # from the empty state the policy model starts from. The hold is a flip-flop of its own,
        # a cycle after the field: it drives the reset input of thousands of registers, and from
        # the field itself it would go through an inverter LUT first (ECP5 registers reset on a
        # high input). Every gate of the controller takes the enable from it (`enabled`), so the
        # blocks leave and enter the hold in the cycle the gates open and close.
        held = Signal(init=1)
        m.d.sync += held.eq(~regs.control_enable)
        enabled = ~held
        m.submodules.tracker = self._cleared_by(held, trk)
        mem_busy = Const(0, 1)
        if self.placement == "onchip":
            mem = TrackerMemory(g, self._tracker_ports)
            m.submodules.tracker_memory = self._cleared_by(held, mem)
            for name in TrackerMemory.NAMES:
                if hasattr(mem, name):
                    wiring.connect(m, getattr(trk, name), getattr(mem, name))
            mem_busy = mem.busy
        else:
            for name in self._memory_ports():
                wiring.connect(m, getattr(trk, name), wiring.flipped(getattr(self, name)))

        # τe -> decay constants, recomputed after every TAU change (as the scoring pipeline does)
        m.submodules.decay_rate = div = DecayRateDivider()
        tau = Signal(TAU_EFF_BITS)
        tau_loaded = Signal(TAU_EFF_BITS)             # 0 at reset: never a valid τ
        tau_pending = Signal(TAU_EFF_BITS)
        stale = Signal()
        was_busy = Signal()
        # The divider starts from a register (stale_r: τ differs from the τ loaded by the end of
        # this cycle), so the 24-bit compare is off the divider's enables; a TAU write starts it a
        # cycle later (the events are held from the write on, by `stale`).
        stale_r = Signal()
        loading = Signal()
        m.d.comb += [tau.eq(regs.tau_value), stale.eq(tau != tau_loaded), loading.eq(was_busy & ~div.busy),
                     div.tau.eq(tau), div.start.eq(stale_r & ~div.busy & ~loading)]
        # (both compares made from registers, the divider's loading chooses after them: with the
        # choice in front, the divider's state → loading → the choice → the 24-bit compare was
        # 9.35 ns, the worst path of a board build at deb4b1d)
        m.d.sync += stale_r.eq(Mux(loading, tau != tau_pending, tau != tau_loaded))
        with m.If(div.start):
            m.d.sync += tau_pending.eq(tau)
        m.d.sync += was_busy.eq(div.busy)
        with m.If(loading):
            m.d.sync += tau_loaded.eq(tau_pending)

        n_pos = g.n_positions
        budget, pins = regs.queue_budget_entries, regs.pins_first_n
        # the deadline ring's configuration, and its copies as its check (below) goes on
        ring_cfg = data.StructLayout({"tln_r": len(regs.tln_r_value), "tln_d": len(regs.tln_d_value),
                                      "bucket_bits": len(regs.hw_bucket_bits)})
        cfg_now = Signal(ring_cfg)
        m.d.comb += cfg_now.eq(Cat(regs.tln_r_value, regs.tln_d_value, regs.hw_bucket_bits))
        cfg_1, cfg_2, cfg_3, cfg_seen = (Signal(ring_cfg, name=f"cfg_{n}") for n in ("1", "2", "3", "seen"))
        # The tracker's configuration inputs are registered here, a cycle after the register
        # block's: the clamps and the route from the register block are off the tracker's
        # paths (on the board, QUEUE_BUDGET's clamp was in front of the step state's `dense`
        # compare). The configuration is static while events flow (the host changes it between
        # batches), and a read of STATUS after a write comes later than this cycle.
        m.d.sync += [
            # a budget or pin count beyond the positions a queue has is the same as all of them
            trk.budget.eq(Mux(budget > n_pos, n_pos, budget)),
            trk.pinned.eq(Mux(pins > n_pos, n_pos, pins)),
            trk.alpha.eq(regs.alpha_value),
            # (TLN_R, TLN_D and HW_BUCKET a cycle later still, from cfg_1 below: the events close
            # on their check a cycle later too, see read_hold)
            trk.tln_r.eq(cfg_1.tln_r), trk.tln_d.eq(cfg_1.tln_d), trk.bucket_bits.eq(cfg_1.bucket_bits),
            trk.write_sample.eq(regs.hw_sample_write_sample),
            trk.read_credit.eq(regs.hw_sample_read_credit),
            trk.decode_lock.eq(regs.control_decode_lock.replicate(g.n_queues)),
        ]
        m.d.comb += [
            trk.rate_mant.eq(div.mant),               # (the divider's outputs are registers)
            trk.rate_shift.eq(div.shift),
            trk.victim_req.valid.eq(0),               # no background eviction yet
            trk.victim_resp.ready.eq(1),
        ]

        # the deadline ring must hold every live key (models.controller.buckets_needed): checked
        # over four registered steps (the larger TLN, a multiply, a shift, the compare: off the
        # event path). While the configuration differs from the one last checked (ring_stale: four
        # cycles after a write of TLN_R, TLN_D or HW_BUCKET) the events are held, STATUS.busy is 1 and register reads
        # wait, so a read right after the write sees the settled STATUS.ring_error. (The
        # tracker's own cfg_error checks the same, later: it is not needed here.)
        tln_max = Signal.like(regs.tln_r_value)
        bb_1, bb_2 = Signal.like(regs.hw_bucket_bits), Signal.like(regs.hw_bucket_bits)
        f_prod = Signal(len(tln_max) + 12)
        f_max = Signal(len(tln_max) + 12)
        ring_bad = Signal()
        m.d.sync += [
            cfg_1.eq(cfg_now), bb_1.eq(regs.hw_bucket_bits),
            tln_max.eq(Mux(regs.tln_r_value > regs.tln_d_value, regs.tln_r_value, regs.tln_d_value)),
            cfg_2.eq(cfg_1), bb_2.eq(bb_1), f_prod.eq(times_log2_score_max(tln_max)),
            cfg_3.eq(cfg_2), f_max.eq((f_prod >> 16) >> bb_2),
            cfg_seen.eq(cfg_3), ring_bad.eq(f_max + 2 > g.n_buckets),
        ]
        ring_stale = Signal()
        ring_error = Signal()
        # The read hold is ring_stale registered: the compare of the configuration words is off
        # the register block's ARREADY (on the board it was a route across the chip into the UART
        # bridge's AR slice). It is still in time: the register block takes no read until the
        # cycle after a write's BRESP, by which the registered hold has risen. The events and
        # STATUS.busy take the hold too, not the compare (r_hw_bucket_bits → the compare →
        # STATUS.busy and cfg_open was 9.95 ns at 5ae6e23): the events close a cycle later, so
        # the tracker takes the three fields a cycle later too (from cfg_1); a read is held
        # while the hold is up and sees STATUS.busy after it, as before.
        read_hold = Signal()
        m.d.sync += read_hold.eq(ring_stale)
        m.d.comb += [
            ring_stale.eq(cfg_now.as_value() != cfg_seen.as_value()),
            ring_error.eq(ring_bad | (trk.budget > self.max_budget)),
            regs.status_ring_error.eq(ring_error),
            regs.read_hold.eq(read_hold),
        ]

        # events only while enabled, cleared and configured (configuration is static while
        # events flow: the host changes it between batches). The cleared-and-configured part is
        # registered, off the event path: it closes the cycle after a configuration write
        # (enable and the flow-control holds act at once)
        open_ = Signal()
        cfg_open = Signal()
        m.d.sync += cfg_open.eq(~trk.busy & ~mem_busy & ~stale & ~div.busy & ~ring_error & ~read_hold)
        m.d.comb += open_.eq(enabled & cfg_open & ~self._write_queue_full & ~self._prefetch_hold)

        # the HDM decode (held cleared with the tracker); its host inputs wait while disabled
        hdm = self._new_hdm()
        m.submodules.hdm = self._cleared_by(held, hdm)
        en = enabled
        if self.bisnoop:                              # the CXL.mem side feeds the data path (below)
            self._access = hdm.signature.members["access"].signature.flip().create(path=("bi_access",))
            self._host_wdata = stream.Signature(512).flip().create(path=("bi_wdata",))
            self._host_rsp = stream.Signature(HOST_RSP_LAYOUT).create(path=("bi_rsp",))
        elif self.host_data:
            self._access, self._host_wdata, self._host_rsp = self.access, self.host_wdata, self.host_rsp
        else:
            self._access = self.access
        acc = self._access
        m.d.comb += [hdm.access.payload.eq(acc.payload), hdm.access.valid.eq(acc.valid & en),
                     acc.ready.eq(hdm.access.ready & en)]

        # hints: the hint port, and the register push (HINT_PUSH) through a one-hint holding
        # register; the held one goes first, the choice held while an offer waits
        held_hint = Signal(hdm.hint_layout)
        held_valid = Signal()
        lb, hb, pb = hdm.geom.lb, hdm.geom.hb, hdm.geom.pb
        push = regs.hint_push_push
        fits = Signal()
        push_drop = Signal()
        m.d.comb += [
            fits.eq(((regs.hint_entry_layer >> lb) == 0) & ((regs.hint_entry_head >> hb) == 0) &
                    ((regs.hint_entry_position >> pb) == 0)),
            push_drop.eq(push & (held_valid | ~en | ~fits)),
            regs.status_hint_busy.eq(held_valid),
        ]
        with m.If(push & ~push_drop):
            m.d.sync += [held_valid.eq(1), held_hint.step.eq(regs.hint_step_step),
                         held_hint.has_sample.eq(regs.hint_push_has_sample), held_hint.layer.eq(regs.hint_entry_layer),
                         held_hint.head.eq(regs.hint_entry_head), held_hint.position.eq(regs.hint_entry_position),
                         held_hint.sample.eq(regs.hint_push_sample)]
        hsel = Signal()
        hhold = Signal()
        hcur = Signal()
        m.d.comb += [
            hsel.eq(Mux(hhold, hcur, held_valid)),
            hdm.hint.payload.eq(Mux(hsel, held_hint, self.hint.payload)),
            hdm.hint.valid.eq(Mux(hsel, held_valid, self.hint.valid) & en),
            self.hint.ready.eq(~hsel & hdm.hint.ready & en),
        ]
        m.d.sync += [hhold.eq(hdm.hint.valid & ~hdm.hint.ready), hcur.eq(hsel)]
        with m.If(hsel & hdm.hint.valid & hdm.hint.ready):
            m.d.sync += held_valid.eq(0)
        self._lk_take = Signal()                      # the tracker takes a lookup (host data path)
        self._lk_write = Signal()
        hdm_ev_gate = Const(1, 1)
        if self.host_data:
            hdm_ev_gate = self._elaborate_host_side(m, regs, trk, held, hdm, fmt, open_)
        else:
            wiring.connect(m, hdm.route, wiring.flipped(self.route))
            m.d.comb += trk.lookup.valid.eq(0)        # lookups come from the host data path only

        def in_use(reg, built):
            """A geometry register: 0 is the built value; above it saturates to built + 1 (refused)."""
            return Mux(reg == 0, built, Mux(reg > built, built + 1, reg))
        # the geometry's clamps registered (the clamp's compares and the decode's n - 1 were one
        # path: r_hdm_positions → in_use → e_npm1, 9.37 ns at 0f14eae). The decode's check
        # then settles four cycles after the write, still before a read that follows the write
        # samples STATUS (the write's BRESP, the read's address, its decode: STATUS.hdm_cfg_error
        # is sampled in the fourth cycle; tests/test_controller.py reads it right after a write)
        m.d.sync += [
            hdm.n_layers.eq(in_use(regs.hdm_geometry_n_layers, g.n_layers)),
            hdm.n_kv_heads.eq(in_use(regs.hdm_geometry_n_kv_heads, g.n_kv_heads)),
            hdm.n_positions.eq(in_use(regs.hdm_positions_n_positions, g.n_positions)),
        ]
        m.d.comb += [
            regs.caps_hdm.eq(1),
            hdm.base.eq(Cat(regs.hdm_base_lo_value, regs.hdm_base_hi_value)),
            hdm.size.eq(Cat(regs.hdm_size_lo_value, regs.hdm_size_hi_value)),
            hdm.entry_shift.eq(regs.hdm_layout_entry_shift),
            hdm.pos_shift.eq(regs.hdm_layout_pos_shift),
            hdm.head_shift.eq(regs.hdm_layout_head_shift),
            hdm.default_sample.eq(regs.hint_default_sample),
            regs.status_hdm_cfg_error.eq(hdm.cfg_error),
            regs.hdm_step_step.eq(hdm.step),
            regs.hints_pending_count.eq(hdm.hints_pending),
            regs.hints_pending_depth.eq(HDM_PARAMS["hint_depth"]),
        ]

        # two event sources into the tracker: the HDM decode (first) and the direct event port
        # (the harness's and the tests'); the choice is held while an offer waits
        sel = Signal()
        hold = Signal()
        cur = Signal()
        hdm_ev_valid = Signal()
        m.d.comb += [
            hdm_ev_valid.eq(hdm.event.valid & hdm_ev_gate),
            sel.eq(Mux(hold, cur, hdm_ev_valid)),
            trk.event.payload.eq(Mux(sel, hdm.event.payload, self.event.payload)),
            trk.event.valid.eq(Mux(sel, hdm_ev_valid, self.event.valid) & open_),
            hdm.event.ready.eq(sel & hdm_ev_gate & trk.event.ready & open_),
            self.event.ready.eq(~sel & trk.event.ready & open_),
        ]
        m.d.sync += [hold.eq(trk.event.valid & ~trk.event.ready), cur.eq(sel)]
        self._hdm_sel = sel
        tier_steps, tier_busy = {}, Const(0, 1)
        self._phase_decode = Signal()                 # the phase detector's (below), for the prefetch engine
        if self.tiers == "none" and not self.prefetch:
            wiring.connect(m, trk.decision, wiring.flipped(self.decision))
            dec_fire = Signal()
            m.d.comb += dec_fire.eq(trk.decision.valid & trk.decision.ready)
        else:
            dec_fire, tier_steps, tier_busy = self._elaborate_decisions(m, regs, trk, held)

        # the phase detector taps the events the port accepts (not cleared by CONTROL.enable)
        m.submodules.phase = ph = PhaseDetector()
        m.d.comb += self._phase_decode.eq(ph.decode)
        m.d.comb += [
            regs.caps_phase.eq(1),
            ph.ev_valid.eq(trk.event.valid & trk.event.ready),
            ph.ev_write.eq(trk.event.payload.write),
            ph.ratio.eq(regs.phase_cfg_ratio),
            ph.window_log2.eq(regs.phase_cfg_window_log2),
            ph.hysteresis.eq(regs.phase_cfg_hysteresis),
            ph.phase_override.eq(regs.control_phase_override),
            regs.status_phase.eq(ph.decode),
            regs.status_cfg_error.eq(ring_error | ph.cfg_error),
            regs.irq_status_phase_change_set.eq(ph.phase_change),
        ]

        # the tracker's 32-bit counters step by at most one per cycle: each step is a pulse into
        # a 64-bit counter that CONTROL.counters_clear zeroes (the tracker's own reset does not)
        sources = {**COUNTER_SOURCES, **(PREFETCH_SOURCES if self.prefetch else {})}
        pulses = {name: _pulse(m, held, getattr(trk, name), name) for name in
                  sorted({n for names in sources.values() for n in names})}     # stable Verilog
        steps = {reg: sum(pulses[n] for n in names) for reg, names in sources.items()}
        steps["PHASE_CHANGES"] = ph.phase_change
        # a request of the tracker on a memory port waiting for ready (the memory's backpressure;
        # seen at the ports, so the tracker's internal latency waits are not in it)
        stall = Signal()
        m.d.comb += stall.eq(sum((getattr(trk, n).valid & ~getattr(trk, n).ready)
                                 for n in ("meta_rd", "meta_wr")) != 0)
        steps["STALL_CYCLES"] = stall
        for reg, name in HDM_COUNTERS.items():             # the HDM decode's, the same way
            steps[reg] = _pulse(m, held, getattr(hdm, name), f"hdm_{name}")
        steps["HINT_PUSH_DROPS"] = push_drop
        steps.update(tier_steps)
        # STATUS.busy registered: a cycle late, and its two configuration compares (stale, and
        # ring_stale through read_hold) are off the register block's read mux (r_tln_d_value →
        # ring_stale → busy → the read group was a 9.53 ns path at 9a6936e)
        status_busy = Signal()
        # (held: the cycle after enable's write, before the blocks leave the hold)
        m.d.sync += status_busy.eq(regs.control_enable & (held | trk.busy | mem_busy | stale | read_hold | div.busy | tier_busy))
        m.d.comb += regs.status_busy.eq(status_busy)
        counters = {}
        for reg, step in steps.items():
            # the step is registered (and cleared with the count), so the 64-bit add starts at a
            # flip-flop, not behind the blocks' counter compares (a board critical path, 12.1 ns);
            # a count shows its step a cycle later
            step = Value.cast(step)
            step_r = Signal(len(step), name=f"step_{reg.lower()}")
            c = Signal(COUNTER_WIDTH, name=f"count_{reg.lower()}")
            counters[reg] = c
            with m.If(regs.control_counters_clear):
                m.d.sync += [c.eq(0), step_r.eq(0)]
            with m.Else():
                m.d.sync += [c.eq(c + step_r), step_r.eq(step)]
            m.d.comb += getattr(regs, f"{reg.lower()}_count").eq(c)
        m.d.comb += regs.fills_count.eq(counters["READS"] - counters["READ_HITS"])

        # cold list: every eviction's victim (demand and prefetch decisions), CHMU hot-list entry
        # {unit index, count}; the host consumes entries and advances COLDLIST_TAIL; a full ring
        # (63 pending) drops, counted
        depth = COLDLIST.entries
        dec = trk.decision
        head = Signal(range(depth))
        # head + 1, kept beside head: "full" is its equality with the tail, not a subtract and
        # compare in front of the RAM's write enable (on the board, the tail register → two carry
        # chains → the write enables were 9.94 ns paths at 1b2aeea); the ring's depth is a power
        # of two, so both wrap alike
        assert depth & (depth - 1) == 0, depth
        head_p1 = Signal(range(depth), init=1)
        seq = Signal(COLDLIST_COUNT_BITS)            # evictions offered to the list (the count)
        pending = Signal(range(depth))
        # pending + 1, from head + 1 (mod the depth: below the depth whenever the list is not full,
        # the only case it is used): one carry chain in front of the fill IRQ's compare, not two
        # (the tail register → the subtract → the increment → the compare → the IRQ status bit
        # was a 9.31 ns path at b09313b)
        pending_p1 = Signal(range(depth))
        full = Signal()
        push = Signal()
        queue = Signal(g.qb)
        cold_wr = cold.write_port()
        m.d.comb += [
            pending.eq(head - regs.coldlist_tail_index[:len(head)]),
            pending_p1.eq(head_p1 - regs.coldlist_tail_index[:len(head)]),
            full.eq(head_p1 == regs.coldlist_tail_index[:len(head)]),
            push.eq(dec_fire & dec.payload.victim_valid),
            queue.eq(dec.payload.layer * g.n_kv_heads + dec.payload.head),
            regs.coldlist_head_index.eq(head),
            regs.irq_status_coldlist_overflow_set.eq(push & full),
            regs.irq_status_coldlist_fill_set.eq(push & ~full & (pending_p1 >= regs.coldlist_threshold_entries)),
        ]
        # the RAM's write registered: a cycle after head moves on (the host reads COLDLIST_HEAD,
        # then the entries, each a register read of several cycles: the write has landed by
        # then). The full compare fanned out to the distributed RAM's write enables
        # (head_p1 → full → the WREs was 8.70 ns at 0f14eae)
        m.d.sync += [cold_wr.addr.eq(head), cold_wr.data.eq(Cat(seq, dec.payload.victim[:g.pb], queue)),
                     cold_wr.en.eq(push & ~full)]
        drops = Signal(COUNTER_WIDTH)
        with m.If(push):
            m.d.sync += seq.eq(seq + 1)
            with m.If(~full):
                m.d.sync += [head.eq(head + 1), head_p1.eq(head_p1 + 1)]
        with m.If(regs.control_counters_clear):
            m.d.sync += drops.eq(0)
        with m.Elif(push & full):
            m.d.sync += drops.eq(drops + 1)
        m.d.comb += regs.coldlist_drops_count.eq(drops)


    def _elaborate_host_side(self, m, regs, trk, held, hdm, fmt, open_):
        """The host data path's front (docs/controller.md, "Host data path"): every route goes to the
        ``route`` port and to a sequencer that serves the routes in access order. A line-0 route's
        event is let into the tracker (the HDM decode's event is gated until its route is at the
        head: events and lookups enter the tracker in access order); a line 1 ... route becomes a
        tracker lookup; either pushes the access onto the order queue and its line onto the line
        queue, and a write's data, with the queue's format from the FMT table, into the quantizer.
        A route in error (or a line beyond the mover's entry) is answered from the order queue
        alone; a write's data is taken and dropped. Returns the HDM event gate."""
        r = hdm.route
        R = r.payload
        lb = max(1, (self.tier_lines - 1).bit_length())
        # route fork: the port and the sequencer each take every route once
        took_port, took_seq = Signal(name="took_port"), Signal(name="took_seq")
        seq_take = Signal()
        m.d.comb += [
            self.route.payload.eq(R),
            self.route.valid.eq(r.valid & ~took_port),
            r.ready.eq((self.route.ready | took_port) & (seq_take | took_seq)),
        ]
        route_fire = Signal()
        m.d.comb += route_fire.eq(r.valid & r.ready)
        for t, took in ((took_port, self.route.valid & self.route.ready), (took_seq, seq_take)):
            with m.If(held | route_fire):
                m.d.sync += t.eq(0)
            with m.Elif(took):
                m.d.sync += t.eq(1)

        # the order queue: one entry per access {direct, tag, write, status, bad}; the line queue
        order_layout = data.StructLayout({"direct": 1, "tag": 16, "write": 1, "status": 2, "bad": 1})
        m.submodules.host_order = oq = self._cleared_by(held, SyncFIFO(width=order_layout.size, depth=HOST_QUEUE_DEPTH))
        m.submodules.host_lines = lq = self._cleared_by(held, SyncFIFO(width=lb, depth=HOST_QUEUE_DEPTH))
        m.submodules.quantizer = qz = self._cleared_by(held, LineQuantizer(tag_width=1))
        self._host_order, self._host_lines, self._quantizer = oq, lq, qz
        fmt_dp = fmt.read_port(domain="comb")         # the queue's storage format (static while traffic flows)
        m.d.comb += [fmt_dp.addr.eq(R.queue), qz.i.payload.fmt.eq(fmt_dp.data),
                     qz.i.payload.data.eq(self._host_wdata.payload), qz.i.payload.tag.eq(0)]

        at = Signal()                                 # a route waits for the sequencer
        ok = Signal()
        direct = Signal()                             # answered from the order queue alone
        room = Signal()                               # queues and (a write) its data and the quantizer
        data_in = Signal()
        m.d.comb += [
            at.eq(r.valid & ~took_seq),
            ok.eq(R.status == 0),
            direct.eq(~ok | (~R.event & (R.line >= self.tier_lines))),
            data_in.eq(~R.write | self._host_wdata.valid),
            room.eq(oq.w_rdy & lq.w_rdy & data_in & (~R.write | direct | qz.i.ready)),
        ]
        gate = Signal()                               # the HDM decode's event may enter the tracker
        ev_take = Signal()
        lk = trk.lookup
        m.d.comb += [
            gate.eq(at & ~direct & R.event & room),
            ev_take.eq(hdm.event.valid & hdm.event.ready),
            lk.payload.layer.eq(R.layer), lk.payload.head.eq(R.head), lk.payload.position.eq(R.position),
            lk.valid.eq(at & ~direct & ~R.event & room & open_),
            self._lk_take.eq(lk.valid & lk.ready),
            self._lk_write.eq(R.write),
            seq_take.eq((at & direct & room) | ev_take | self._lk_take),
        ]
        served = Signal()
        m.d.comb += [
            served.eq(ev_take | self._lk_take),
            oq.w_en.eq(seq_take),
            oq.w_data.eq(Cat(direct, R.tag, R.write, R.status, ok & direct)),
            lq.w_en.eq(served),
            lq.w_data.eq(R.line[:lb]),
            self._host_wdata.ready.eq(seq_take & R.write),
            qz.i.valid.eq(served & R.write),
        ]
        return gate

    def _elaborate_host_rsp(self, m, held, tm):
        """The host data path's back: the mover's host responses through the dequantizer, merged with
        the order queue's direct answers into ``host_rsp``, in access order."""
        oq = self._host_order
        order_layout = data.StructLayout({"direct": 1, "tag": 16, "write": 1, "status": 2, "bad": 1})
        head = Signal(order_layout)
        m.d.comb += head.eq(oq.r_data)
        m.submodules.dequantizer = dq = self._cleared_by(held, LineDequantizer(tag_width=3))
        hr = tm.host_rsp.payload
        m.d.comb += [
            dq.i.payload.eq(Cat(hr.write, hr.resident, hr.bad, hr.data)),
            dq.i.valid.eq(tm.host_rsp.valid),
            tm.host_rsp.ready.eq(dq.i.ready),
        ]
        o = self._host_rsp
        d = dq.o.payload
        use = Signal()                                # the head waits for the mover's answer
        m.d.comb += [
            use.eq(oq.r_rdy & ~head.direct),
            o.valid.eq(oq.r_rdy & (head.direct | dq.o.valid)),
            o.payload.tag.eq(head.tag),
            o.payload.write.eq(head.write),
            o.payload.status.eq(head.status),
            o.payload.resident.eq(Mux(head.direct, 0, d.tag[1])),
            o.payload.bad.eq(Mux(head.direct, head.bad, d.tag[2] | (d.bad & ~head.write))),
            o.payload.data.eq(Mux(head.direct | head.write, 0, d.data)),
            oq.r_en.eq(o.valid & o.ready),
            dq.o.ready.eq(use & o.ready),
        ]

    def _elaborate_decisions(self, m, regs, trk, held):
        """Where the tracker's decisions go (docs/controller.md, "Tier mover", "Prefetch"): a fork that
        lets a decision go once every side that wants it has taken it (each side taken once): demand
        decisions to the ``decision`` port; to the tier mover as commands (demand decisions, and
        prefetch decisions that inserted); demand decisions without ``error`` to the prefetch engine's
        ``acc``. Beside the tracker, the write bit of every event and prefetch it accepts (prefetches: 0),
        in order, until its decision leaves. Returns (decision fire, counter steps, busy)."""
        # {write, host}: host = an access of the host data path (an HDM event or a lookup)
        m.submodules.write_queue = wq = self._cleared_by(held, SyncFIFO(width=2 if self.host_data else 1,
                                                                     depth=WRITE_QUEUE_DEPTH))
        dec, out = trk.decision, self.decision
        d = dec.payload
        is_pf = d.prefetch if self.prefetch else Const(0, 1)
        is_lk = d.lookup if self.host_data else Const(0, 1)
        self._wq_write = wq.r_data[0]
        fire = Signal()
        pf_take = Signal()                            # the tracker takes a prefetch insert this cycle
        ev_take = Signal()
        m.d.comb += [
            self._write_queue_full.eq(~wq.w_rdy),
            ev_take.eq(trk.event.valid & trk.event.ready),
            wq.w_en.eq(ev_take | pf_take | self._lk_take), wq.r_en.eq(fire),
        ]
        if self.host_data:                            # an HDM event (the arbiter's choice) or a lookup
            hdm_ev = Signal()
            m.d.comb += [hdm_ev.eq(ev_take & self._hdm_sel),
                         wq.w_data.eq(Cat((ev_take & trk.event.payload.write) | (self._lk_take & self._lk_write),
                                          hdm_ev | self._lk_take))]
        else:
            m.d.comb += wq.w_data.eq(ev_take & trk.event.payload.write)
        sides = [("out", out, ~is_pf & ~is_lk)]
        if self.tiers != "none":
            tm = self._new_tiermover()
            sides.append(("cmd", tm.cmd, ~is_pf | (d.inserted & ~d.error)))
        if self.prefetch:
            pf = PrefetchEngine(queue_bits=len(d.layer) + len(d.head), pos_width=len(d.position), **PREFETCH_PARAMS)
            sides.append(("acc", pf.acc, ~is_pf & ~is_lk & ~d.error))
        took = {}
        ready_terms = []
        for name, port, want in sides:
            t = took[name] = Signal(name=f"took_{name}")    # this side has taken the current decision
            if name == "out":
                m.d.comb += out.payload.eq(d)
            m.d.comb += port.valid.eq(dec.valid & want & ~t)
            ready_terms.append(~want | port.ready | t)
            with m.If(held | fire):
                m.d.sync += t.eq(0)
            with m.Elif(port.valid & port.ready):
                m.d.sync += t.eq(1)
        rdy = ready_terms[0]
        for term in ready_terms[1:]:
            rdy = rdy & term
        m.d.comb += [dec.ready.eq(rdy), fire.eq(dec.valid & dec.ready)]
        took_any = Const(0, 1)
        for t in took.values():
            took_any = took_any | t

        steps, busy = {}, Const(0, 1)
        if self.tiers != "none":
            steps, busy = self._elaborate_tiers(m, regs, trk, held, tm, wq)
        if self.prefetch:
            pf_steps, pf_busy = self._elaborate_prefetch(m, regs, trk, held, pf, wq, fire, is_pf, ev_take, pf_take)
            steps.update(pf_steps)
            busy = busy | pf_busy
        else:
            m.d.comb += pf_take.eq(0)
        took_busy = Signal()
        m.d.comb += took_busy.eq(took_any)
        return fire, steps, busy | took_busy

    def _elaborate_prefetch(self, m, regs, trk, held, pf, wq, fire, is_pf, ev_take, pf_take):
        """The prefetch engine behind the tracker (docs/controller.md, "Prefetch"). Its residency
        lookups are answered ``resident = 0`` one clock later (the tracker checks residency at insert
        time: a resident candidate is a no-op there), its fetches complete at once (the fill is the tier
        mover's, driven by the prefetch decision), its inserts go to the tracker's ``prefetch`` input.
        Exact mode holds the event sources until the last demand event's candidates are all inserted.
        Returns (counter steps, busy)."""
        m.submodules.prefetch = self._cleared_by(held, pf)
        d = trk.decision.payload
        hb = len(d.head)
        m.d.comb += [
            regs.caps_prefetch.eq(1),
            pf.window.eq(regs.prefetch_window),
            pf.trigger_all.eq(regs.prefetch_trigger),
            pf.overflow_stall.eq(regs.prefetch_overflow_stall),
            pf.rate_issues.eq(regs.prefetch_rate_issues),
            pf.rate_period.eq(regs.prefetch_period_cycles),
            # PREFETCH.decode_only: no new windows while the phase detector says prefill
            pf.enable.eq(~regs.prefetch_decode_only | self._phase_decode),
            pf.clear.eq(0),                           # its newest-position table is swept on every enable
            # every demand decision that is not an error: queue {layer, head}, the event's write bit
            pf.acc.payload.queue.eq(Cat(d.head, d.layer)),
            pf.acc.payload.pos.eq(d.position),
            pf.acc.payload.write.eq(self._wq_write),
            pf.acc.payload.hit.eq(d.hit),
        ]
        # residency lookups: answered "not resident", one clock after the request
        rsp_v = Signal()
        m.d.comb += [pf.chk.ready.eq(~rsp_v | pf.rsp.ready), pf.rsp.valid.eq(rsp_v), pf.rsp.payload.resident.eq(0)]
        with m.If(pf.chk.valid & pf.chk.ready):
            m.d.sync += rsp_v.eq(1)
        with m.Elif(pf.rsp.ready):
            m.d.sync += rsp_v.eq(0)
        # fetches: completed at once (the tag back on the next clock)
        cpl_v = Signal()
        cpl_tag = Signal.like(pf.cpl.payload.tag)
        cpl_fire = Signal()
        m.d.comb += [cpl_fire.eq(pf.cpl.valid & pf.cpl.ready), pf.cpl.valid.eq(cpl_v), pf.cpl.payload.tag.eq(cpl_tag),
                     pf.fetch.ready.eq(~cpl_v | cpl_fire)]
        with m.If(pf.fetch.valid & pf.fetch.ready):
            m.d.sync += [cpl_v.eq(1), cpl_tag.eq(pf.fetch.payload.tag)]
        with m.Elif(cpl_fire):
            m.d.sync += cpl_v.eq(0)
        # inserts: to the tracker's prefetch input (a write-bit queue entry each, 0)
        ins = pf.ins.payload
        tp = trk.prefetch
        m.d.comb += [
            tp.payload.layer.eq(ins.queue[hb:]),
            tp.payload.head.eq(ins.queue[:hb]),
            tp.payload.position.eq(ins.pos),
            tp.valid.eq(pf.ins.valid & wq.w_rdy),
            pf.ins.ready.eq(tp.ready & wq.w_rdy),
            pf_take.eq(tp.valid & tp.ready),
        ]
        # demand events accepted whose decision has not reached the engine yet (or left as an error: it
        # has no acc side), and prefetch inserts whose decision has not left yet; the tier mover's pace
        # does not hold the next event once the engine has the decision
        demand_open = Signal(range(2 * WRITE_QUEUE_DEPTH + 1))
        pf_open = Signal(range(2 * WRITE_QUEUE_DEPTH + 1))
        reached = Signal()                            # a demand decision reaches the engine (or leaves as an error)
        is_lk = d.lookup if self.host_data else Const(0, 1)
        m.d.comb += reached.eq((pf.acc.valid & pf.acc.ready) | (fire & ~is_pf & ~is_lk & d.error))
        m.d.sync += [demand_open.eq(demand_open + ev_take - reached),
                     pf_open.eq(pf_open + pf_take - (fire & is_pf))]
        with m.If(held):
            m.d.sync += [demand_open.eq(0), pf_open.eq(0)]
        # exact mode: hold the event sources until every demand decision has reached the engine and
        # the engine is idle (its inserts taken by the tracker); stall mode: until the engine's queue
        # has room for a request from every demand event inside the tracker
        on = regs.prefetch_window != 0
        exact_hold = Signal()
        stall_hold = Signal()
        m.d.comb += [
            exact_hold.eq(on & regs.prefetch_exact & ((demand_open != 0) | ~pf.idle)),
            stall_hold.eq(on & regs.prefetch_overflow_stall & (pf.pending + demand_open >= pf.depth)),
            self._prefetch_hold.eq(exact_hold | stall_hold),
        ]
        # PREFETCH_DROPS: the engine's drop_positions, which can step by more than one per clock
        steps = {}
        for reg, name in PREFETCH_ENGINE_COUNTERS.items():
            cnt = getattr(pf, name)
            delta = Signal.like(cnt, name=f"delta_pf_{name}")
            m.d.comb += delta.eq(cnt - _previous(m, held, cnt, f"prev_pf_{name}"))
            steps[reg] = delta
        busy = Signal()
        m.d.comb += busy.eq(~pf.idle | (pf_open != 0) | rsp_v | cpl_v)
        return steps, busy

    def _elaborate_tiers(self, m, regs, trk, held, tm, wq):
        """The tier mover behind the tracker (docs/controller.md, "Tier mover"): its commands come from
        the decision fork (:meth:`_elaborate_decisions`). Returns (counter steps, busy)."""
        g = self.geom
        m.submodules.tiermover = self._cleared_by(held, tm)
        m.d.comb += regs.caps_tiermover.eq(1)
        dec, cmd = trk.decision, tm.cmd

        # decision -> command (docs/tiermover.md "Integration"): queue = layer x n_kv_heads + head; a
        # no_victim or error decision carries neither hit nor inserted: a bypass (queue 0, slot 0)
        d = dec.payload
        moves = Signal()
        m.d.comb += [
            moves.eq(~d.error & (d.hit | d.inserted)),
            cmd.payload.queue.eq(Mux(d.error, 0, d.layer * g.n_kv_heads + d.head)),
            cmd.payload.position.eq(d.position),
            cmd.payload.slot.eq(Mux(moves, d.slot, 0)),
            cmd.payload.hit.eq(d.hit & ~d.error),
            cmd.payload.inserted.eq(d.inserted & ~d.error),
            cmd.payload.victim_valid.eq((d.victim_valid & moves) | (d.error & (wq.r_data[1] if self.host_data else 0))),
            cmd.payload.victim.eq(Mux(moves, d.victim, 0)),
            cmd.payload.write.eq(self._wq_write),
        ]
        if self.host_data:
            # the access's host line op rides on its command; a write's record from the quantizer
            lq, qz = self._host_lines, self._quantizer
            host = wq.r_data[1]
            m.d.comb += [
                cmd.payload.host.eq(host),
            # an errored decision never carries a host op (the HDM decode's events and lookups are in the
            # geometry); if one did, it goes as a bad command (victim_valid without inserted), not a bypass
            # of queue 0's flash
                cmd.payload.line.eq(lq.r_data),
                lq.r_en.eq(cmd.valid & cmd.ready & host),
                tm.host_wdata.valid.eq(qz.o.valid),
                tm.host_wdata.payload.eq(qz.o.payload.as_value()[1:]),    # the record without its tag
                qz.o.ready.eq(tm.host_wdata.ready),
            ]
            self._elaborate_host_rsp(m, held, tm)

        if self.bisnoop:
            bi_steps, bi_busy = self._elaborate_bisnoop(m, regs, held, tm)
        else:
            bi_steps, bi_busy = {}, self._grant_at_once(m, held, tm)
        m.d.comb += [tm.clear_status.eq(0),
                     tm.done.ready.eq(1)]                      # done records are counted

        # DRAM and flash
        self._tier_memories(m, regs, held, tm)

        # counters (each steps by at most one per cycle), as the tracker's
        def pulse(name):
            return _pulse(m, held, getattr(tm, name), f"tier_{name}")
        steps = {reg: pulse(name) for reg, name in TIER_COUNTERS.items()}
        steps["TIER_PROTO_ERRORS"] = sum(pulse(name) for name in TIER_PROTO)
        if self.host_data:                            # lines the quantizer stored raw (Inf/NaN)
            steps["QUANT_RAW_LINES"] = _pulse(m, held, self._quantizer.raw_lines, "quant_raw_lines")
        steps.update(bi_steps)
        busy = Signal()
        m.d.comb += busy.eq(~tm.idle | bi_busy)
        return steps, busy

    def _elaborate_bisnoop(self, m, regs, held, tm):  # noqa: C901 (one adapter, wired in one place)
        """The BI-snoop engine on the CXL.mem side of the host data path (docs/controller.md, "BI-snoop").

        M2S Req/RwD go to the engine (host cache state, NDR, parking, conflicts) and, for MemRd,
        MemRdData and MemWr (a MemWrPtl with every byte enabled), to the data path through a
        BI_ACCESS_DEPTH-deep access queue (so BIRsp and BIConflict keep flowing while the data path
        waits on a snoop); a read's DRS comes from the data path, the engine's own DRS (its line store
        holds no data here) is dropped. A partial MemWrPtl reaches the engine as a reserved opcode
        (bad_msg, Cmp) and not the data path. The tier mover's evict requests go through a gate: a
        policy evict for each line of the victim entry, a retry after Busy, the grant once every line
        is released. Returns (counter steps, busy)."""
        g = self.geom
        n_lines = bisnoop_lines(g.n_layers, g.n_kv_heads, self.entries_log2, self.tier_lines)
        eng = BISnoopEngine(lines=n_lines, n_tags=self.bitags, park_depth=BI_PARK_DEPTH, data_width=8)
        m.submodules.bisnoop = self._cleared_by(held, eng)
        en = ~held
        m.d.comb += [regs.caps_bisnoop.eq(1), eng.bi_id.eq(0),
                     eng.clear_status.eq(regs.control_counters_clear.replicate(MB.N_ERROR_KINDS))]

        # the time base: a tick every BI_TICK_CYCLES; BI_TIMEOUT.cycles rounded up to ticks, plus one
        # (the prescaler runs free, so a snoop's first tick comes 1 to BI_TICK_CYCLES cycles after it:
        # with the extra tick no timeout fires before BI_TIMEOUT.cycles), saturated; 0 stays 0 (never)
        tb_bits = (BI_TICK_CYCLES - 1).bit_length()
        prescale = Signal(tb_bits)
        m.d.sync += prescale.eq(prescale + 1)
        ticks = Signal(32)
        m.d.comb += [eng.tick.eq(prescale == BI_TICK_CYCLES - 1),
                     ticks.eq(Mux(regs.bi_timeout_cycles == 0, 0,
                                  ((regs.bi_timeout_cycles + (BI_TICK_CYCLES - 1)) >> tb_bits) + 1)),
                     eng.timeout.eq(Mux(ticks >> MB.TIMEOUT_BITS != 0, (1 << MB.TIMEOUT_BITS) - 1, ticks))]

        # the engine's line of an M2S address: (Addr - HDM_BASE) / 64 inside the window, else beyond
        # every line (the engine's bad_addr)
        base_l = Signal(MB.ADDR_BITS)
        size_l = Signal(MB.ADDR_BITS + 1)
        m.d.comb += [base_l.eq(Cat(regs.hdm_base_lo_value, regs.hdm_base_hi_value)[6:6 + MB.ADDR_BITS]),
                     size_l.eq(Cat(regs.hdm_size_lo_value, regs.hdm_size_hi_value)[6:7 + MB.ADDR_BITS])]

        def engine_addr(addr, name):
            off = Signal(MB.ADDR_BITS, name=f"{name}_off")
            out = Signal(MB.ADDR_BITS, name=f"{name}_eng")
            m.d.comb += [off.eq(addr - base_l),
                         out.eq(Mux((addr >= base_l) & (off < size_l), off, (1 << MB.ADDR_BITS) - 1))]
            return out

        def meta_ok(p):
            return (p.meta_field == MB.MF_NOOP) | ((p.meta_field == MB.MF_META0) &
                                                  ((p.meta_value == MB.MV_I) | (p.meta_value == MB.MV_A) |
                                                   (p.meta_value == MB.MV_S)))

        # the data path's access queue (and the write data beside it), fed from Req and RwD
        acc_layout = self._access.payload.shape()
        m.submodules.bi_access_queue = aq = self._cleared_by(held, SyncFIFO(width=acc_layout.size, depth=BI_ACCESS_DEPTH))
        m.submodules.bi_wdata_queue = wq = self._cleared_by(held, SyncFIFO(width=512, depth=BI_ACCESS_DEPTH))
        acc, wd = self._access, self._host_wdata
        acc_head = Signal(acc_layout)
        m.d.comb += [acc_head.eq(aq.r_data), acc.payload.eq(acc_head), acc.valid.eq(aq.r_rdy),
                     aq.r_en.eq(acc.valid & acc.ready),
                     wd.payload.eq(wq.r_data), wd.valid.eq(wq.r_rdy), wq.r_en.eq(wd.valid & wd.ready)]

        req, rwd = self.m2s_req, self.m2s_rwd
        rq, rw = req.payload, rwd.payload
        full_be = Signal()
        rd_data = Signal()                            # a read the data path serves
        wr_data = Signal()                            # a write the data path takes
        m.d.comb += [
            full_be.eq(rw.be == (1 << 64) - 1),
            rd_data.eq(((rq.opcode == MB.MEM_RD) | (rq.opcode == MB.MEM_RD_DATA)) & meta_ok(rq)),
            wr_data.eq(((rw.opcode == MB.MEM_WR) | ((rw.opcode == MB.MEM_WR_PTL) & full_be)) & meta_ok(rw)),
        ]
        ereq, erwd = eng.m2s_req, eng.m2s_rwd
        m.d.comb += [
            ereq.payload.opcode.eq(rq.opcode), ereq.payload.snp_type.eq(rq.snp_type),
            ereq.payload.meta_field.eq(rq.meta_field), ereq.payload.meta_value.eq(rq.meta_value),
            ereq.payload.tag.eq(rq.tag), ereq.payload.addr.eq(engine_addr(rq.addr, "req")),
            # a partial MemWrPtl: a reserved opcode for the engine (bad_msg, Cmp, nothing written)
            erwd.payload.opcode.eq(Mux((rw.opcode == MB.MEM_WR_PTL) & ~full_be, BI_RWD_REFUSED, rw.opcode)),
            erwd.payload.snp_type.eq(rw.snp_type), erwd.payload.meta_field.eq(rw.meta_field),
            erwd.payload.meta_value.eq(rw.meta_value), erwd.payload.tag.eq(rw.tag),
            erwd.payload.addr.eq(engine_addr(rw.addr, "rwd")),
            erwd.payload.be.eq(rw.be[:1]), erwd.payload.data.eq(rw.data[:8]),
        ]
        # each message once to each side that wants it (a flag per side); RwD first into the queue
        t_req_e, t_req_d, t_rwd_e, t_rwd_d = (Signal(name=n) for n in ("took_req_eng", "took_req_data",
                                                                       "took_rwd_eng", "took_rwd_data"))
        rwd_go, req_go = Signal(name="rwd_go"), Signal(name="req_go")
        req_fire, rwd_fire = Signal(name="req_fire"), Signal(name="rwd_fire")
        m.d.comb += [
            ereq.valid.eq(req.valid & en & ~t_req_e),
            erwd.valid.eq(rwd.valid & en & ~t_rwd_e),
            rwd_go.eq(rwd.valid & en & wr_data & ~t_rwd_d & aq.w_rdy & wq.w_rdy),
            req_go.eq(req.valid & en & rd_data & ~t_req_d & aq.w_rdy & ~rwd_go),
            aq.w_en.eq(rwd_go | req_go),
            aq.w_data.eq(Mux(rwd_go, Cat(Const(0, 6), rw.addr, Const(1, 1), rw.tag),
                             Cat(Const(0, 6), rq.addr, Const(0, 1), rq.tag))),
            wq.w_en.eq(rwd_go), wq.w_data.eq(rw.data),
            req.ready.eq(en & (t_req_e | ereq.ready) & (~rd_data | t_req_d | req_go)),
            rwd.ready.eq(en & (t_rwd_e | erwd.ready) & (~wr_data | t_rwd_d | rwd_go)),
            req_fire.eq(req.valid & req.ready), rwd_fire.eq(rwd.valid & rwd.ready),
        ]
        for took, fire, side in ((t_req_e, req_fire, ereq.valid & ereq.ready), (t_req_d, req_fire, req_go),
                                 (t_rwd_e, rwd_fire, erwd.valid & erwd.ready), (t_rwd_d, rwd_fire, rwd_go)):
            with m.If(held | fire):
                m.d.sync += took.eq(0)
            with m.Elif(side):
                m.d.sync += took.eq(1)
        birsp = self.m2s_birsp
        m.d.comb += [eng.m2s_birsp.payload.eq(birsp.payload), eng.m2s_birsp.valid.eq(birsp.valid & en),
                     birsp.ready.eq(eng.m2s_birsp.ready & en)]
        wiring.connect(m, eng.s2m_ndr, wiring.flipped(self.s2m_ndr))
        # the engine names lines of the window: a BISnp carries the host's address (+ HDM_BASE)
        bo = self.s2m_bisnp
        m.d.comb += [bo.payload.eq(eng.s2m_bisnp.payload), bo.payload.addr.eq(eng.s2m_bisnp.payload.addr + base_l),
                     bo.valid.eq(eng.s2m_bisnp.valid), eng.s2m_bisnp.ready.eq(bo.ready)]
        m.d.comb += [eng.s2m_drs.ready.eq(1),         # its store holds no data here: the data path answers
                     eng.error.ready.eq(1)]           # counted below

        # DRS from the data path: MemData, or MemData-NXM for an access outside the window / beyond the
        # geometry or a refused one; a write's response is consumed (the engine sends its Cmp)
        hr, drs = self._host_rsp, self.s2m_drs
        m.d.comb += [
            drs.valid.eq(hr.valid & ~hr.payload.write),
            drs.payload.opcode.eq(Mux((hr.payload.status != 0) | hr.payload.bad, MB.MEM_DATA_NXM, MB.MEM_DATA)),
            drs.payload.meta_field.eq(MB.MF_NOOP), drs.payload.meta_value.eq(0),
            drs.payload.tag.eq(hr.payload.tag), drs.payload.data.eq(hr.payload.data),
            hr.ready.eq(hr.payload.write | drs.ready),
        ]

        # the evict gate: a policy evict for each line of the victim entry (in parallel, up to the
        # engine's BITags), Busy retried after BI_RETRY_CYCLES; the grant once every line is released,
        # or its BISnpInv has left, or it was left to the host after BI_BUSY_LIMIT Busy answers: the
        # host's dirty data follows the move through the data path, and the data path is not held on
        # the host's answer (which can wait behind data-path accesses on RwD, e.g. a BIConflict behind
        # a MemWr when the access queue is full), neither for its snoop nor for the BITag it needs
        lpe = self.tier_lines
        er, gr, pol, prs = tm.evict_req, tm.evict_grant, eng.policy, eng.policy_rsp
        active = Signal()
        cur_q = Signal.like(er.payload.queue)
        cur_p = Signal.like(er.payload.position)
        released = Signal(lpe)
        issued = Signal(lpe)
        snooped = Signal(lpe)                         # a BISnpInv for the line has left
        retry = Signal(range(BI_RETRY_CYCLES + 1))
        busy_left = Signal(range(BI_BUSY_LIMIT + 1))  # Busy answers this eviction may still retry
        skip = Signal()                               # a Busy answer past the limit: the line is left
        es_lines = Signal(4)                          # log2 of the lines of an entry in the HDM layout
        m.d.comb += es_lines.eq(regs.hdm_layout_entry_shift - 6)
        line_mask = Signal(lpe)                       # lines that exist in the configured entry
        for i in range(lpe):
            m.d.comb += line_mask[i].eq(i < (1 << es_lines))
        layer = Signal(g.lb)
        head = Signal(g.hb)
        entry = Signal(MB.ADDR_BITS)
        m.d.comb += [
            layer.eq(cur_q // g.n_kv_heads), head.eq(cur_q % g.n_kv_heads),
            entry.eq(((((layer << regs.hdm_layout_head_shift) | head) << regs.hdm_layout_pos_shift) | cur_p)
                     << es_lines),
        ]
        todo = Signal(lpe)
        pick = Signal(range(lpe))
        m.d.comb += todo.eq(~released & ~issued)
        for i in reversed(range(lpe)):                # the lowest line still to ask for
            with m.If(todo[i]):
                m.d.comb += pick.eq(i)
        m.d.comb += [
            er.ready.eq(~active),
            pol.valid.eq(active & (todo != 0) & (retry == 0)),
            pol.payload.op.eq(MB.P_EVICT),
            pol.payload.addr.eq(entry | pick),
            prs.ready.eq(1),
            gr.valid.eq(active & ((released | snooped) == (1 << lpe) - 1)),
            gr.payload.queue.eq(cur_q), gr.payload.position.eq(cur_p), gr.payload.dirty_from_host.eq(0),
        ]
        low = Signal(MB.ADDR_BITS)                    # the line bits of an engine address
        got = Signal(range(lpe))
        mine = Signal()                               # the answer is for the current entry
        snp = eng.s2m_bisnp
        snp_line = Signal(range(lpe))
        snp_mine = Signal()
        m.d.comb += [low.eq((1 << es_lines) - 1),
                     got.eq(prs.payload.addr & low), mine.eq((prs.payload.addr & ~low) == entry),
                     snp_line.eq(snp.payload.addr & low),
                     snp_mine.eq(snp.valid & snp.ready & ((snp.payload.addr & ~low) == entry))]
        with m.If(retry != 0):
            m.d.sync += retry.eq(retry - 1)
        with m.If(held):
            m.d.sync += [active.eq(0), retry.eq(0)]
        with m.Elif(er.valid & er.ready):
            m.d.sync += [active.eq(1), cur_q.eq(er.payload.queue), cur_p.eq(er.payload.position),
                         released.eq(~line_mask), issued.eq(0), snooped.eq(0), busy_left.eq(BI_BUSY_LIMIT)]
        with m.Elif(gr.valid & gr.ready):
            m.d.sync += active.eq(0)
        with m.Else():
            rel_set = Signal(lpe)
            iss_set = Signal(lpe)
            iss_clr = Signal(lpe)
            snp_set = Signal(lpe)
            with m.If(pol.valid & pol.ready):
                m.d.comb += iss_set.eq(1 << pick)
            with m.If(snp_mine):
                m.d.comb += snp_set.eq(1 << snp_line)
            # answers of an earlier entry's snoops (Released after its BIRspI) are not this entry's
            with m.If(prs.valid & mine & (prs.payload.op == MB.R_BUSY) & (busy_left != 0)):
                m.d.comb += iss_clr.eq(1 << got)
                m.d.sync += [retry.eq(BI_RETRY_CYCLES), busy_left.eq(busy_left - 1)]
            with m.Elif(prs.valid & mine):             # Released, Done, Refused (a line it does not track)
                m.d.comb += rel_set.eq(1 << got)       # or Busy past the limit (left to the host)
                m.d.comb += skip.eq(prs.payload.op == MB.R_BUSY)
            m.d.sync += [released.eq(released | rel_set), issued.eq((issued | iss_set) & ~iss_clr),
                         snooped.eq(snooped | snp_set)]

        # counters (each steps by at most one per cycle)
        bis = Signal()
        bfire = Signal()
        efire = Signal()
        m.d.comb += [bis.eq(self.s2m_bisnp.valid & self.s2m_bisnp.ready),
                     bfire.eq(eng.m2s_birsp.valid & eng.m2s_birsp.ready),
                     efire.eq(eng.error.valid & eng.error.ready)]
        kind = eng.error.payload.kind
        proto = Signal()
        tmo = Signal()
        m.d.comb += [proto.eq(efire & sum(kind == MB.ERROR_KINDS[k] for k in BI_PROTO_KINDS).bool()),
                     tmo.eq(efire & (kind == MB.E_TIMEOUT))]
        op = eng.m2s_birsp.payload.opcode
        steps = {
            "BISNP_SENT": bis,
            "BIRSP_I": bfire & (op == MB.BIRSP_I), "BIRSP_S": bfire & (op == MB.BIRSP_S),
            "BIRSP_E": bfire & (op == MB.BIRSP_E),
            "BI_CONFLICTS": erwd.valid & erwd.ready & (erwd.payload.opcode == MB.BI_CONFLICT),
            "PROTO_ERRORS": proto, "BI_TIMEOUTS": tmo, "BI_SNOOPS_SKIPPED": skip,
        }
        m.d.comb += [regs.status_bi_timeout.eq(eng.err_status[MB.E_TIMEOUT - 1]),
                     regs.irq_status_bi_timeout_set.eq(tmo), regs.irq_status_proto_error_set.eq(proto)]
        # snoops on their way or awaiting the host's answer (the gate does not wait for them): BISnp sent,
        # minus BIRsp taken, plus those the engine then reports unknown or illegal (they close nothing)
        outstanding = Signal(range(2 * self.bitags + 2))
        closes_nothing = Signal()
        m.d.comb += closes_nothing.eq(efire & ((kind == MB.E_UNKNOWN_TAG) | (kind == MB.E_ILLEGAL_RSP)))
        with m.If(held):
            m.d.sync += outstanding.eq(0)
        with m.Else():
            m.d.sync += outstanding.eq(outstanding + bis - bfire + closes_nothing)
        busy = Signal()
        m.d.comb += busy.eq(active | ~eng.idle | aq.r_rdy | (outstanding != 0))
        return steps, busy

    def _grant_at_once(self, m, held, tm):
        """The evict permission without the BI-snoop engine (HDM-H: no host caching): each request is
        granted at once with dirty_from_host = 0, through a one-request register. Returns busy."""
        gv = Signal()
        gq = Signal.like(tm.evict_req.payload.queue)
        gp = Signal.like(tm.evict_req.payload.position)
        m.d.comb += [
            tm.evict_req.ready.eq(~gv),
            tm.evict_grant.valid.eq(gv),
            tm.evict_grant.payload.queue.eq(gq),
            tm.evict_grant.payload.position.eq(gp),
            tm.evict_grant.payload.dirty_from_host.eq(0),
        ]
        with m.If(held):
            m.d.sync += gv.eq(0)
        with m.Elif(tm.evict_req.valid & tm.evict_req.ready):
            m.d.sync += [gv.eq(1), gq.eq(tm.evict_req.payload.queue), gp.eq(tm.evict_req.payload.position)]
        with m.Elif(tm.evict_grant.ready):
            m.d.sync += gv.eq(0)
        return gv

    def _tier_memories(self, m, regs, held, tm):
        """The tier mover's DRAM and flash: models in the top, or ports of the top."""
        if self.tiers == "model":
            cfg = tm.cfg
            reads = 1 << max(1, (tm.max_reads - 1).bit_length())      # the mover keeps <= max_reads reads out
            dram = TierMemory(cfg.dram_lines, cfg.line_bits, cfg.dram_addr_bits, max_reads=reads)
            flash = TierMemory(cfg.flash_lines, cfg.line_bits, cfg.flash_addr_bits, max_reads=reads)
            m.submodules.tier_dram = self._cleared_by(held, dram)
            m.submodules.tier_flash = self._cleared_by(held, flash)
            for mem, req, resp in ((dram, tm.dram_req, tm.dram_resp), (flash, tm.flash_req, tm.flash_resp)):
                m.d.comb += [mem.req.valid.eq(req.valid), mem.req.payload.addr.eq(req.payload.addr),
                             mem.req.payload.write.eq(req.payload.write), mem.req.payload.wdata.eq(req.payload.wdata),
                             req.ready.eq(mem.req.ready),
                             resp.valid.eq(mem.resp.valid), resp.payload.eq(mem.resp.payload),
                             mem.resp.ready.eq(resp.ready)]
            m.d.comb += [dram.latency.eq(regs.tier_lat_dram), flash.latency.eq(regs.tier_lat_flash)]
        else:
            for name in TIER_MEMORY_PORTS:
                wiring.connect(m, getattr(tm, name), wiring.flipped(getattr(self, name)))


class HoldDomainController(wiring.Component):
    """``Controller(hold_domain="hold", **params)`` as a top of its own, the way a board top
    builds it: the Controller's ports, plus ``clk`` and ``rst`` of the sync domain defined here,
    with the hold domain (:func:`hold_domain`) beside it. For simulating that structure (the
    Verilator harness, tests/test_controller.py); in the default structure the Controller is
    the top itself."""

    def __init__(self, **params):
        self.controller = Controller(hold_domain="hold", **params)
        members = dict(self.controller.signature.members)
        if {"clk", "rst"} & set(members):
            raise ValueError("the Controller has a port named clk or rst")
        super().__init__({**members, "clk": In(1), "rst": In(1)})

    def elaborate(self, platform):
        m = Module()
        cd = ClockDomain("sync")
        cd.clk, cd.rst = self.clk, self.rst       # the ports themselves: no copy in comb (see hold_domain)
        m.domains.sync = cd
        m.domains.hold = hold_domain(cd, "hold")
        m.submodules.controller = ctl = self.controller
        for name, member in ctl.signature.members.items():
            outer, inner = getattr(self, name), getattr(ctl, name)
            if member.is_signature:
                wiring.connect(m, wiring.flipped(outer), inner)
            elif member.flow == Out:
                m.d.comb += outer.eq(inner)
            else:
                m.d.comb += inner.eq(outer)
        return m


def verilog_tops():
    return {"controller": lambda: Controller(),
            # the host data path: quantizer records (547 bits) of 8 lines per entry in the tier memories;
            # a small geometry (the default one's flash model alone is 65,536 x 547 bits, minutes to emit)
            "controller_host_data": lambda: Controller(n_layers=2, n_kv_heads=2, entries_log2=6, max_budget=4,
                                                       host_data=True),
            # and the BI-snoop engine on its CXL.mem side: a small geometry, its filter is one
            # register per line (2 x 2 x 64 x 8 = 2,048 lines: models.controller.BI_MAX_LINES)
            "controller_bisnoop": lambda: Controller(n_layers=2, n_kv_heads=2, entries_log2=6, max_budget=4,
                                                     bitags=4, host_data=True, bisnoop=True),
            # the full Llama-70B geometry must elaborate and lint, with the tracker's memories
            # as ports (device DRAM) and 256 slots per queue on chip (the tracker's tracker_full)
            "controller_llama70b": lambda: Controller(n_layers=80, n_kv_heads=8, entries_log2=17,
                                                      tracker="external", max_budget=256, tiers="external",
                                                      tier_lines=8, tier_line_bits=512)}
