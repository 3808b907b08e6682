"""CXL 3.0 Back-Invalidate snoop engine: snoop filter, line store, BITag pool, parking.

Golden model (the one definition of the behaviour): :mod:`cxlkv.models.bisnoop`.
Documentation: ``docs/bisnoop.md``. Formal properties: ``cxlkv.tb.bisnoop.formal``.

One *event* per clock. An event is, by priority: the replay of one request parked
behind a snoop that has just completed (atomic: a snoop's parked requests all
replay before anything else is taken), a timeout report, an M2S RwD message, an
M2S BIRsp, a policy request, an M2S Req. RwD and BIRsp never wait for the Req
channel (invariant 9). An event reads the snoop filter and the line store
combinationally, updates them at the clock edge, and loads at most one message
into each output register (S2M DRS, S2M NDR, S2M BISnp, policy response, error);
the next event is taken only when every output register is empty or being
emptied, so messages leave each channel in event order (which keeps NDR order
per address for BIConflictAck, invariant 8).

State:

* ``state``: the filter, HI/HS/HA per line (registers; a line is in BIP exactly
  when a valid, non-draining BITag entry names it).
* ``store``: the line data (a ``lib.memory`` with byte write enables). In the
  full controller this is the port towards the tier mover's media.
* per BITag: valid, draining, line, snoop opcode, writeback seen, conflict
  seen, age (ticks), expired, reported; and a park FIFO of ``park_depth``
  requests (one ``lib.memory`` holds all of them).
"""
from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._params import refusals, require_int
from cxlkv.models import bisnoop as M


def req_layout():
    return data.StructLayout({"opcode": 4, "snp_type": 3, "meta_field": 2, "meta_value": 2,
                              "tag": M.TAG_BITS, "addr": M.ADDR_BITS})


def park_layout():
    """A parked request: everything but the address, which is the line of the snoop it waits for."""
    return data.StructLayout({"opcode": 4, "snp_type": 3, "meta_field": 2, "meta_value": 2, "tag": M.TAG_BITS})


def rwd_layout(data_width):
    return data.StructLayout({"opcode": 4, "snp_type": 3, "meta_field": 2, "meta_value": 2,
                              "tag": M.TAG_BITS, "addr": M.ADDR_BITS, "be": data_width // 8,
                              "data": data_width})


def birsp_layout():
    return data.StructLayout({"opcode": 4, "bi_id": M.BI_ID_BITS, "bitag": M.BITAG_BITS, "low_addr": 2})


def ndr_layout():
    return data.StructLayout({"opcode": 3, "meta_field": 2, "meta_value": 2, "tag": M.TAG_BITS})


def drs_layout(data_width):
    return data.StructLayout({"opcode": 3, "meta_field": 2, "meta_value": 2, "tag": M.TAG_BITS,
                              "data": data_width})


def bisnp_layout():
    return data.StructLayout({"opcode": 4, "bi_id": M.BI_ID_BITS, "bitag": M.BITAG_BITS, "addr": M.ADDR_BITS})


def policy_layout():
    return data.StructLayout({"op": 2, "addr": M.ADDR_BITS})


def policy_rsp_layout(data_width):
    return data.StructLayout({"op": 2, "state": 2, "addr": M.ADDR_BITS, "data": data_width})


def error_layout():
    return data.StructLayout({"kind": 3, "addr": M.ADDR_BITS, "tag": M.TAG_BITS})


#: port name -> (direction, layout factory taking data_width); the bench and runner use it
CHANNELS = {
    "m2s_req": (In, lambda dw: req_layout()),
    "m2s_rwd": (In, rwd_layout),
    "m2s_birsp": (In, lambda dw: birsp_layout()),
    "policy": (In, lambda dw: policy_layout()),
    "s2m_ndr": (Out, lambda dw: ndr_layout()),
    "s2m_drs": (Out, drs_layout),
    "s2m_bisnp": (Out, lambda dw: bisnp_layout()),
    "policy_rsp": (Out, policy_rsp_layout),
    "error": (Out, lambda dw: error_layout()),
}


