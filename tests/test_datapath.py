"""The host line data path: the harness's LINES op, the transports' and the driver's ``lines``, and the
controller top with ``host_data=True`` (HDM decode -> tracker events and lookups -> the tier mover's
host line operations -> quantizer / dequantizer) in the Verilator harness against its golden model."""
import asyncio

import numpy as np
import pytest
from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.models import hdm as MH
from cxlkv.sw.transport import (ACCESS_DTYPE, LINE_RSP_DTYPE, RSP_BAD, RSP_RESIDENT, RSP_WRITE, EventPortError,
                                MmioTransport, ModelTransport, SimTransport, TransportError, access_records, int_line,
                                line_int)

# ------------------------------------------------------------------ the LINES op on a stand-in top

#: the stand-in's host_rsp layout: the contract's fields and order
RSP_LAYOUT = data.StructLayout({"tag": 16, "write": 1, "status": 2, "resident": 1, "bad": 1, "data": 512})
ECHO_GEOMETRY = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4}


class LineEcho(wiring.Component):
    """A small top with the controller's streams and the host data path's ports, so that the harness's
    LINES op is checked in seconds, without the controller: one access at a time; address bits [9:6]
    name one of 16 lines of a memory; [11:10] the status, [12] resident, [13] bad, [14] a decision
    (victim = the tag's low bits); [15] hangs the top. A write takes one ``host_wdata`` item (also when its status is an
    error; stored only when 0); a read answers the line rotated right by 8 bits (0 for an error status), so
    that a harness placing lanes or bytes wrongly both ways cannot pass."""

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
                     rs.bad.eq(addr[13]), rs.data.eq(Mux(write | (status != 0), 0, rd.data.rotate_right(8))),
                     dec.victim.eq(tag), dec.hit.eq(1)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.access.ready.eq(1)
                with m.If(self.access.valid):
                    p = self.access.payload
                    m.d.sync += [addr.eq(p.addr), write.eq(p.write), tag.eq(p.tag), rt_done.eq(0), rs_done.eq(0),
                                 dec_done.eq(~p.addr[14])]
                    with m.If(p.addr[15]):
                        m.next = "HANG"
                    with m.Elif(p.write):
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
            with m.State("HANG"):
                pass
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
            v = line_int(mem.get(idx, np.zeros(32, np.uint16)))
            line = int_line(v >> 8 | (v & 0xFF) << 504).copy()
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


def test_lines_op_reports_a_stalled_top(echo):
    """A top that stops answering: the harness gives up after its stall timeout and says how far it got."""
    rec, lines = _echo_items(np.random.default_rng(6), 6)
    rec["kind"], rec["addr"] = 0, np.arange(6, dtype=np.uint64) << 6
    rec["addr"][3] |= 1 << 15
    with pytest.raises(EventPortError, match="host data path stalled after 4 of 6 items"):
        asyncio.run(echo.lines(rec, lines))


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


# ------------------------------------------------------------------ the controller's host data path

from cxlkv.sw.driver import Device, DeviceError, SyncDevice  # noqa: E402

#: a small top: 2 x 2 queues x 64 positions, 4 DRAM frames per queue, 8 lines (quantizer records) per entry
GEO = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4}
HOST = {**GEO, "host_data": True}
HDM_GEOM = MH.HdmGeometry(2, 2, 64)
CFG = MH.HdmConfig.packed(HDM_GEOM, base=0x4000_0000)
LINES = CFG.lines_per_entry
FP16, FP8, INT8, INT4 = 0, 1, 2, 3
#: queue -> format for the mixed runs (queue = layer x 2 + head)
MIXED = {0: FP16, 1: FP8, 2: INT8, 3: INT4}
KINDS = ["sim", "model"]


def _transport(kind):
    return SimTransport(**HOST) if kind == "sim" else ModelTransport(**HOST)


def _device(t):
    dev = SyncDevice.__new__(SyncDevice)
    dev._loop = asyncio.new_event_loop()
    dev._dev = dev._loop.run_until_complete(Device.open(t))
    return dev


def random_lines(rng, n):
    """FP16 lines: Gaussian values at a per-line magnitude 2^U(-8, 8), 3 % of lines with an Inf or NaN lane."""
    mag = 2.0 ** rng.uniform(-8, 8, (n, 1))
    x = (rng.standard_normal((n, 32)) * mag).astype(np.float16).view(np.uint16).copy()
    for i in np.flatnonzero(rng.random(n) < 0.03):
        x[i, rng.integers(32)] = rng.choice([0x7C00, 0xFC00, 0x7E00, 0x7D01])
    return x


