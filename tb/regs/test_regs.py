"""cocotb tests of the register block through cocotbext-axi's AXI4-Lite master.

A bus monitor (started before reset is released) samples every handshake in the ReadOnly phase
and predicts in the order the block accepts transactions: an AW+W handshake applies the write to
the golden register-file model, an AR handshake reads it, and the B and R beats that follow are
compared, in that order, with those predictions (kind, address, read data, response), as are the
configuration outputs and ``irq`` in the cycle of every B handshake. The monitor also checks the
block's arbitration every cycle (docs/regs.md, hdl/regs.py): one transaction at a time (no
ready while one is in flight); when idle, AW and W are taken together and only together, a write
offered with both AW and W wins over a read in the same cycle, a read goes whenever no complete
write is offered and ``read_hold`` is low (``read_hold`` holds reads only, not writes). Read data
is compared raw: 0 with SLVERR, as documented.

Tests: reset values and range edges (``test_identity_and_edges``); random traffic
(``test_random_traffic``: bursts of reads and writes issued concurrently on the independent
AW/W/AR channels with gaps, B/R backpressure and ``read_hold`` pulses, hardware inputs and
sticky events changed between bursts, the external window answered by a testbench format table
and cold-list memory; coverage: a write winning over a read, a read taken while a write was half
offered, reads and writes queued on both sides, reads held); the 64-bit counter latch across a
carry; the documented response latencies; the host driver over AXI4-Lite; a negative test
(one corrupted response prediction and one corrupted ready prediction, each reported, exactly it).
Environment: CXLKV_REG_OPS (random transactions, default 4000), CXLKV_SEED.
"""
import random
from collections import Counter, deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from cxlkv.hdl.regs import _field_kind, port_name
from cxlkv.models import regmap
from cxlkv.models.regs import FormatTable, RegisterFile
from cxlkv.sw.driver import Device
from cxlkv.sw.transport import BusError
from cxlkv.tb.common import AxiLiteTransport, InOrderScoreboard, env_int, pause_axil, test_rng

N_QUEUES = 8
COLDLIST = regmap.MEMORIES[0]


