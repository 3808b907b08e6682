"""The tracker's metadata channels as an AXI4 master (device DRAM behind an AXI4 interconnect).

Golden model: :mod:`cxlkv.models.metaaxi`. Documentation: ``docs/metaaxi.md``.

``MetaAxiMaster`` turns the tracker's split metadata channels (``meta_rd`` {addr} ->
``meta_rd_data``, ``meta_wr`` {addr, wdata}; hdl/tracker.py) into single-beat 64-bit AXI4
transactions at ``base + 8 * addr``, and adds the one ordering rule the tracker needs that AXI4
does not give across its read and write channels: *a read of a word whose write has not been
acknowledged (B) is held back* (a table of the writes in flight, compared with every read).

``TrackerAxi4`` is the tracker with this master in front of its metadata channels: the
configuration to use when the metadata lives in DRAM behind an AXI4 port.
"""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from cxlkv.hdl.tracker import COUNTERS, INFLIGHT, META_BITS, Tracker
from cxlkv.models import metaaxi as M

COUNTER_BITS = 32


class AXI4Signature(wiring.Signature):
    """AXI4 (single-beat use), 64-bit data, from the master's side."""

    def __init__(self, addr_width, id_width):
        super().__init__({
            "awid": Out(id_width), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(META_BITS), "wstrb": Out(META_BITS // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(id_width), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(id_width), "rdata": In(META_BITS), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
            "rready": Out(1),
        })


class MetaAxiMaster(wiring.Component):
    """Parameters: ``word_addr_width`` (the tracker's metadata address), ``addr_width`` (AXI),
    ``id_width``, ``pending_writes`` (writes awaiting their B response; more stall ``meta_wr``).

    Ports: ``meta_rd``/``meta_rd_data``/``meta_wr`` (the tracker's, flipped), ``m_axi``,
    ``base`` (byte address of word 0, 8-byte aligned), counters ``rd_errors``, ``wr_errors``
    (SLVERR/DECERR responses; an errored read returns 0), ``raw_holds`` (cycles a read waited
    for a write's B), ``protocol_errors`` (a B or R beat nothing was waiting for, or a
    multi-beat R: dropped and counted).
    """

    def __init__(self, word_addr_width, *, addr_width=M.ADDR_WIDTH, id_width=M.ID_WIDTH,
                 pending_writes=M.PENDING_WRITES):
        if pending_writes < 1 or pending_writes & (pending_writes - 1):
            raise ValueError(f"pending_writes must be a power of two, got {pending_writes}")
        if word_addr_width + 3 > addr_width:
            raise ValueError(f"{word_addr_width}-bit word addresses do not fit a {addr_width}-bit AXI address")
        self.word_addr_width, self.addr_width = word_addr_width, addr_width
        self.id_width, self.pending_writes = id_width, pending_writes
        super().__init__({
            "meta_rd": In(stream.Signature(data.StructLayout({"addr": word_addr_width}))),
            "meta_rd_data": Out(stream.Signature(META_BITS)),
            "meta_wr": In(stream.Signature(data.StructLayout({"addr": word_addr_width, "wdata": META_BITS}))),
            "m_axi": Out(AXI4Signature(addr_width, id_width)),
            "base": In(addr_width),
            "rd_errors": Out(COUNTER_BITS), "wr_errors": Out(COUNTER_BITS),
            "raw_holds": Out(COUNTER_BITS), "protocol_errors": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        ax = self.m_axi
        P = self.pending_writes
        PB = max(1, (P - 1).bit_length())
        AW = self.word_addr_width

        def bump(counter, cond):
            with m.If(cond):
                m.d.sync += counter.eq(counter + 1)

        def byte_addr(word):
            return (self.base + Cat(Const(0, 3), word))[:self.addr_width]

        # writes in flight until their B: a FIFO of word addresses (B responses come in order:
        # one ID), searched by every read
        p_valid = Signal(P)
        p_addr = [Signal(AW, name=f"p_addr{i}") for i in range(P)]
        p_wp, p_rp = Signal(PB + 1, name="p_wp"), Signal(PB + 1, name="p_rp")
        p_full = Signal()
        m.d.comb += p_full.eq((p_wp - p_rp)[:PB + 1] == P)

        # -- reads
        rd_addr = self.meta_rd.payload.addr
        hazard = Signal()
        m.d.comb += hazard.eq(Cat(*[p_valid[i] & (p_addr[i] == rd_addr) for i in range(P)]).any())
        outstanding_r = Signal(range(M.MAX_READS + 1))
        r_room = Signal()
        m.d.comb += r_room.eq(outstanding_r < M.MAX_READS)
        # AXI: once ARVALID is up it stays until ARREADY. A write that enters the pending list while
        # the read waits is younger than the read, which need not wait for it: the hold keeps it out.
        ar_hold = Signal()
        ar_go = Signal()
        m.d.comb += ar_go.eq(ar_hold | (~hazard & r_room))
        m.d.comb += [
            ax.arid.eq(M.READ_ID), ax.araddr.eq(byte_addr(rd_addr)), ax.arlen.eq(0), ax.arsize.eq(3),
            ax.arburst.eq(1),
            ax.arvalid.eq(self.meta_rd.valid & ar_go),
            self.meta_rd.ready.eq(ax.arready & ar_go),
        ]
        m.d.sync += ar_hold.eq(ax.arvalid & ~ax.arready)
        bump(self.raw_holds, self.meta_rd.valid & hazard & ~ar_hold)
        ar_fire = ax.arvalid & ax.arready
        r_ok_beat = ax.rvalid & (outstanding_r != 0) & ax.rlast
        r_bad_beat = ax.rvalid & ((outstanding_r == 0) | ~ax.rlast)
        m.d.comb += [
            self.meta_rd_data.valid.eq(r_ok_beat),
            # SLVERR / DECERR (RRESP[1]) read as 0, as models/metaaxi.read_data: EXOKAY is no error
            self.meta_rd_data.payload.eq(Mux(ax.rresp[1], 0, ax.rdata)),
            ax.rready.eq(self.meta_rd_data.ready | r_bad_beat),
        ]
        r_fire = r_ok_beat & self.meta_rd_data.ready
        bump(self.rd_errors, r_fire & ax.rresp[1])
        r_stray = ax.rvalid & r_bad_beat            # counted below with a stray B of the same cycle
        m.d.sync += outstanding_r.eq(outstanding_r + ar_fire - r_fire)

        # -- writes: AW and W of one write may be accepted in different cycles
        aw_done, w_done = Signal(name="aw_done"), Signal(name="w_done")
        wr_addr = self.meta_wr.payload.addr
        wr_data = self.meta_wr.payload.wdata
        go = Signal()
        m.d.comb += go.eq(self.meta_wr.valid & ~p_full)
        m.d.comb += [
            ax.awid.eq(M.WRITE_ID), ax.awaddr.eq(byte_addr(wr_addr)), ax.awlen.eq(0), ax.awsize.eq(3),
            ax.awburst.eq(1), ax.awvalid.eq(go & ~aw_done),
            ax.wdata.eq(wr_data), ax.wstrb.eq(0xFF), ax.wlast.eq(1), ax.wvalid.eq(go & ~w_done),
        ]
        aw_ok = aw_done | ax.awready
        w_ok = w_done | ax.wready
        wr_take = Signal()
        m.d.comb += [wr_take.eq(go & aw_ok & w_ok), self.meta_wr.ready.eq(wr_take)]
        with m.If(wr_take):
            m.d.sync += [aw_done.eq(0), w_done.eq(0)]
        with m.Else():
            with m.If(ax.awvalid & ax.awready):
                m.d.sync += aw_done.eq(1)
            with m.If(ax.wvalid & ax.wready):
                m.d.sync += w_done.eq(1)

        # -- B: retire the oldest write in flight
        b_ok = ax.bvalid & (p_wp != p_rp)
        m.d.comb += ax.bready.eq(1)
        bump(self.wr_errors, b_ok & ax.bresp[1])
        b_stray = ax.bvalid & (p_wp == p_rp)
        # a stray R and a stray B in one cycle are two errors (two bumps would keep only the last)
        with m.If(r_stray | b_stray):
            m.d.sync += self.protocol_errors.eq(self.protocol_errors + r_stray + b_stray)

        set_v = Signal(P)
        clr_v = Signal(P)
        m.d.comb += [set_v.eq(wr_take << p_wp[:PB]), clr_v.eq(b_ok << p_rp[:PB])]
        m.d.sync += p_valid.eq((p_valid & ~clr_v) | set_v)
        with m.If(wr_take):
            m.d.sync += p_wp.eq(p_wp + 1)
            for i in range(P):
                with m.If(p_wp[:PB] == i):
                    m.d.sync += p_addr[i].eq(wr_addr)
        with m.If(b_ok):
            m.d.sync += p_rp.eq(p_rp + 1)
        return m


class TrackerAxi4(wiring.Component):
    """The tracker with its metadata behind an AXI4 master (``MetaAxiMaster``).

    Same parameters and ports as :class:`cxlkv.hdl.tracker.Tracker`, with ``m_axi`` and
    ``base`` instead of the metadata channels, and the master's counters beside the tracker's.
    """

    def __init__(self, n_layers=2, n_kv_heads=2, n_positions=64, n_buckets=128, max_budget=None,
                 inflight=INFLIGHT, *, addr_width=M.ADDR_WIDTH, id_width=M.ID_WIDTH,
                 pending_writes=M.PENDING_WRITES):
        self.tracker = Tracker(n_layers, n_kv_heads, n_positions, n_buckets, max_budget, inflight)
        self.master = MetaAxiMaster(self.tracker.geom.addr, addr_width=addr_width, id_width=id_width,
                                    pending_writes=pending_writes)
        self.geom = self.tracker.geom
        members = {name: member for name, member in self.tracker.signature.members.items()
                   if name not in ("meta_rd", "meta_rd_data", "meta_wr")}
        members.update({name: self.master.signature.members[name]
                        for name in ("m_axi", "base", "rd_errors", "wr_errors", "raw_holds", "protocol_errors")})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tracker = t = self.tracker
        m.submodules.master = mm = self.master
        connect(m, t.meta_rd, mm.meta_rd)
        connect(m, mm.meta_rd_data, t.meta_rd_data)
        connect(m, t.meta_wr, mm.meta_wr)
        connect(m, flipped(self.m_axi), mm.m_axi)
        m.d.comb += mm.base.eq(self.base)
        for name in ("rd_errors", "wr_errors", "raw_holds", "protocol_errors"):
            m.d.comb += getattr(self, name).eq(getattr(mm, name))
        for name in ("event", "victim_req", "prefetch", "lookup"):
            connect(m, flipped(getattr(self, name)), getattr(t, name))
        for name in ("decision", "victim_resp"):
            connect(m, getattr(t, name), flipped(getattr(self, name)))
        for name in ("budget", "pinned", "alpha", "rate_mant", "rate_shift", "tln_r", "tln_d", "bucket_bits",
                     "write_sample", "read_credit", "decode_lock"):
            m.d.comb += getattr(t, name).eq(getattr(self, name))
        for name in ("cfg_error", "busy") + COUNTERS:
            m.d.comb += getattr(self, name).eq(getattr(t, name))
        return m


def verilog_tops():
    """`make verilog` / `make lint`: the master alone, and the tracker behind it (bench geometry)."""
    return {"metaaxi": lambda: MetaAxiMaster(13),
            "tracker_axi4": lambda: TrackerAxi4(3, 2, 128, 128)}
