"""The AXI4 metadata master alone (MetaAxiMaster) against a scripted AXI4 slave: addresses and
data of every beat against the model, the read-after-write hold while a B is withheld, the
pending-write limit, error responses (SLVERR/DECERR: zero data, counted) and protocol errors
(B or R with nothing outstanding: dropped, counted), with a negative test."""
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.models import metaaxi as M
from cxlkv.tb.common import InOrderScoreboard, params, test_rng

BASE = 0x10_0000


class Env:
    def __init__(self, dut):
        self.dut = dut
        p = params()
        self.aw = p["word_addr_width"]
        self.pending_limit = p["pending_writes"]
        self.rd_sb = InOrderScoreboard("read data")
        self.ar_log, self.aw_log, self.w_log = [], [], []
        self.rd_data = []

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.base.value = BASE
        for s in ("meta_rd__valid", "meta_wr__valid", "m_axi__awready", "m_axi__wready", "m_axi__bvalid",
                  "m_axi__arready", "m_axi__rvalid"):
            getattr(dut, s).value = 0
        dut.meta_rd_data__ready.value = 1
        dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        cocotb.start_soon(self._monitor())

    async def _monitor(self):
        """Handshakes sampled in the ReadOnly phase before the edge that completes them."""
        dut = self.dut
        while True:
            await ReadOnly()
            if int(dut.m_axi__arvalid.value) and int(dut.m_axi__arready.value):
                self.ar_log.append(int(dut.m_axi__araddr.value))
            if int(dut.m_axi__awvalid.value) and int(dut.m_axi__awready.value):
                self.aw_log.append(int(dut.m_axi__awaddr.value))
            if int(dut.m_axi__wvalid.value) and int(dut.m_axi__wready.value):
                assert int(dut.m_axi__wstrb.value) == 0xFF and int(dut.m_axi__wlast.value) == 1
                self.w_log.append(int(dut.m_axi__wdata.value))
            if int(dut.meta_rd_data__valid.value) and int(dut.meta_rd_data__ready.value):
                self.rd_sb.actual(int(dut.meta_rd_data__payload.value))
            await RisingEdge(dut.clk)

    async def tracker_write(self, word, data):
        dut = self.dut
        dut.meta_wr__valid.value = 1
        dut.meta_wr__payload.value = word | data << self.aw
        while True:
            await ReadOnly()
            took = int(dut.meta_wr__ready.value)
            await RisingEdge(dut.clk)
            if took:
                break
        dut.meta_wr__valid.value = 0

    async def tracker_read(self, word, *, max_cycles=50):
        """Offer a read; returns the cycles until it was taken (None if not within max_cycles)."""
        dut = self.dut
        dut.meta_rd__valid.value = 1
        dut.meta_rd__payload.value = word
        for n in range(max_cycles):
            await ReadOnly()
            took = int(dut.meta_rd__ready.value)
            await RisingEdge(dut.clk)
            if took:
                dut.meta_rd__valid.value = 0
                return n
        dut.meta_rd__valid.value = 0
        return None


async def _slave_accept(dut, valid, ready):
    """Take one beat of an AXI channel (ready for one handshake)."""
    while True:
        await ReadOnly()
        if int(getattr(dut, valid).value):
            break
        await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    getattr(dut, ready).value = 1
    await RisingEdge(dut.clk)
    getattr(dut, ready).value = 0


async def _beat(dut, prefix, **fields):
    """Send one B or R beat."""
    for k, v in fields.items():
        getattr(dut, f"m_axi__{prefix}{k}").value = v
    getattr(dut, f"m_axi__{prefix}valid").value = 1
    while True:
        await ReadOnly()
        took = int(getattr(dut, f"m_axi__{prefix}ready").value)
        await RisingEdge(dut.clk)
        if took:
            break
    getattr(dut, f"m_axi__{prefix}valid").value = 0


@cocotb.test()
async def test_read_after_pending_write_is_held(dut):
    """A write's B withheld: a read of the same word waits (raw_holds counts), another word's
    read goes out; after B the held read is issued. Addresses and data equal the model's."""
    env = Env(dut)
    await env.start()
    rng = test_rng()
    data = rng.getrandbits(64)
    cocotb.start_soon(_slave_accept(dut, "m_axi__awvalid", "m_axi__awready"))
    cocotb.start_soon(_slave_accept(dut, "m_axi__wvalid", "m_axi__wready"))
    await env.tracker_write(5, data)
    assert env.aw_log == [M.byte_address(BASE, 5)] and env.w_log == [data]
    dut.m_axi__arready.value = 1
    assert await env.tracker_read(5, max_cycles=20) is None        # held: B not yet seen
    assert int(dut.raw_holds.value) >= 19
    assert await env.tracker_read(6) == 0                           # another word goes straight out
    dut.m_axi__arready.value = 0
    await _beat(dut, "b", id=M.WRITE_ID, resp=M.RESP_OKAY)
    dut.m_axi__arready.value = 1
    assert await env.tracker_read(5) == 0                           # B seen: issued at once
    assert env.ar_log == [M.byte_address(BASE, 6), M.byte_address(BASE, 5)]
    env.rd_sb.expect(M.read_data(0x1234, M.RESP_OKAY))
    await _beat(dut, "r", id=M.READ_ID, data=0x1234, resp=M.RESP_OKAY, last=1)
    env.rd_sb.expect(M.read_data(data, M.RESP_OKAY))
    await _beat(dut, "r", id=M.READ_ID, data=data, resp=M.RESP_OKAY, last=1)
    env.rd_sb.check()
    for c in ("rd_errors", "wr_errors", "protocol_errors"):
        assert int(getattr(dut, c).value) == 0


