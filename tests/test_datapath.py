"""The host line data path: the harness's LINES op, the transports' and the driver's ``lines``, and the
controller top with ``host_data=True`` (HDM decode -> tracker events and lookups -> the tier mover's
host line operations -> quantizer / dequantizer) in the Verilator harness against its golden model."""
import asyncio
import inspect

import numpy as np
import pytest
from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.models import hdm as MH
from cxlkv.sw.transport import (ACCESS_DTYPE, LINE_RSP_DTYPE, RSP_BAD, RSP_RESIDENT, RSP_WRITE, EventPortError,
                                MmioTransport, ModelTransport, SimTransport, TransportError, access_records)

# ------------------------------------------------------------------ the LINES op on a stand-in top

#: the stand-in's host_rsp layout: the contract's fields and order
RSP_LAYOUT = data.StructLayout({"tag": 16, "write": 1, "status": 2, "resident": 1, "bad": 1, "data": 512})
ECHO_GEOMETRY = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4}


class LineEcho(wiring.Component):
    """A small top with the controller's streams and the host data path's ports, so that the harness's
    LINES op is checked in seconds, without the controller: one access at a time; address bits [9:6]
    name one of 16 lines of a memory; [11:10] the status, [12] resident, [13] bad, [14] a decision
    (victim = the tag's low bits). A write takes one ``host_wdata`` item (also when its status is an
    error; stored only when 0); a read answers the line (0 for an error status)."""

    def __init__(self):
        from cxlkv.hdl.controller import Controller
        probe = Controller(**ECHO_GEOMETRY, tiers="none", prefetch=False)
        probe._MustUse__silence = True
        ports = {name: probe.signature.members[name] for name in ("s_axil", "irq", "event", "decision", "access",
                                                                   "hint", "route")}
        ports["host_wdata"] = In(stream.Signature(512))
        ports["host_rsp"] = Out(stream.Signature(RSP_LAYOUT))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=512, depth=16, init=[])
        rd, wr = mem.read_port(domain="comb"), mem.write_port()
        addr, write, tag = Signal(52), Signal(), Signal(16)
        idx, status = addr[6:10], addr[10:12]
        rt_done, rs_done, dec_done = Signal(), Signal(), Signal()
        m.d.comb += [self.event.ready.eq(1), self.hint.ready.eq(1), rd.addr.eq(idx), wr.addr.eq(idx),
                     wr.data.eq(self.host_wdata.payload)]
        rt, rs, dec = self.route.payload, self.host_rsp.payload, self.decision.payload
        m.d.comb += [rt.tag.eq(tag), rt.write.eq(write), rt.status.eq(status), rt.event.eq(addr[14]),
                     rt.position.eq(idx), rt.addr.eq(addr),
                     rs.tag.eq(tag), rs.write.eq(write), rs.status.eq(status), rs.resident.eq(addr[12]),
                     rs.bad.eq(addr[13]), rs.data.eq(Mux(write | (status != 0), 0, rd.data)),
                     dec.victim.eq(tag), dec.hit.eq(1)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.access.ready.eq(1)
                with m.If(self.access.valid):
                    p = self.access.payload
                    m.d.sync += [addr.eq(p.addr), write.eq(p.write), tag.eq(p.tag), rt_done.eq(0), rs_done.eq(0),
                                 dec_done.eq(~p.addr[14])]
                    with m.If(p.write):
                        m.next = "WDATA"
                    with m.Else():
                        m.next = "OUT"
            with m.State("WDATA"):
                m.d.comb += [self.host_wdata.ready.eq(1), wr.en.eq(self.host_wdata.valid & (status == 0))]
                with m.If(self.host_wdata.valid):
                    m.next = "OUT"
            with m.State("OUT"):
                m.d.comb += [self.route.valid.eq(~rt_done), self.host_rsp.valid.eq(~rs_done),
                             self.decision.valid.eq(~dec_done)]
                rt_now = rt_done | self.route.ready
                rs_now = rs_done | self.host_rsp.ready
                dec_now = dec_done | self.decision.ready
                m.d.sync += [rt_done.eq(rt_now), rs_done.eq(rs_now), dec_done.eq(dec_now)]
                with m.If(rt_now & rs_now & dec_now):
                    m.next = "IDLE"
        return m


def echo_expected(records, lines):
    """What LineEcho answers: (victims of the decisions, routes as (tag, write, status, event, position),
    responses as (tag, flags, line))."""
    mem = {}
    decs, routes, rsps = [], [], []
    for i, (r, row) in enumerate(zip(records.tolist(), lines)):
        if r[0] != 0:
            continue
        addr, write, tag = r[7] & ((1 << 52) - 1), r[1], i & 0xFFFF
        idx, status, ev = (addr >> 6) & 15, (addr >> 10) & 3, (addr >> 14) & 1
        line = np.zeros(32, np.uint16)
        if write and status == 0:
            mem[idx] = row.copy()
        elif not write and status == 0:
            line = mem.get(idx, np.zeros(32, np.uint16)).copy()
        if ev:
            decs.append(tag & 63)
        routes.append((write, status, ev, idx))
        rsps.append((tag, write | status << 1 | ((addr >> 12) & 1) << 3 | ((addr >> 13) & 1) << 4, line))
    return decs, routes, rsps


def _echo_items(rng, n):
    rec = np.zeros(n, ACCESS_DTYPE)
    rec["kind"] = (rng.random(n) < 0.15).astype(np.uint8)                       # some hints, ignored
    rec["flag"] = rng.random(n) < 0.5
    status = np.where(rng.random(n) < 0.8, 0, rng.integers(1, 4, n))
    rec["addr"] = (rng.integers(0, 16, n) << 6 | status << 10 | (rng.random(n) < 0.5) << 12 |
                   (rng.random(n) < 0.1) << 13 | (rng.random(n) < 0.3) << 14 | rng.integers(0, 64, n)).astype(np.uint64)
    rec["step"] = np.where(rec["kind"] == 1, 5, 0)
    rec["addr"][rec["kind"] == 1] = 0
    rec["flag"][rec["kind"] == 1] = 0
    lines = rng.integers(0, 1 << 16, (n, 32)).astype(np.uint16)
    return rec, lines


@pytest.fixture()
def echo():
    """A fresh stand-in (its memory empty) per test; the build is cached."""
    t = SimTransport(top=LineEcho(), top_name="lines_echo")
    yield t
    asyncio.run(t.close())


def _check_echo(t, rec, lines):
    dec, routes, rsp = asyncio.run(t.lines(rec, lines))
    exp_dec, exp_routes, exp_rsp = echo_expected(rec, lines)
    assert dec["victim"].tolist() == exp_dec
    assert [(int(f) >> 4 & 1, int(f) & 3, int(f) >> 2 & 1, int(p)) for f, p in
            zip(routes["flags"], routes["position"])] == exp_routes
    assert rsp.dtype == np.dtype(LINE_RSP_DTYPE) and len(rsp) == len(exp_rsp)
    for k, (got, (tag, flags, line)) in enumerate(zip(rsp, exp_rsp)):
        assert (int(got["tag"]), int(got["flags"])) == (tag, flags), k
        assert np.array_equal(got["data"], line), k
    return rsp


@pytest.mark.parametrize("throttle", [False, True])
def test_lines_op_on_a_stand_in_top(echo, throttle):
    """Every write's line reaches the top in order (each lane in its place), every response comes back
    with its tag, flags and line; with throttling too (gaps on items and data, backpressure on route,
    decision and host_rsp); batches bigger than one message carry the state across."""
    echo.throttle = throttle
    rng = np.random.default_rng(7 + throttle)
    rec, lines = _echo_items(rng, 600)
    rsp = _check_echo(echo, rec, lines)
    assert (rsp["flags"] & RSP_WRITE).sum() > 100 and np.count_nonzero(rsp["data"]) > 1000
    # the message boundary: 3 items per message; the memory holds across messages
    import cxlkv.sw.transport as T
    old = T.EVENTS_PER_MESSAGE
    T.EVENTS_PER_MESSAGE = 3
    try:
        rec2, lines2 = _echo_items(rng, 40)
        dec, routes, rsp2 = asyncio.run(echo.lines(rec2, lines2))
    finally:
        T.EVENTS_PER_MESSAGE = old
    exp = echo_expected(np.concatenate([rec, rec2]), np.concatenate([lines, lines2]))[2][-int((rec2["kind"] == 0).sum()):]
    # an access's tag is its index in its message (the same modulo 2^16 as the full size): flags and lines
    assert [int(f) for f in rsp2["flags"]] == [f for _, f, _ in exp]
    assert all(np.array_equal(g, e) for g, (_, _, e) in zip(rsp2["data"], exp))


def test_lines_op_comparison_can_fail(echo):
    """Negative test: the check reports a corrupted expectation (one lane of one read's line)."""
    echo.throttle = False
    rec, lines = _echo_items(np.random.default_rng(3), 200)
    dec, routes, rsp = asyncio.run(echo.lines(rec, lines))
    _, _, exp = echo_expected(rec, lines)
    k = next(i for i, (_, f, line) in enumerate(exp) if not f & RSP_WRITE and line.any())
    exp[k][2][5] ^= 1
    bad = [i for i, (g, (_, _, e)) in enumerate(zip(rsp["data"], exp)) if not np.array_equal(g, e)]
    assert bad == [k]


def test_lines_op_refuses_bad_input(echo):
    rec, lines = _echo_items(np.random.default_rng(4), 20)
    bad = rec.copy()
    bad["kind"][7] = 2
    with pytest.raises(EventPortError, match="record 7 does not fit"):
        asyncio.run(echo.lines(bad, lines))
    with pytest.raises(EventPortError, match=r"shape \(20, 32\)"):
        asyncio.run(echo.lines(rec, lines[:19]))
    with pytest.raises(EventPortError, match="FP16 bit patterns"):
        asyncio.run(echo.lines(rec, lines.astype(np.float32)))
    for v in (-1, 1 << 16):
        wide = lines.astype(np.int32)
        wide[3, 4] = v
        with pytest.raises(EventPortError, match="outside 0 .. 65535"):
            asyncio.run(echo.lines(rec, wide))
    _check_echo(echo, rec, lines)                       # the harness still answers after the refusals


def test_generated_cpp_of_tops_without_the_data_path_is_unchanged():
    """LINES is only generated for tops with host_wdata/host_rsp: the others' C++ (and so their cached
    builds) does not mention it; the stand-in's does, with the wide payloads copied word by word."""
    from cxlkv.hdl.controller import Controller
    from cxlkv.tb.vharness import event_ports, hdm_ports, host_ports, render_cpp, stall_timeout
    top = Controller(**ECHO_GEOMETRY)
    top._MustUse__silence = True
    assert host_ports(top) is None
    plain = render_cpp("controller", events=event_ports(top), stall_cycles=stall_timeout(top), hdm=hdm_ports(top))
    assert "run_lines" not in plain and "host_wdata" not in plain
    echo = LineEcho()
    echo._MustUse__silence = True
    (wd_w, wd_off), rsp = host_ports(echo)
    assert (wd_w, wd_off) == (512, 0) and rsp["data"] == (21, 512)
    cpp = render_cpp("lines_echo", events=event_ports(echo), hdm=hdm_ports(echo), lines=host_ports(echo))
    assert "for (int k = 0; k < 16; k++) top->host_wdata___05Fpayload[k] = w[k];" in cpp
    assert "for (int k = 0; k < 17; k++) w[k] = top->host_rsp___05Fpayload[k];" in cpp
    assert "@" not in cpp.replace("@param", "")


def test_lines_not_supported_elsewhere(tmp_path):
    path = tmp_path / "bar"
    path.write_bytes(bytes(4096))
    t = MmioTransport(str(path))
    with pytest.raises(TransportError, match="not supported over the mmio transport"):
        asyncio.run(t.lines(np.zeros(1, ACCESS_DTYPE), np.zeros((1, 32), np.uint16)))
    asyncio.run(t.close())
    with pytest.raises(TypeError, match="Amaranth component"):
        SimTransport(top="controller")
