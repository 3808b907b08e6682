"""cocotb tests of the register block through cocotbext-axi's AXI4-Lite master.

Every transaction's response and read data are compared with the golden
register-file model, as are the configuration outputs after every write;
hardware inputs, sticky events and the external window are driven at random.
Environment: CXLKV_REG_OPS (random transactions, default 4000), CXLKV_SEED.
"""
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from cxlkv.hdl.regs import _field_kind, port_name
from cxlkv.models import regmap
from cxlkv.models.regs import FormatTable, RegisterFile
from cxlkv.sw.driver import Device
from cxlkv.sw.transport import BusError
from cxlkv.tb.common import AxiLiteTransport, InOrderScoreboard, env_int, test_rng

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
    def __init__(self, dut, corrupt_at=None):
        self.dut = dut
        self.rng = test_rng()
        self.ext = ExternalResponder(dut, self.rng)
        self.model = RegisterFile(ModelExternal(None, self.ext.coldlist))
        self.model.external.table.regs = self.model
        self.sb = InOrderScoreboard("regs")
        self.corrupt_at = corrupt_at
        self.ops = 0
        self.pulses_seen = 0

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for r, f in INPUTS:
            getattr(dut, port_name(r, f)).value = 0
        for r, f in STICKY:
            getattr(dut, f"{port_name(r, f)}_set").value = 0
        dut.ext__rdata.value = 0
        dut.ext__err.value = 0
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        self.master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk, dut.rst)
        cocotb.start_soon(self.ext.run())
        cocotb.start_soon(self._count_pulses())

    async def _count_pulses(self):
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            self.pulses_seen += int(self.dut.control_counters_clear.value)

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

    async def write(self, addr, data, strb=0xF):
        data &= 0xFFFFFFFF
        nbytes = bin(strb).count("1")
        first = (strb & -strb).bit_length() - 1
        payload = (data >> (8 * first)).to_bytes(4, "little")[:nbytes]
        resp = self.model.write(addr, data, strb)
        self._expect(("W", addr, 0, resp))
        w = await self.master.write(addr + first, payload)
        self.sb.actual(("W", addr, 0, int(w.resp)))
        await self.check_outputs()

    async def read(self, addr):
        value, resp = self.model.read(addr)
        self._expect(("R", addr, value, resp))
        r = await self.master.read(addr, 4)
        self.sb.actual(("R", addr, int.from_bytes(r.data, "little") if r.resp == AxiResp.OKAY else 0, int(r.resp)))

    async def check_outputs(self):
        await RisingEdge(self.dut.clk)
        await ReadOnly()
        for r, f in CONFIG:
            got = int(getattr(self.dut, port_name(r, f)).value)
            self.sb.expect(("CFG", r.name, f.name, self.model.get(r.name, f.name)))
            self.sb.actual(("CFG", r.name, f.name, got))
        self.sb.expect(("IRQ", self.model.irq()))
        self.sb.actual(("IRQ", bool(int(self.dut.irq.value))))
        await RisingEdge(self.dut.clk)


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
    env.sb.check()


@cocotb.test()
async def test_random_traffic(dut):
    """Random reads/writes/strobes over the whole map, with hardware inputs and events changing."""
    env = RegsEnv(dut)
    rng = env.rng
    await env.start()
    # gaps on the master's AW, W and AR valids, backpressure on its B and R readies (cocotbext-axi's
    # pause generators: True pauses the channel for a clock); their own random stream, from the seed
    pause_rng = random.Random(rng.getrandbits(32))

    def pauses(p):
        while True:
            yield pause_rng.random() < p
    m = env.master
    for ch in (m.write_if.aw_channel, m.write_if.w_channel, m.read_if.ar_channel):
        ch.set_pause_generator(pauses(0.2))
    for ch in (m.write_if.b_channel, m.read_if.r_channel):
        ch.set_pause_generator(pauses(0.4))
    n = env_int("CXLKV_REG_OPS", 4000)
    for i in range(n):
        r = rng.random()
        if r < 0.08:
            reg, f = rng.choice(INPUTS)
            await env.set_input(reg, f, rng.getrandbits(f.width))
        elif r < 0.12:
            reg, f = rng.choice(STICKY)
            await env.pulse_sticky(reg, f)
        elif r < 0.55:
            await env.read(_random_addr(rng))
        else:
            addr = _random_addr(rng)
            if addr == regmap.BY_NAME["FMT_SEL"].offset and rng.random() < 0.7:
                value = rng.randrange(N_QUEUES + 2)                       # mostly valid queues
            else:
                value = _random_value(rng, addr)
            strb = 0xF if rng.random() < 0.8 else rng.choice((0x1, 0x2, 0x4, 0x8, 0x3, 0xC))
            await env.write(addr, value, strb)
    env.sb.check()
    clears = [k for k in env.model.pulses if k == ("CONTROL", "counters_clear")]
    assert env.pulses_seen == len(clears), f"counters_clear pulses: RTL {env.pulses_seen}, model {len(clears)}"
    dut._log.info("register transactions checked: %d (%d comparisons)", env.ops, env.sb.compared)


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
    env.sb.check()


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
    env.sb.check()


@cocotb.test()
async def test_driver_over_axil(dut):
    """The host driver (cxlkv.sw.driver) reads identity and counters over AXI4-Lite and reports refusals."""
    env = RegsEnv(dut)
    await env.start()
    env.dut.geometry_n_layers.value = 4
    env.dut.geometry_n_kv_heads.value = 2
    env.dut.reads_count.value = 123456789012
    await RisingEdge(dut.clk)
    dev = await Device.open(AxiLiteTransport(env.master))
    info = await dev.info()
    assert (info["n_layers"], info["n_kv_heads"], info["queues"]) == (4, 2, 8), info
    assert (await dev.counters())["reads"] == 123456789012
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


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: one corrupted model prediction must be reported."""
    env = RegsEnv(dut, corrupt_at=5)
    await env.start()
    for _ in range(10):
        await env.read(regmap.BY_NAME["SCRATCH"].offset)
    env.sb.assert_caught_one(index=5, log=dut._log)