@cocotb.test()
async def test_arvalid_stays_until_arready(dut):
    """AXI: ARVALID, once up, stays until ARREADY. A read waits for ARREADY; meanwhile a write of the
    same word is accepted (it is younger than the read): ARVALID must not drop, and the read goes
    out with its address unchanged. Checked every cycle."""
    env = Env(dut)
    await env.start()
    dut.m_axi__arready.value = 0
    dut.meta_rd__valid.value = 1
    dut.meta_rd__payload.value = 9
    await RisingEdge(dut.clk)
    cocotb.start_soon(_slave_accept(dut, "m_axi__awvalid", "m_axi__awready"))
    cocotb.start_soon(_slave_accept(dut, "m_axi__wvalid", "m_axi__wready"))
    cocotb.start_soon(env.tracker_write(9, 0x1234))
    for _ in range(12):                      # the write goes out (pending, no B): ARVALID stays up
        await ReadOnly()
        assert int(dut.m_axi__arvalid.value) == 1
        assert int(dut.m_axi__araddr.value) == M.byte_address(BASE, 9)
        await RisingEdge(dut.clk)
    assert env.aw_log == [M.byte_address(BASE, 9)]
    dut.m_axi__arready.value = 1
    await ReadOnly()
    assert int(dut.meta_rd__ready.value) == 1
    await RisingEdge(dut.clk)
    dut.meta_rd__valid.value = 0
    dut.m_axi__arready.value = 0
    assert env.ar_log == [M.byte_address(BASE, 9)] and int(dut.raw_holds.value) == 0


@cocotb.test()
async def test_pending_write_limit(dut):
    """With every B withheld, the master takes `pending_writes` writes and then stalls meta_wr."""
    env = Env(dut)
    await env.start()
    dut.m_axi__awready.value = 1
    dut.m_axi__wready.value = 1
    dut.meta_wr__valid.value = 1
    taken = 0
    for i in range(3 * env.pending_limit):
        dut.meta_wr__payload.value = i | (i * 3) << env.aw
        await ReadOnly()
        taken += int(dut.meta_wr__ready.value)
        await RisingEdge(dut.clk)
    dut.meta_wr__valid.value = 0
    assert taken == env.pending_limit
    assert env.aw_log == [M.byte_address(BASE, i) for i in range(env.pending_limit)]
    model = M.PendingWrites(env.pending_limit)
    for i in range(env.pending_limit):
        model.write(i)
    assert model.full() and not model.read_may_issue(0) and model.read_may_issue(env.pending_limit)


@cocotb.test()
async def test_error_and_protocol_responses(dut):
    """SLVERR read data arrives as 0 (rd_errors), DECERR B counts (wr_errors); a B and an R that
    nothing waits for, and an R beat without RLAST, are dropped and counted (protocol_errors)."""
    env = Env(dut)
    await env.start()
    await _beat(dut, "b", id=0, resp=M.RESP_OKAY)                   # nothing pending
    await _beat(dut, "r", id=0, data=7, resp=M.RESP_OKAY, last=1)   # nothing outstanding
    await ReadOnly()
    assert int(dut.protocol_errors.value) == 2
    await RisingEdge(dut.clk)
    dut.m_axi__arready.value = 1
    assert await env.tracker_read(9) == 0
    env.rd_sb.expect(M.read_data(0xDEAD, M.RESP_SLVERR))
    await _beat(dut, "r", id=0, data=0xDEAD, resp=M.RESP_SLVERR, last=1)
    cocotb.start_soon(_slave_accept(dut, "m_axi__awvalid", "m_axi__awready"))
    cocotb.start_soon(_slave_accept(dut, "m_axi__wvalid", "m_axi__wready"))
    await env.tracker_write(9, 1)
    await _beat(dut, "b", id=0, resp=M.RESP_DECERR)
    # an R beat without RLAST (the master issues single beats): dropped and counted, never delivered;
    # the read still outstanding takes the next beat, a proper one
    assert await env.tracker_read(10) == 0
    env.rd_sb.expect(M.read_data(0x77, M.RESP_OKAY))
    await _beat(dut, "r", id=0, data=0xBAD, resp=M.RESP_OKAY, last=0)
    await ReadOnly()
    assert int(dut.protocol_errors.value) == 3
    await RisingEdge(dut.clk)
    await _beat(dut, "r", id=0, data=0x77, resp=M.RESP_OKAY, last=1)
    await RisingEdge(dut.clk)
    env.rd_sb.check()
    assert int(dut.rd_errors.value) == 1 and int(dut.wr_errors.value) == 1
    assert int(dut.protocol_errors.value) == 3


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: a wrong expected read word is reported, exactly it."""
    env = Env(dut)
    await env.start()
    dut.m_axi__arready.value = 1
    for i, word in enumerate((1, 2, 3)):
        assert await env.tracker_read(word) == 0
        env.rd_sb.expect(M.read_data(100 + i, M.RESP_OKAY) ^ (1 if i == 1 else 0))
    for i in range(3):
        await _beat(dut, "r", id=0, data=100 + i, resp=M.RESP_OKAY, last=1)
    await RisingEdge(dut.clk)
    env.rd_sb.assert_caught_one(index=1, log=dut._log)