class ExternalResponder:
    """Testbench side of the ``ext`` window: the format table and cold-list memory.

    Answers on the cycle after the strobe, as the port requires. The model side
    gets its own FormatTable; both must agree.
    """

    def __init__(self, dut, rng):
        self.dut, self.rng = dut, rng
        self.formats = [0] * N_QUEUES
        self.coldlist = [rng.getrandbits(64) for _ in range(COLDLIST.entries)]

    def read(self, name, word):
        if name == "FMT_DATA":
            q = int(self.dut.fmt_sel_queue.value)
            return (self.formats[q], True) if q < N_QUEUES else (0, False)
        if name == "COLDLIST":
            return (self.coldlist[word // 2] >> (32 * (word % 2))) & 0xFFFFFFFF, True
        return 0, False

    def write(self, name, data, strb):
        if name == "FMT_DATA":
            q = int(self.dut.fmt_sel_queue.value)
            if q < N_QUEUES:
                if strb & 1:
                    self.formats[q] = data & 3
                return True
        return False

    async def run(self):
        dut = self.dut
        pending = None
        while True:
            await RisingEdge(dut.clk)
            if pending is not None:                   # answer the strobe of the previous cycle
                kind, addr, data, strb = pending
                name, word = _ext_target(addr)
                if kind == "re":
                    value, ok = self.read(name, word)
                    dut.ext__rdata.value = value
                    dut.ext__err.value = int(not ok)
                else:
                    dut.ext__err.value = int(not self.write(name, data, strb))
                pending = None
            await ReadOnly()
            if int(dut.ext__re.value) or int(dut.ext__we.value):
                pending = ("re" if int(dut.ext__re.value) else "we", int(dut.ext__addr.value),
                           int(dut.ext__wdata.value), int(dut.ext__wstrb.value))


def _ext_target(addr):
    for r in regmap.REGISTERS:
        if r.external and r.offset == addr:
            return r.name, 0
    if COLDLIST.offset <= addr < COLDLIST.offset + COLDLIST.size:
        return COLDLIST.name, (addr - COLDLIST.offset) // 4
    return None, 0


class ModelExternal:
    """The model's view of the external window: a FormatTable plus the same cold-list contents."""

    def __init__(self, regs, coldlist):
        self.table = FormatTable(N_QUEUES, regs)
        self.coldlist = coldlist

    def read(self, name, word):
        if name == "COLDLIST":
            return (self.coldlist[word // 2] >> (32 * (word % 2))) & 0xFFFFFFFF, True
        return self.table.read(name, word)

    def write(self, name, data, strb):
        return self.table.write(name, data, strb)


INPUTS = [(r, f) for r in regmap.REGISTERS if not r.external for f in r.fields if _field_kind(r, f) == "input"]
STICKY = [(r, f) for r in regmap.REGISTERS if not r.external for f in r.fields if _field_kind(r, f) == "sticky"]
CONFIG = [(r, f) for r in regmap.REGISTERS if not r.external for f in r.fields if _field_kind(r, f) == "config"]


class RegsEnv:
    def __init__(self, dut, corrupt_at=None, corrupt_ready_at=None):
        self.dut = dut
        self.rng = test_rng()
        self.ext = ExternalResponder(dut, self.rng)
        self.model = RegisterFile(ModelExternal(None, self.ext.coldlist))
        self.model.external.table.regs = self.model
        self.sb = InOrderScoreboard("regs")                 # responses, config outputs, irq
        self.ready_sb = InOrderScoreboard("regs readies")   # AWREADY/WREADY/ARREADY, every cycle
        self.corrupt_at = corrupt_at                        # the n-th W/R prediction is corrupted
        self.corrupt_ready_at = corrupt_ready_at            # ... the n-th cycle with a valid up
        self.corrupted_ready_index = None                   # where that landed in ready_sb
        self.ops = 0
        self.pulses_seen = 0
        self.inflight = deque()                             # (kind, addr) accepted, response pending
        self.cover = Counter()                              # arbitration situations seen

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for r, f in INPUTS:
            getattr(dut, port_name(r, f)).value = 0
        for r, f in STICKY:
            getattr(dut, f"{port_name(r, f)}_set").value = 0
        dut.ext__rdata.value = 0
        dut.ext__err.value = 0
        dut.read_hold.value = 0
        dut.rst.value = 1
        self.master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk, dut.rst)
        cocotb.start_soon(self._bus_monitor())              # before reset is released
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        cocotb.start_soon(self.ext.run())

    async def set_input(self, r, f, value):
        getattr(self.dut, port_name(r, f)).value = value
        self.model.set_hw(r.name, f.name, value)
        await RisingEdge(self.dut.clk)

    async def pulse_sticky(self, r, f):
        sig = getattr(self.dut, f"{port_name(r, f)}_set")
        sig.value = 1
        await RisingEdge(self.dut.clk)
        sig.value = 0
        self.model.hw_set(r.name, f.name)
        await RisingEdge(self.dut.clk)

    def _expect(self, what):
        if self.ops == self.corrupt_at:
            what = (what[0], what[1], what[2] ^ 1, what[3])
        self.sb.expect(what)
        self.ops += 1

    async def _bus_monitor(self):
        """Every cycle, in the ReadOnly phase: the readies against the block's arbitration, then
        the handshakes: AW+W and AR go through the model in the order they are taken (the block
        serves one at a time, so that is also the order of its B and R beats), B and R are
        compared with those predictions."""
        dut = self.dut
        s = {n: getattr(dut, f"s_axil__{n}") for n in (
            "awvalid", "awready", "awaddr", "wvalid", "wready", "wdata", "wstrb", "bvalid", "bready", "bresp",
            "arvalid", "arready", "araddr", "rvalid", "rready", "rdata", "rresp")}
        flags = [(n, h) for n, h in s.items() if n.endswith(("valid", "ready"))]
        valids = 0
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.rst.value):
                continue
            v = {n: int(h.value) for n, h in flags}
            self.pulses_seen += int(dut.control_counters_clear.value)
            # the arbitration (docs/regs.md "Bus and access rules", hdl/regs.py IDLE): nothing is
            # taken while a transaction is in flight; when idle, a complete write (AW and W both
            # offered) goes first, both its channels in the same cycle; else a read unless held
            write = int(not self.inflight and v["awvalid"] and v["wvalid"])
            hold = int(not self.inflight and v["arvalid"] and dut.read_hold.value)
            read = int(not self.inflight and v["arvalid"] and not write and not hold)
            predicted = ("READY", write, write, read)
            if v["awvalid"] or v["wvalid"] or v["arvalid"]:
                if valids == self.corrupt_ready_at:
                    predicted = ("READY", write, write, read ^ 1)
                    self.corrupted_ready_index = self.ready_sb.compared
                valids += 1
            self.ready_sb.expect(predicted)
            self.ready_sb.actual(("READY", v["awready"], v["wready"], v["arready"]))
            if not self.inflight:
                self.cover["write over read"] += v["awvalid"] and v["wvalid"] and v["arvalid"]
                self.cover["read past half a write"] += (v["awvalid"] != v["wvalid"]) and v["arready"]
                self.cover["read held"] += v["arvalid"] and hold
            else:
                self.cover["both sides waiting"] += v["awvalid"] and v["arvalid"]
            if v["awvalid"] and v["awready"]:        # with W (checked above): the write is taken
                addr = int(s["awaddr"].value)
                resp = self.model.write(addr, int(s["wdata"].value), int(s["wstrb"].value))
                self._expect(("W", addr & ~3, 0, resp))
                self.inflight.append(("W", addr & ~3))
            if v["arvalid"] and v["arready"]:
                addr = int(s["araddr"].value)
                value, resp = self.model.read(addr)
                self._expect(("R", addr & ~3, value, resp))
                self.inflight.append(("R", addr & ~3))
            if v["bvalid"] and v["bready"]:
                _, addr = self.inflight.popleft() if self.inflight else (None, None)
                self.sb.actual(("W", addr, 0, int(s["bresp"].value)))
                self._compare_outputs()
            if v["rvalid"] and v["rready"]:
                _, addr = self.inflight.popleft() if self.inflight else (None, None)
                self.sb.actual(("R", addr, int(s["rdata"].value), int(s["rresp"].value)))

    def _compare_outputs(self):
        """Configuration outputs and irq, in the cycle of a B handshake: the write is applied."""
        for r, f in CONFIG:
            self.sb.expect(("CFG", r.name, f.name, self.model.get(r.name, f.name)))
            self.sb.actual(("CFG", r.name, f.name, int(getattr(self.dut, port_name(r, f)).value)))
        self.sb.expect(("IRQ", self.model.irq()))
        self.sb.actual(("IRQ", bool(int(self.dut.irq.value))))

    async def write(self, addr, data, strb=0xF):
        """One write through the master (the monitor predicts and compares it)."""
        data &= 0xFFFFFFFF
        nbytes = bin(strb).count("1")
        first = (strb & -strb).bit_length() - 1
        payload = (data >> (8 * first)).to_bytes(4, "little")[:nbytes]
        await self.master.write(addr + first, payload)

    async def read(self, addr):
        await self.master.read(addr, 4)

    def check(self):
        self.sb.check()
        self.ready_sb.check()
        assert not self.inflight, f"transactions never answered: {list(self.inflight)[:5]}"


def _random_addr(rng):
    r = rng.random()
    if r < 0.75:
        reg = rng.choice(regmap.REGISTERS)
        return reg.offset + 4 * rng.randrange(reg.words)
    if r < 0.85:
        return COLDLIST.offset + 4 * rng.randrange(COLDLIST.size // 4)
    return rng.randrange(0, 1 << 12) & ~3          # mostly unmapped


def _random_value(rng, addr):
    reg = next((x for x in regmap.REGISTERS if x.offset == addr), None)
    if reg is None or rng.random() < 0.3:
        return rng.getrandbits(32)
    value = 0
    for f in reg.fields:                              # mostly in range, sometimes just outside
        lo = f.range_min or 0
        hi = f.range_max if f.range_max is not None else (1 << f.width) - 1
        v = rng.choice((lo, hi, rng.randint(lo, hi), max(lo - 1, 0), min(hi + 1, (1 << f.width) - 1)))
        value |= v << f.lsb
    return value


@cocotb.test()
async def test_identity_and_edges(dut):
    """ID/VERSION, every register's reset value, range edges of every ranged field, unmapped space."""
    env = RegsEnv(dut)
    await env.start()
    for reg in regmap.REGISTERS:
        for w in range(reg.words):
            await env.read(reg.offset + 4 * w)
    for reg in regmap.REGISTERS:
        for f in reg.fields:
            if f.range_min is None and f.range_max is None:
                continue
            lo = f.range_min or 0
            hi = f.range_max if f.range_max is not None else (1 << f.width) - 1
            for v in {lo, hi, lo - 1, hi + 1}:
                if 0 <= v < (1 << f.width):
                    cur, _ = env.model.read(reg.offset)
                    await env.write(reg.offset, (cur & ~f.mask) | (v << f.lsb))
                    await env.read(reg.offset)
            await env.read(regmap.BY_NAME["STATUS"].offset)
            await env.read(regmap.BY_NAME["REJECT_ADDR"].offset)
            await env.write(regmap.BY_NAME["STATUS"].offset, 0x4)        # W1C cfg_reject
    for addr in (0x018, 0x0FC, 0x198, 0x3FC, 0x600, 0xFFC):
        await env.read(addr)
        await env.write(addr, 0xFFFFFFFF)
    await env.write(regmap.BY_NAME["ID"].offset, 0)                      # read-only: SLVERR
    await env.write(regmap.BY_NAME["READS"].offset, 0)                   # counter: SLVERR
    await env.write(COLDLIST.offset, 0)                                  # memory is read-only
    env.check()


async def _random_op(env, rng, delay):
    """One random read or write, offered after ``delay`` cycles (the master queues it on its own
    AW/W or AR channels: reads and writes of one burst overlap)."""
    for _ in range(delay):
        await RisingEdge(env.dut.clk)
    if rng.random() < 0.45:
        await env.read(_random_addr(rng))
        return
    addr = _random_addr(rng)
    if addr == regmap.BY_NAME["FMT_SEL"].offset and rng.random() < 0.7:
        value = rng.randrange(N_QUEUES + 2)                       # mostly valid queues
    else:
        value = _random_value(rng, addr)
    # every contiguous byte-enable pattern (cocotbext-axi's master writes an address and a length;
    # the empty and non-contiguous ones are in tests/test_regs_strobes.py)
    strb = 0xF if rng.random() < 0.8 else rng.choice((0x1, 0x2, 0x4, 0x8, 0x3, 0x6, 0xC, 0x7, 0xE))
    await env.write(addr, value, strb)


async def _hold_reads(dut, rng):
    """read_hold up now and then for a few cycles (reads wait, writes do not)."""
    while True:
        dut.read_hold.value = 0
        for _ in range(rng.randrange(4, 40)):
            await RisingEdge(dut.clk)
        dut.read_hold.value = 1
        for _ in range(rng.randrange(1, 6)):
            await RisingEdge(dut.clk)


@cocotb.test()
async def test_random_traffic(dut):
    """Random reads/writes/strobes over the whole map, issued concurrently in bursts, with hardware
    inputs and events changing between bursts."""
    env = RegsEnv(dut)
    rng = env.rng
    await env.start()
    pause_axil(env.master, rng)          # gaps on AW, W and AR, backpressure on B and R
    hold = cocotb.start_soon(_hold_reads(dut, random.Random(rng.getrandbits(32))))
    n = env_int("CXLKV_REG_OPS", 4000)
    done = 0
    while done < n:
        r = rng.random()
        if r < 0.08:
            reg, f = rng.choice(INPUTS)
            await env.set_input(reg, f, rng.getrandbits(f.width))
            done += 1
        elif r < 0.12:
            reg, f = rng.choice(STICKY)
            await env.pulse_sticky(reg, f)
            done += 1
        else:       # a burst: each op offered after its own delay, all in flight together. The
            # hardware side changes only between bursts, with the bus quiet: the block samples a
            # read's value two cycles after its AR (a change in between is timing, not the model's)
            k = rng.randint(1, 6)
            ops = [cocotb.start_soon(_random_op(env, random.Random(rng.getrandbits(32)), rng.randrange(4)))
                   for _ in range(k)]
            for op in ops:
                await op
            done += k
    hold.cancel()
    dut.read_hold.value = 0
    env.check()
    clears = [k for k in env.model.pulses if k == ("CONTROL", "counters_clear")]
    assert env.pulses_seen == len(clears), f"counters_clear pulses: RTL {env.pulses_seen}, model {len(clears)}"
    dut._log.info("register transactions checked: %d (%d comparisons); arbitration cycles: %s",
                  env.ops, env.sb.compared, dict(env.cover))
    if n >= 1000:
        missing = [c for c in ("write over read", "read past half a write", "both sides waiting", "read held")
                   if not env.cover[c]]
        assert not missing, f"arbitration situations never reached: {missing}"


@cocotb.test()
async def test_counters_latch_high_word(dut):
    """A 64-bit counter read LO then HI is consistent even when it carries between the two reads."""
    env = RegsEnv(dut)
    await env.start()
    reads = regmap.BY_NAME["READS"]
    f = reads.fields[0]
    await env.set_input(reads, f, 0x1_FFFF_FFFF)
    await env.read(reads.offset)                                           # latches HI = 1
    await env.set_input(reads, f, 0x2_0000_0000)
    await env.read(reads.offset + 4)                                       # still 1
    await env.read(reads.offset)
    await env.read(reads.offset + 4)                                       # now 2
    env.check()


async def _latency(dut, start, done, op):
    """Cycles from the ``start`` handshake (AR, or AW with W) to ``done`` (RVALID / BVALID) of ``op``."""
    t0 = None
    task = cocotb.start_soon(op)
    for cycle in range(100):
        await RisingEdge(dut.clk)
        await ReadOnly()
        if t0 is None and all(int(getattr(dut, f"s_axil__{s}").value) for s in start):
            t0 = cycle
        if t0 is not None and int(getattr(dut, f"s_axil__{done}").value):
            await task
            return cycle - t0
    raise AssertionError(f"no {done} within 100 cycles")


#: cycles from the address handshake to the response (docs/regs.md)
LATENCY = {"read": 4, "read_ext": 4, "write": 4, "write_ext": 4}


@cocotb.test()
async def test_response_latency(dut):
    """Read and write response latencies (local and external targets) are those documented."""
    env = RegsEnv(dut)
    await env.start()
    ar, aw = ("arvalid", "arready"), ("awvalid", "awready", "wvalid", "wready")
    scratch, fmt_data = regmap.BY_NAME["SCRATCH"].offset, regmap.BY_NAME["FMT_DATA"].offset
    got = {
        "read": await _latency(dut, ar, "rvalid", env.read(scratch)),
        "read_ext": await _latency(dut, ar, "rvalid", env.read(COLDLIST.offset)),
        "write": await _latency(dut, aw, "bvalid", env.write(scratch, 0x1234)),
        "write_ext": await _latency(dut, aw, "bvalid", env.write(fmt_data, 1)),
    }
    assert got == LATENCY, got
    env.check()


@cocotb.test()
async def test_driver_over_axil(dut):
    """The host driver (cxlkv.sw.driver) reads identity and counters over AXI4-Lite and reports refusals."""
    env = RegsEnv(dut)
    await env.start()
    geometry, reads = regmap.BY_NAME["GEOMETRY"], regmap.BY_NAME["READS"]
    await env.set_input(geometry, geometry.field("n_layers"), 4)
    await env.set_input(geometry, geometry.field("n_kv_heads"), 2)
    geometry2 = regmap.BY_NAME["GEOMETRY2"]
    # the driver refuses a geometry no controller has: no positions, no BI-snoop tag
    await env.set_input(geometry2, geometry2.field("entries_log2"), 10)
    await env.set_input(geometry2, geometry2.field("bitags"), 16)
    await env.set_input(reads, reads.fields[0], 123456789012)
    caps = regmap.BY_NAME["CAPS"]
    await env.set_input(caps, caps.field("tracker"), 1)              # the driver takes alpha and tau then
    dev = await Device.open(AxiLiteTransport(env.master))
    info = await dev.info()
    assert (info["n_layers"], info["n_kv_heads"], info["queues"]) == (4, 2, 8), info
    assert (await dev.counters())["reads"] == 123456789012
    assert "tracker" in info["caps"]
    await dev.configure(alpha=0x2000, tau=5000)
    assert int(dut.alpha_value.value) == 0x2000 and int(dut.tau_value.value) == 5000
    await dev.set_format(3, 2)
    assert await dev.get_format(3) == 2 and env.ext.formats[3] == 2
    from cxlkv.sw.driver import ConfigError
    try:
        await dev.configure(tau=0)
    except ConfigError:
        pass
    else:
        raise AssertionError("tau = 0 was not refused by the driver")
    try:                                                                   # bypass the driver's check:
        await dev.t.write32(regmap.BY_NAME["TAU"].offset, 0)               # the device itself refuses
    except BusError:
        pass
    else:
        raise AssertionError("the register block accepted tau = 0")
    assert (await dev.status())["cfg_reject"] == 1
    assert int(dut.tau_value.value) == 5000
    env.check()                             # every transaction of the driver against the model


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: one corrupted response prediction and one corrupted ready prediction (the
    arbitration's) must each be reported, exactly it."""
    env = RegsEnv(dut, corrupt_at=5, corrupt_ready_at=3)
    await env.start()
    for _ in range(10):
        await env.read(regmap.BY_NAME["SCRATCH"].offset)
    env.sb.assert_caught_one(index=5, log=dut._log)
    env.ready_sb.assert_caught_one(index=env.corrupted_ready_index, log=dut._log)