def traffic(rng, cfg=CFG, n_entries=20, n_ops=300, whole_entries=True):
    """Host traffic: whole entries written (line 0 first), then reads of random lines of written
    entries (line 0 now and then, with a sample hint; lines 1 ... 7 alone, whose entry may have been
    evicted since: lookups served from flash), reads of never-written entries, rewrites (whole
    entries; with ``whole_entries`` = False also single lines, line 0 too) and step advances.
    Returns (items, rows): the rows of reads and hints are random (ignored by the device)."""
    items, rows = [], []
    step = 1
    written = []

    def add(item, row=None):
        items.append(item)
        rows.append(random_lines(rng, 1)[0] if row is None else row)

    def access(key, line, write):
        add(("access", MH.Access(cfg.address(*key, line), write)))

    def write_entry(key):
        for line in range(LINES):
            access(key, line, 1)

    add(("hint", MH.Hint(step)))
    keys = [(int(k) // 32, int(k) // 16 % 2, int(k) % 16) for k in rng.choice(64, n_entries, replace=False)]
    for key in keys:
        if rng.random() < 0.3:
            step += 1
            add(("hint", MH.Hint(step)))
        write_entry(key)
        written.append(key)
    for _ in range(n_ops):
        r = rng.random()
        key = written[rng.integers(len(written))]
        if r < 0.4:
            line = int(rng.integers(LINES))
            if line == 0 and rng.random() < 0.5:
                add(("hint", MH.Hint(step, 1, *key, int(rng.integers(1 << 16)))))
            access(key, line, 0)
        elif r < 0.55:
            for line in rng.permutation(np.arange(1, LINES))[:int(rng.integers(1, LINES))]:
                access(key, int(line), 0)
        elif r < 0.62:
            access((int(rng.integers(2)), int(rng.integers(2)), int(rng.integers(40, 64))), int(rng.integers(LINES)), 0)
        elif r < 0.8:
            if whole_entries or rng.random() < 0.5:
                write_entry(key)
            else:
                access(key, int(rng.integers(LINES)), 1)
        else:
            step += int(rng.integers(1, 4))
            add(("hint", MH.Hint(step)))
    return items, np.array(rows, np.uint16)


def run_lines(t, items, rows, formats, budget=2, cfg=CFG, throttle=False, window=0):
    """Configure a fresh device (enable, budget, HDM window, formats), send the traffic through
    Device.lines, wait until it is idle; everything the host can see."""
    dev = _device(t)
    try:
        dev.configure(enable=1, queue_budget=budget, prefetch_window=window)
        dev.configure_hdm(cfg)
        for q, f in formats.items():
            dev.set_format(q, f)
        t.throttle = throttle
        dec, routes, rsp = dev.lines(access_records(items), rows)
        dev.settle()
        return {"decisions": dec, "routes": routes, "responses": rsp, "counters": dev.counters(),
                "status": dev.status(), "step": dev.read_fields("HDM_STEP")}
    finally:
        dev._loop.close()


def compare(got, exp) -> list[str]:
    """Every difference between two ``run_lines`` results (sim, model), described; [] when equal."""
    out = []
    for name, fields in (("decisions", ("victim", "flags")), ("routes", ("position", "queue", "flags", "line")),
                         ("responses", ("tag", "flags", "data"))):
        a, b = got[name], exp[name]
        if len(a) != len(b):
            out.append(f"{name}: {len(a)} records, expected {len(b)}")
            continue
        for i in range(len(a)):
            diff = [f for f in fields if not np.array_equal(a[i][f], b[i][f])]
            if diff:
                out.append(f"{name}[{i}]: {', '.join(f'{f} {a[i][f]} != {b[i][f]}' for f in diff)}")
    for name in ("counters", "status", "step"):
        for k in sorted(set(got[name]) | set(exp[name])):
            if got[name].get(k) != exp[name].get(k):
                out.append(f"{name}.{k}: {got[name].get(k)} != {exp[name].get(k)}")
    return out


def expected_fp16(items, rows):
    """The host's own reference for an all-fp16 device: every read returns the last line written to its
    address (0 for a line never written), every write 0; (tag, write, line) per access."""
    mem, out = {}, []
    for i, (item, row) in enumerate(zip(items, rows)):
        if item[0] != "access":
            continue
        a = item[1]
        if a.write:
            mem[a.addr] = row
            out.append((i, 1, np.zeros(32, np.uint16)))
        else:
            out.append((i, 0, mem.get(a.addr, np.zeros(32, np.uint16))))
    return out


@pytest.fixture()
def sim_host():
    t = SimTransport(**HOST)
    yield t
    asyncio.run(t.close())


@pytest.mark.parametrize("throttle,window", [(False, 0), (True, 0), (False, 2)])
def test_random_line_traffic_sim_equals_model(sim_host, throttle, window):
    """(a) Random line traffic in fp16/fp8/int8/int4 queues, QUEUE_BUDGET 2 so that entries are evicted
    and filled again from flash, lines 1 ... 7 read after their line 0 was evicted (served from flash),
    reads of never-written lines; with and without throttling, and with a prefetch window (prefetch
    fills carry data too): every decision, route, response (tag, flags, FP16 line), counter and status
    equal on the Verilated top and the model."""
    rng = np.random.default_rng(100 + 10 * throttle + window)
    items, rows = traffic(rng, n_entries=28, n_ops=900, whole_entries=False)
    got = run_lines(sim_host, items, rows, MIXED, throttle=throttle, window=window)
    exp = run_lines(ModelTransport(**HOST), items, rows, MIXED, window=window)
    problems = compare(got, exp)
    assert not problems, problems[:10]
    rsp, c = exp["responses"], exp["counters"]
    reads = ((rsp["flags"] & RSP_WRITE) == 0) & rsp["data"].any(axis=1)
    flash = reads & ((rsp["flags"] & RSP_RESIDENT) == 0)
    assert (flash & (exp["routes"]["line"] > 0)).sum() > 10         # lines 1 ... 7 of evicted entries, from flash
    assert (flash & (exp["routes"]["line"] == 0)).sum() > 0         # line 0 bypassed (no victim)
    assert (reads & ((rsp["flags"] & RSP_RESIDENT) != 0)).sum() > 10   # from DRAM
    assert c["evictions"] > 10 and c["tier_fills"] > 2 and c["tier_writebacks"] > 5 and c["tier_bypasses"] > 10
    assert c["tier_bad_commands"] == 0 and not (rsp["flags"] & RSP_BAD).any()
    assert c["quant_raw_lines"] > 0                         # Inf/NaN lines stored raw in fp8/int8/int4 queues
    if window:
        assert c["prefetches"] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_fp16_lines_read_back_bit_exact(kind):
    """(b) In fp16, every read returns exactly the bits last written to its address, from DRAM or from
    flash (both happen), 0 where nothing was written: the host's own bookkeeping, not the model."""
    rng = np.random.default_rng(7)
    items, rows = traffic(rng, n_entries=24, n_ops=250)
    t = _transport(kind)
    try:
        res = run_lines(t, items, rows, dict.fromkeys(range(4), FP16), throttle=kind == "sim")
    finally:
        asyncio.run(t.close())
    rsp = res["responses"]
    exp = expected_fp16(items, rows)
    assert len(rsp) == len(exp)
    wrong = [k for k, (r, (tag, write, line)) in enumerate(zip(rsp, exp))
             if (int(r["tag"]), int(r["flags"]) & RSP_WRITE) != (tag, write) or not np.array_equal(r["data"], line)]
    assert not wrong, wrong[:10]
    reads = (rsp["flags"] & RSP_WRITE) == 0
    flash = reads & ((rsp["flags"] & RSP_RESIDENT) == 0) & rsp["data"].any(axis=1)
    dram = reads & ((rsp["flags"] & RSP_RESIDENT) != 0) & rsp["data"].any(axis=1)
    assert flash.sum() > 10 and dram.sum() > 10 and res["counters"]["evictions"] > 10


def int8_bound_ok(written, got) -> bool:
    """docs/quant.md's int8 bound: |x' - x| <= 2^(k-1) <= amax/127 per value (k > -24; at k = -24 the
    bound is 2^-25), the line stored raw (bit-exact) when it holds an Inf or NaN."""
    x = written.view(np.float16).astype(np.float64)
    if not np.isfinite(x).all():
        return np.array_equal(written, got)
    y = got.view(np.float16).astype(np.float64)
    bound = max(np.abs(x).max() / 127, 2.0 ** -25)
    return bool(np.isfinite(y).all() and (np.abs(y - x) <= bound).all())


@pytest.mark.parametrize("kind", KINDS)
def test_int8_lines_within_the_documented_bound(kind):
    """(b) In int8 every read is within docs/quant.md's error bound of the line last written there
    (Inf/NaN lines bit-exact, stored raw); the check fails for a line read back from elsewhere."""
    rng = np.random.default_rng(8)
    items, rows = traffic(rng, n_entries=16, n_ops=150)
    t = _transport(kind)
    try:
        res = run_lines(t, items, rows, dict.fromkeys(range(4), INT8))
    finally:
        asyncio.run(t.close())
    rsp = res["responses"]
    exp = expected_fp16(items, rows)
    checked = 0
    for k, (r, (tag, write, line)) in enumerate(zip(rsp, exp)):
        assert int(r["tag"]) == tag, k
        if not write:
            assert int8_bound_ok(line, r["data"]), k
            checked += line.any()
    assert checked > 50
    # negative: a read's line is not within the bound of another written line
    k = next(k for k, (_, w, line) in enumerate(exp) if not w and line.any() and np.isfinite(line.view(np.float16)).all())
    other = next(line for _, w, line in exp if w == 0 and line.any() and not np.array_equal(line, exp[k][2]))
    assert not int8_bound_ok(other, rsp[k]["data"])


@pytest.mark.parametrize("kind", KINDS)
def test_errors_answer_status_and_consume_the_write_data(kind):
    """(c) Accesses outside the window (status 1) and beyond the geometry in use (status 2) are answered
    with data 0, and a write among them still takes its line from host_wdata: the next write's data is
    not shifted (every valid line reads back exactly, fp16)."""
    cfg = MH.HdmConfig.packed(MH.HdmGeometry(2, 2, 64), base=CFG.base, n_layers=1)    # 1 layer in use ...
    import dataclasses
    cfg = dataclasses.replace(cfg, size=CFG.size)                                    # ... of a 2-layer window
    rng = np.random.default_rng(9)
    lines = random_lines(rng, 64)
    items, rows, kinds = [("hint", MH.Hint(1))], [lines[0]], []
    outside, beyond = CFG.base + CFG.size + 64 * 5, cfg.address(1, 0, 3, 2)

    def add(addr, write, row, what):
        items.append(("access", MH.Access(addr, write)))
        rows.append(row)
        kinds.append(what)
    n = 1
    for key in ((0, 0, 3), (0, 1, 4), (0, 0, 9)):
        for line in range(LINES):
            add(cfg.address(*key, line), 1, lines[n], "ok")
            n += 1
            if line in (2, 5):
                add(outside, 1, lines[n], "outside")
                add(beyond, 1, lines[n + 1], "beyond")
                add(outside + 64, 0, lines[n + 2], "outside")
                add(beyond + 64, 0, lines[n + 2], "beyond")
                n += 3
    for key in ((0, 0, 3), (0, 1, 4), (0, 0, 9)):
        for line in range(LINES):
            add(cfg.address(*key, line), 0, lines[0], "ok")
    rows = np.array(rows, np.uint16)
    t = _transport(kind)
    try:
        res = run_lines(t, items, rows, dict.fromkeys(range(4), FP16), budget=2, cfg=cfg, throttle=kind == "sim")
    finally:
        asyncio.run(t.close())
    rsp = res["responses"]
    assert len(rsp) == len(kinds)
    status = (rsp["flags"] >> 1) & 3
    want = {"ok": 0, "outside": 1, "beyond": 2}
    assert [int(s) for s in status] == [want[k] for k in kinds]
    assert not rsp["data"][np.array(kinds) != "ok"].any()
    ok = [k for k, w in enumerate(kinds) if w == "ok"]
    exp = [e for e, w in zip(expected_fp16(items, rows), kinds) if w == "ok"]
    # the reference counts only the valid lines as memory: a shifted write would show in the reads
    mem, ref = {}, []
    for (tag, write, _), k in zip(exp, ok):
        addr = items[tag][1].addr
        if write:
            mem[addr] = rows[tag]
        ref.append(np.zeros(32, np.uint16) if write else mem[addr])
    assert all(np.array_equal(rsp[k]["data"], line) for k, line in zip(ok, ref))
    c = res["counters"]
    assert c["decode_errors"] == 24 and c["beyond_geometry"] == 12


def test_the_comparison_can_fail():
    """(d) Negative test: one corrupted model response (one lane of one read's line, or one flag) is
    reported by ``compare``, exactly it."""
    rng = np.random.default_rng(5)
    items, rows = traffic(rng, n_entries=8, n_ops=60)
    a = run_lines(ModelTransport(**HOST), items, rows, MIXED)
    b = run_lines(ModelTransport(**HOST), items, rows, MIXED)
    assert compare(a, b) == []
    k = int(np.flatnonzero(((b["responses"]["flags"] & RSP_WRITE) == 0) & b["responses"]["data"].any(axis=1))[3])
    b["responses"][k]["data"][17] ^= 0x0100
    assert compare(a, b) == [f"responses[{k}]: data {a['responses'][k]['data']} != {b['responses'][k]['data']}"]
    b["responses"][k]["data"][17] ^= 0x0100
    b["responses"][k + 1]["flags"] ^= RSP_RESIDENT
    assert len(compare(a, b)) == 1 and compare(a, b)[0].startswith(f"responses[{k + 1}]: flags")
    b["counters"]["tier_fills"] += 1
    assert len(compare(a, b)) == 2


def test_lines_need_the_data_path():
    """The driver needs CAPS.quant; the transport of a build without the data path refuses too."""
    rec = access_records([("access", MH.Access(CFG.address(0, 0, 1), 1))])
    row = np.zeros((1, 32), np.uint16)
    plain = _device(ModelTransport(**GEO))
    try:
        assert "quant" not in plain.info()["caps"]
        with pytest.raises(DeviceError, match="CAPS.quant = 0"):
            plain.lines(rec, row)
        with pytest.raises(EventPortError, match="no host data path"):
            plain._loop.run_until_complete(plain._dev.t.lines(rec, row))
    finally:
        plain._loop.close()


@pytest.mark.parametrize("kind", KINDS)
def test_lines_refusals(kind):
    """Disabled, the path stalls (a clear error, the same on sim and model); bad records and data are
    refused before anything is sent; then a write is answered (resident: its entry was inserted)."""
    rec = access_records([("access", MH.Access(CFG.address(0, 0, 1), 1))])
    row = np.zeros((1, 32), np.uint16)
    t = _transport(kind)
    dev = _device(t)
    try:
        assert "quant" in dev.info()["caps"]
        with pytest.raises(EventPortError, match="host data path stalled after 0 of 1 items"):     # CONTROL.enable = 0
            dev.lines(rec, row)
        dev.configure(enable=1, queue_budget=2)
        dev.configure_hdm(CFG)
        bad = rec.copy()
        bad["addr"] = 1 << 60                                                  # wider than the 52-bit HPA
        with pytest.raises(EventPortError, match="record 0 does not fit"):
            dev.lines(bad, row)
        with pytest.raises(EventPortError, match=r"shape \(1, 32\)"):
            dev.lines(rec, np.zeros((2, 32), np.uint16))
        dec, routes, rsp = dev.lines(rec, row)
        assert len(dec) == 1 and len(routes) == 1 and len(rsp) == 1 and rsp.dtype == np.dtype(LINE_RSP_DTYPE)
        assert int(rsp["flags"][0]) == RSP_WRITE | RSP_RESIDENT and not rsp["data"].any()
    finally:
        dev._loop.run_until_complete(t.close())
        dev._loop.close()


def test_replay_via_hdm_on_a_host_data_build(sim_host):
    """``accesses`` on a build with the data path sends zero lines with the writes (the top takes one per
    write): ``ctl replay --via hdm`` still equals `policy replay --policy hw` and the model, tier
    counters included."""
    from cxlkv.models import policy as P
    from cxlkv.models.trace import Trace
    rng = np.random.default_rng(12)
    n = 800
    steps = np.cumsum(rng.random(n) < 0.1).astype(np.int32)
    op = (rng.random(n) < 0.2).astype(np.uint8)
    trace = Trace(steps, rng.integers(0, 2, n).astype(np.uint16), rng.integers(0, 2, n).astype(np.uint16),
                  rng.integers(0, 24, n).astype(np.uint32), op, np.where(op == 0, rng.random(n) ** 3, 0).astype(np.float32),
                  2, 2).validate()
    outs = []
    for t in (sim_host, ModelTransport(**HOST)):
        dev = _device(t)
        try:
            outs.append(dev.replay(trace, 3, via="hdm"))
            outs[-1].pop("transport")
        finally:
            dev._loop.close()
    assert outs[0] == outs[1]
    exp = P.replay(trace, "hw", 3).summary()
    assert {k: outs[0][k] for k in ("reads", "read_hits", "writes", "evictions", "no_victim")} == \
        {k: exp[k] for k in ("reads", "read_hits", "writes", "evictions", "no_victim")}
    assert outs[0]["tier_bad_commands"] == 0 and outs[0]["evictions"] > 50