class BISnoopEngine(wiring.Component):
    """Device side of CXL Back-Invalidate; see the module docstring and ``docs/bisnoop.md``.

    Parameters
    ----------
    lines : number of lines the filter and store hold (power of two, >= 2).
    n_tags : BITag pool size (outstanding snoops).
    park_depth : requests that can park behind one outstanding snoop.
    data_width : line data bits (512 for a 64-byte line; benches use narrower).

    Ports
    -----
    m2s_req, m2s_rwd, m2s_birsp, policy : input streams.
    s2m_ndr, s2m_drs, s2m_bisnp, policy_rsp, error : output streams.
    tick : time-base strobe; outstanding snoops age by one per pulse.
    timeout : BIRsp timeout in ticks (0: never).
    bi_id : this device's BI-ID (sent in BISnp, required in BIRsp).
    clear_status : write-one-to-clear pulse for ``err_status`` bits.
    err_status : sticky bit k-1 per error kind k; ``irq`` is their OR.
    err_count : saturating 16-bit counter per error kind.
    idle : no event pending inside and no output message waiting.
    """

    def __init__(self, lines=16, n_tags=4, park_depth=2, data_width=64):
        with refusals(self):
            if lines < 2 or lines & (lines - 1):
                raise ValueError(f"lines must be a power of two >= 2, got {lines}")
            if not 1 <= n_tags <= 1 << M.BITAG_BITS or park_depth < 1:
                raise ValueError(f"n_tags in 1..4096 and park_depth >= 1, got {n_tags} and {park_depth}")
            if require_int(self, "data_width", data_width, 8) % 8:
                raise ValueError(f"BISnoopEngine: data_width must be a multiple of 8 (whole byte lanes), got {data_width}")
        self.lines, self.n_tags, self.park_depth, self.data_width = lines, n_tags, park_depth, data_width
        self.line_bits = (lines - 1).bit_length()
        ports = {name: d(stream.Signature(lay(data_width))) for name, (d, lay) in CHANNELS.items()}
        ports.update({
            "tick": In(1),
            "timeout": In(M.TIMEOUT_BITS),
            "bi_id": In(M.BI_ID_BITS),
            "clear_status": In(M.N_ERROR_KINDS),
            "err_status": Out(M.N_ERROR_KINDS),
            "irq": Out(1),
            "err_count": Out(data.ArrayLayout(M.COUNTER_BITS, M.N_ERROR_KINDS)),
            "idle": Out(1),
        })
        super().__init__(ports)
        # state is created here (not in elaborate) so a formal wrapper can refer to it
        n = n_tags
        self.state = Signal(data.ArrayLayout(2, lines))
        self.t_valid = [Signal(name=f"t{t}_valid") for t in range(n)]
        self.t_drain = [Signal(name=f"t{t}_drain") for t in range(n)]
        self.t_line = [Signal(range(lines), name=f"t{t}_line") for t in range(n)]
        self.t_op = [Signal(2, name=f"t{t}_op") for t in range(n)]
        self.t_wb = [Signal(name=f"t{t}_wb_seen") for t in range(n)]
        self.t_conf = [Signal(name=f"t{t}_conflict_seen") for t in range(n)]
        self.t_age = [Signal(M.TIMEOUT_BITS, name=f"t{t}_age") for t in range(n)]
        self.t_expired = [Signal(name=f"t{t}_expired") for t in range(n)]
        self.t_reported = [Signal(name=f"t{t}_reported") for t in range(n)]
        self.p_head = [Signal(range(park_depth), name=f"t{t}_park_head") for t in range(n)]
        self.p_count = [Signal(range(park_depth + 1), name=f"t{t}_park_count") for t in range(n)]
        self.store = Memory(shape=data_width, depth=lines, init=[])
        self.park = Memory(shape=park_layout(), depth=n * park_depth, init=[])
        # event decode, visible to the formal wrapper
        self.fire = Signal()                 # an event happens this cycle
        self.ev_line = Signal(range(lines))  # the line it is about
        self.ev_addr_ok = Signal()
        self.ev_bip = Signal()               # that line is in BIP (before the event)
        self.ev_kind = Signal(3)             # which source (EV_*)
        self.ev_req = Signal(req_layout())   # the request being handled (new or replayed)
        self.ev_out = {name: Signal(lay(data_width), name=f"ev_{name}")
                       for name, (d, lay) in CHANNELS.items() if d is Out}
        self.ev_out_valid = {name: Signal(name=f"ev_{name}_valid") for name in self.ev_out}
        self.ev_set_state = Signal()         # the event writes the filter ...
        self.ev_new_state = Signal(2)        # ... with this state
        self.ev_write = Signal()             # the event writes the store (MemWr/MemWrPtl)
        self.ev_complete = Signal()          # a legal BIRsp answers snoop ev_rsp_tag
        self.ev_rsp_tag = Signal(range(n_tags))
        self.ev_alloc = Signal()             # a BISnp goes out on BITag ev_free_tag
        self.ev_free_tag = Signal(range(n_tags))
        self.drain_any = Signal()            # parked requests are replaying
        self.timeout_pending = Signal()      # an expiry waits to be reported

    EV_DRAIN, EV_TIMEOUT, EV_RWD, EV_BIRSP, EV_POLICY, EV_REQ = range(6)

    def elaborate(self, platform):
        m = Module()
        n, pd, dw = self.n_tags, self.park_depth, self.data_width
        lb = self.line_bits
        m.submodules.store = self.store
        m.submodules.park = self.park
        st_wr = self.store.write_port(granularity=8)
        st_rd = self.store.read_port(domain="comb")
        pk_wr = self.park.write_port()
        pk_rd = self.park.read_port(domain="comb")

        outs = {name: getattr(self, name) for name, (d, _) in CHANNELS.items() if d is Out}
        advance = Signal()
        m.d.comb += advance.eq(_all([~o.valid | o.ready for o in outs.values()]))

        # -- which event: priority drain > timeout > rwd > birsp > policy > req -------------
        drain_any = self.drain_any
        drain_tag = Signal(range(n))
        for t in range(n):
            with m.If(self.t_drain[t]):
                m.d.comb += [drain_any.eq(1), drain_tag.eq(t)]
        tmo_any = self.timeout_pending
        tmo_tag = Signal(range(n))
        for t in reversed(range(n)):                 # lowest tag first
            with m.If(self.t_valid[t] & ~self.t_drain[t] & self.t_expired[t] & ~self.t_reported[t]):
                m.d.comb += [tmo_any.eq(1), tmo_tag.eq(t)]

        req, rwd, birsp, pol = self.m2s_req.payload, self.m2s_rwd.payload, self.m2s_birsp.payload, self.policy.payload
        kind = self.ev_kind
        evv = Signal()                               # an event source is pending
        req_blocked = Signal()
        with m.If(drain_any):
            m.d.comb += [kind.eq(self.EV_DRAIN), evv.eq(1)]
        with m.Elif(tmo_any):
            m.d.comb += [kind.eq(self.EV_TIMEOUT), evv.eq(1)]
        with m.Elif(self.m2s_rwd.valid):
            m.d.comb += [kind.eq(self.EV_RWD), evv.eq(1)]
        with m.Elif(self.m2s_birsp.valid):
            m.d.comb += [kind.eq(self.EV_BIRSP), evv.eq(1)]
        with m.Elif(self.policy.valid):
            m.d.comb += [kind.eq(self.EV_POLICY), evv.eq(1)]
        with m.Elif(self.m2s_req.valid):
            m.d.comb += [kind.eq(self.EV_REQ), evv.eq(~req_blocked)]
        m.d.comb += self.fire.eq(advance & evv)
        fire = self.fire
        m.d.comb += [
            self.m2s_rwd.ready.eq(fire & (kind == self.EV_RWD)),
            self.m2s_birsp.ready.eq(fire & (kind == self.EV_BIRSP)),
            self.policy.ready.eq(fire & (kind == self.EV_POLICY)),
            self.m2s_req.ready.eq(fire & (kind == self.EV_REQ)),
        ]

        # -- the BITag a BIRsp names ----------------------------------------------------------
        rsp_known = Signal()
        rsp_tag = self.ev_rsp_tag
        for t in range(n):
            with m.If(birsp.bitag == t):
                m.d.comb += [rsp_tag.eq(t), rsp_known.eq(self.t_valid[t] & ~self.t_drain[t])]
        rsp_ok = Signal()
        m.d.comb += rsp_ok.eq(rsp_known & (birsp.bi_id == self.bi_id))
        rsp_line = Signal(range(self.lines))
        rsp_op = Signal(2)
        tmo_line = Signal(range(self.lines))
        for t in range(n):
            with m.If(rsp_tag == t):
                m.d.comb += [rsp_line.eq(self.t_line[t]), rsp_op.eq(self.t_op[t])]
            with m.If(tmo_tag == t):
                m.d.comb += tmo_line.eq(self.t_line[t])

        # -- the request (new or replayed) ------------------------------------------------------
        pk_rd_tag_base = Signal(range(n * pd))
        drain_head = Signal(range(pd))
        drain_line = Signal(range(self.lines))
        for t in range(n):
            with m.If(drain_tag == t):
                m.d.comb += [drain_head.eq(self.p_head[t]), drain_line.eq(self.t_line[t])]
        m.d.comb += [pk_rd_tag_base.eq(drain_tag * pd), pk_rd.addr.eq(pk_rd_tag_base + drain_head)]
        rq = self.ev_req
        with m.If(kind == self.EV_DRAIN):
            # a replayed request is for the snoop's own line by construction (no address is parked)
            m.d.comb += [rq.opcode.eq(pk_rd.data.opcode), rq.snp_type.eq(pk_rd.data.snp_type),
                         rq.meta_field.eq(pk_rd.data.meta_field), rq.meta_value.eq(pk_rd.data.meta_value),
                         rq.tag.eq(pk_rd.data.tag), rq.addr.eq(drain_line)]
        with m.Else():
            m.d.comb += rq.eq(req)

        # -- the event's address and line -------------------------------------------------------
        ev_addr = Signal(M.ADDR_BITS)
        with m.Switch(kind):
            with m.Case(self.EV_DRAIN, self.EV_REQ):
                m.d.comb += ev_addr.eq(rq.addr)
            with m.Case(self.EV_RWD):
                m.d.comb += ev_addr.eq(rwd.addr)
            with m.Case(self.EV_BIRSP):
                m.d.comb += ev_addr.eq(rsp_line)
            with m.Case(self.EV_TIMEOUT):
                m.d.comb += ev_addr.eq(tmo_line)
            with m.Case(self.EV_POLICY):
                m.d.comb += ev_addr.eq(pol.addr)
        line = self.ev_line
        m.d.comb += [line.eq(ev_addr[:lb]), self.ev_addr_ok.eq(ev_addr[lb:] == 0), st_rd.addr.eq(line)]
        addr_ok = self.ev_addr_ok
        cur = Signal(2)
        for i in range(self.lines):                  # a mux per line, not a shift of the whole filter
            with m.If(line == i):
                m.d.comb += cur.eq(self.state[i])
        bip = self.ev_bip
        bip_tag = Signal(range(n))
        bip_count = Signal(range(pd + 1))
        bip_head = Signal(range(pd))
        for t in range(n):
            with m.If(self.t_valid[t] & ~self.t_drain[t] & (self.t_line[t] == line) & addr_ok):
                m.d.comb += [bip.eq(1), bip_tag.eq(t), bip_count.eq(self.p_count[t]), bip_head.eq(self.p_head[t])]
        free_any = Signal()
        free_tag = self.ev_free_tag
        for t in reversed(range(n)):
            with m.If(~self.t_valid[t]):
                m.d.comb += [free_any.eq(1), free_tag.eq(t)]

        # -- outputs of this event (loaded into the output registers when it fires) -------------
        o, ov = self.ev_out, self.ev_out_valid

        def error(kind_code, addr, tag):
            m.d.comb += [ov["error"].eq(1), o["error"].kind.eq(kind_code), o["error"].addr.eq(addr),
                         o["error"].tag.eq(tag)]

        def ndr(op, tag):
            m.d.comb += [ov["s2m_ndr"].eq(1), o["s2m_ndr"].opcode.eq(op), o["s2m_ndr"].tag.eq(tag),
                         o["s2m_ndr"].meta_field.eq(M.MF_NOOP), o["s2m_ndr"].meta_value.eq(0)]

        def drs(op, tag, value):
            m.d.comb += [ov["s2m_drs"].eq(1), o["s2m_drs"].opcode.eq(op), o["s2m_drs"].tag.eq(tag),
                         o["s2m_drs"].data.eq(value), o["s2m_drs"].meta_field.eq(M.MF_NOOP),
                         o["s2m_drs"].meta_value.eq(0)]

        def prsp(op, addr, state, value):
            m.d.comb += [ov["policy_rsp"].eq(1), o["policy_rsp"].op.eq(op), o["policy_rsp"].addr.eq(addr),
                         o["policy_rsp"].state.eq(state), o["policy_rsp"].data.eq(value)]

        # state changes the event asks for (applied only when it fires)
        set_state = self.ev_set_state
        new_state = self.ev_new_state
        do_write = self.ev_write
        park_push = Signal()
        conf_mark = Signal()
        wb_mark = Signal()
        complete = self.ev_complete
        alloc = self.ev_alloc
        report = Signal()

        def meta_ok(mf, mv):
            return (mf == M.MF_NOOP) | ((mf == M.MF_META0) & ((mv == M.MV_I) | (mv == M.MV_A) | (mv == M.MV_S)))

        def meta_state(mv):
            return Mux(mv == M.MV_I, M.HI, Mux(mv == M.MV_S, M.HS, M.HA))

        # request decode (also gives req_blocked, which gates acceptance)
        op = rq.opcode
        rq_known = Signal()
        rq_read = Signal()
        m.d.comb += [
            rq_read.eq((op == M.MEM_RD) | (op == M.MEM_RD_DATA)),
            rq_known.eq(rq_read | (op == M.MEM_INV) | (op == M.MEM_INV_NT) | (op == M.MEM_CLN_EVCT) |
                        (op == M.MEM_SPEC_RD)),
            req_blocked.eq(rq_known & addr_ok & (op != M.MEM_SPEC_RD) & meta_ok(rq.meta_field, rq.meta_value) &
                           bip & (bip_count == pd)),
        ]

        with m.Switch(kind):
            with m.Case(self.EV_DRAIN, self.EV_REQ):
                with m.If(~rq_known):
                    error(M.E_BAD_MSG, rq.addr, rq.tag)
                    ndr(M.CMP, rq.tag)
                with m.Elif(~addr_ok):
                    error(M.E_BAD_ADDR, rq.addr, rq.tag)
                    with m.If(rq_read):
                        drs(M.MEM_DATA_NXM, rq.tag, 0)
                    with m.If(op != M.MEM_SPEC_RD):
                        ndr(M.CMP, rq.tag)
                with m.Elif(op == M.MEM_SPEC_RD):
                    pass                             # a hint: no completion, nothing changes
                with m.Elif(~meta_ok(rq.meta_field, rq.meta_value)):
                    error(M.E_BAD_MSG, rq.addr, rq.tag)
                    ndr(M.CMP, rq.tag)
                with m.Elif(bip):
                    m.d.comb += park_push.eq(1)
                with m.Else():
                    noop = rq.meta_field == M.MF_NOOP
                    mv = rq.meta_value
                    grant = Mux(noop | (mv == M.MV_I), M.CMP, Mux(mv == M.MV_S, M.CMP_S, M.CMP_E))
                    with m.If(rq_read):
                        drs(M.MEM_DATA, rq.tag, st_rd.data)
                        ndr(grant, rq.tag)
                        with m.If(~noop & (mv != M.MV_I)):
                            m.d.comb += [set_state.eq(1), new_state.eq(meta_state(mv))]
                    with m.Elif(op == M.MEM_CLN_EVCT):
                        ndr(M.CMP, rq.tag)
                        # HI only on MetaValue I: S / A keep the filter covering the host's copy
                        with m.If(~noop):
                            m.d.comb += [set_state.eq(1), new_state.eq(meta_state(mv))]
                    with m.Else():                   # MemInv / MemInvNT
                        ndr(grant, rq.tag)
                        with m.If(~noop):
                            m.d.comb += [set_state.eq(1), new_state.eq(meta_state(mv))]

            with m.Case(self.EV_RWD):
                with m.If(rwd.opcode == M.BI_CONFLICT):
                    with m.If(bip):
                        m.d.comb += conf_mark.eq(1)
                    with m.Else():
                        error(M.E_CONFLICT_NONE, rwd.addr, rwd.tag)
                    ndr(M.BI_CONFLICT_ACK, rwd.tag)
                with m.Else():
                    with m.If((rwd.opcode != M.MEM_WR) & (rwd.opcode != M.MEM_WR_PTL)):
                        error(M.E_BAD_MSG, rwd.addr, rwd.tag)
                    with m.Elif(~addr_ok):
                        error(M.E_BAD_ADDR, rwd.addr, rwd.tag)
                    with m.Elif(~meta_ok(rwd.meta_field, rwd.meta_value)):
                        error(M.E_BAD_MSG, rwd.addr, rwd.tag)
                    with m.Else():
                        m.d.comb += do_write.eq(1)
                        with m.If(bip):
                            m.d.comb += wb_mark.eq(1)
                        with m.Elif(rwd.meta_field == M.MF_META0):
                            m.d.comb += [set_state.eq(1), new_state.eq(meta_state(rwd.meta_value))]
                    ndr(M.CMP, rwd.tag)

            with m.Case(self.EV_BIRSP):
                legal = Signal()
                m.d.comb += legal.eq((birsp.opcode == M.BIRSP_I) |
                                     ((birsp.opcode == M.BIRSP_S) & (rsp_op != M.BISNP_INV)) |
                                     ((birsp.opcode == M.BIRSP_E) & (rsp_op == M.BISNP_CUR)))
                rsp_state = Mux(birsp.opcode == M.BIRSP_I, M.HI, Mux(birsp.opcode == M.BIRSP_S, M.HS, M.HA))
                with m.If(~rsp_ok):
                    error(M.E_UNKNOWN_TAG, 0, birsp.bitag)
                with m.Elif(~legal):
                    error(M.E_ILLEGAL_RSP, rsp_line, birsp.bitag)
                with m.Else():
                    m.d.comb += [complete.eq(1), set_state.eq(1), new_state.eq(rsp_state)]
                    prsp(Mux(rsp_op == M.BISNP_INV, M.R_RELEASED, M.R_DONE), rsp_line, rsp_state, st_rd.data)

            with m.Case(self.EV_TIMEOUT):
                m.d.comb += report.eq(1)
                error(M.E_TIMEOUT, tmo_line, tmo_tag)

            with m.Case(self.EV_POLICY):
                with m.If(pol.op == 3):
                    error(M.E_BAD_MSG, pol.addr, 0)
                    prsp(M.R_REFUSED, pol.addr, M.HI, 0)
                with m.Elif(~addr_ok):
                    error(M.E_BAD_ADDR, pol.addr, 0)
                    prsp(M.R_REFUSED, pol.addr, M.HI, 0)
                with m.Elif(bip):
                    prsp(M.R_BUSY, pol.addr, cur, 0)
                with m.Elif((cur == M.HI) & (pol.op == M.P_EVICT)):
                    prsp(M.R_RELEASED, pol.addr, M.HI, st_rd.data)
                with m.Elif((cur == M.HI) | ((cur == M.HS) & (pol.op == M.P_DOWNGRADE))):
                    prsp(M.R_DONE, pol.addr, cur, st_rd.data)
                with m.Elif(~free_any):
                    prsp(M.R_BUSY, pol.addr, cur, 0)
                with m.Else():
                    m.d.comb += [alloc.eq(1), ov["s2m_bisnp"].eq(1), o["s2m_bisnp"].bitag.eq(free_tag),
                                 o["s2m_bisnp"].addr.eq(pol.addr), o["s2m_bisnp"].bi_id.eq(self.bi_id)]
                    with m.Switch(pol.op):
                        with m.Case(M.P_EVICT):
                            m.d.comb += o["s2m_bisnp"].opcode.eq(M.BISNP_INV)
                        with m.Case(M.P_DOWNGRADE):
                            m.d.comb += o["s2m_bisnp"].opcode.eq(M.BISNP_DATA)
                        with m.Case(M.P_PROBE):
                            m.d.comb += o["s2m_bisnp"].opcode.eq(M.BISNP_CUR)

        # -- output registers: a handshake empties one; a firing event loads all --------------
        for name, out in outs.items():
            with m.If(out.ready):
                m.d.sync += out.valid.eq(0)
            with m.If(fire):
                m.d.sync += [out.valid.eq(ov[name]), out.payload.eq(o[name])]

        # -- store writes: MemWr (all bytes) / MemWrPtl (byte enables) --------------------------
        m.d.comb += [st_wr.addr.eq(line), st_wr.data.eq(rwd.data)]
        with m.If(fire & do_write):
            m.d.comb += st_wr.en.eq(Mux(rwd.opcode == M.MEM_WR, (1 << dw // 8) - 1, rwd.be))

        # -- filter ---------------------------------------------------------------------------
        for i in range(self.lines):
            with m.If(fire & set_state & (line == i)):
                m.d.sync += self.state[i].eq(new_state)

        # -- time base: outstanding snoops age; expiry is reported by a later event ------------
        for t in range(n):
            with m.If(self.tick & self.t_valid[t] & ~self.t_drain[t] & ~self.t_expired[t] & (self.timeout != 0)):
                m.d.sync += self.t_age[t].eq(self.t_age[t] + 1)
                with m.If(self.t_age[t] + 1 >= self.timeout):
                    m.d.sync += self.t_expired[t].eq(1)

        # -- BITag entries and park FIFOs -----------------------------------------------------
        m.d.comb += [pk_wr.data.opcode.eq(req.opcode), pk_wr.data.snp_type.eq(req.snp_type),
                     pk_wr.data.meta_field.eq(req.meta_field), pk_wr.data.meta_value.eq(req.meta_value),
                     pk_wr.data.tag.eq(req.tag), pk_wr.addr.eq(bip_tag * pd + Mux(bip_head + bip_count >= pd,
                                                                          bip_head + bip_count - pd,
                                                                          bip_head + bip_count))]
        with m.If(fire & park_push):
            m.d.comb += pk_wr.en.eq(1)
        for t in range(n):
            with m.If(fire & park_push & (bip_tag == t)):
                m.d.sync += self.p_count[t].eq(self.p_count[t] + 1)
            with m.If(fire & conf_mark & (bip_tag == t)):
                m.d.sync += self.t_conf[t].eq(1)
            with m.If(fire & wb_mark & (bip_tag == t)):
                m.d.sync += self.t_wb[t].eq(1)
            with m.If(fire & report & (tmo_tag == t)):
                m.d.sync += self.t_reported[t].eq(1)
            with m.If(fire & complete & (rsp_tag == t)):
                with m.If(self.p_count[t] != 0):
                    m.d.sync += self.t_drain[t].eq(1)
                with m.Else():
                    m.d.sync += self.t_valid[t].eq(0)
            with m.If(fire & (kind == self.EV_DRAIN) & (drain_tag == t)):
                m.d.sync += [self.p_count[t].eq(self.p_count[t] - 1),
                             self.p_head[t].eq(Mux(self.p_head[t] == pd - 1, 0, self.p_head[t] + 1))]
                with m.If(self.p_count[t] == 1):
                    m.d.sync += [self.t_valid[t].eq(0), self.t_drain[t].eq(0)]
            with m.If(fire & alloc & (free_tag == t)):
                m.d.sync += [self.t_valid[t].eq(1), self.t_drain[t].eq(0), self.t_line[t].eq(line),
                             self.t_op[t].eq(o["s2m_bisnp"].opcode), self.t_wb[t].eq(0), self.t_conf[t].eq(0),
                             self.t_age[t].eq(0), self.t_expired[t].eq(0), self.t_reported[t].eq(0)]

        # -- error status, counters, interrupt ------------------------------------------------
        err_kind = o["error"].kind
        status_next = Signal(M.N_ERROR_KINDS)
        m.d.comb += status_next.eq(self.err_status & ~self.clear_status)
        m.d.sync += self.err_status.eq(status_next)
        for k in range(M.N_ERROR_KINDS):
            with m.If(fire & ov["error"] & (err_kind == k + 1)):
                m.d.sync += self.err_status[k].eq(1)
                with m.If(self.err_count[k] != (1 << M.COUNTER_BITS) - 1):
                    m.d.sync += self.err_count[k].eq(self.err_count[k] + 1)
        m.d.comb += [
            self.irq.eq(self.err_status.any()),
            self.idle.eq(~drain_any & ~tmo_any & ~_any([out.valid for out in outs.values()])),
        ]
        return m


def _all(values):
    """AND of single-bit values."""
    return Cat(*values).all()


def _any(values):
    """OR of single-bit values."""
    return Cat(*values).any()


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {
        "bisnoop": lambda: BISnoopEngine(lines=64, n_tags=8, park_depth=4, data_width=512),
        "bisnoop_small": lambda: BISnoopEngine(**M.SCENARIO_CONFIG),
    }
