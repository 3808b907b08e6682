"""The simulation harness's register bus (tb/vharness.py): its throttle, and its checks of the
register slave's AXI4-Lite handshakes, against a small stand-in slave that breaks them on request.

The controller's own register block is run through the throttled bus in tests/test_controller.py
(test_sim_equals_model_on_random_register_traffic[bus_throttle])."""
import asyncio

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from cxlkv.hdl.regs import AXI4LiteSignature
from cxlkv.sw.transport import SimTransport, TransportError

#: the stand-in's fault register (address 0x4): what it breaks from the next access on
FAULTS = {"b_early": 1, "b_drop": 2, "r_early": 3, "r_drop": 4, "r_change": 5, "r_stray": 6}


class AxiLiteStandIn(wiring.Component):
    """One 32-bit register at 0x0 behind an AXI4-Lite slave that keeps the handshake rules, and at 0x4
    a fault register that makes it break one of them: B in the cycle AW and W are taken (b_early), B
    for one cycle whether taken or not (b_drop), R in the cycle AR is taken (r_early), R for one cycle
    (r_drop), RDATA counting up once R has waited a cycle (r_change), RVALID while a write is offered
    (r_stray)."""

    def __init__(self):
        super().__init__({"s_axil": In(AXI4LiteSignature())})

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        data, fault, count, waited = Signal(32), Signal(3), Signal(32), Signal()
        aw_addr, aw_done, w_data, w_done = Signal(12), Signal(), Signal(32), Signal()
        bvalid, rvalid, rdata = Signal(), Signal(), Signal(32)
        m.d.sync += [count.eq(count + 1), waited.eq(rvalid & ~bus.rready)]
        m.d.comb += [bus.awready.eq(~aw_done & ~bvalid), bus.wready.eq(~w_done & ~bvalid),
                     bus.arready.eq(~rvalid), bus.bresp.eq(0), bus.rresp.eq(0),
                     bus.bvalid.eq(bvalid), bus.rvalid.eq(rvalid), bus.rdata.eq(rdata)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_done.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_done.eq(1), w_data.eq(bus.wdata)]
        with m.If(aw_done & w_done & ~bvalid):
            m.d.sync += [bvalid.eq(1), aw_done.eq(0), w_done.eq(0)]
            with m.If(aw_addr == 0):
                m.d.sync += data.eq(w_data)
            with m.Elif(aw_addr == 4):
                m.d.sync += fault.eq(w_data)
        with m.If(bvalid & (bus.bready | (fault == FAULTS["b_drop"]))):
            m.d.sync += bvalid.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [rvalid.eq(1), rdata.eq(data)]
        with m.If(rvalid & (bus.rready | (fault == FAULTS["r_drop"]))):
            m.d.sync += rvalid.eq(0)
        with m.If(fault == FAULTS["b_early"]):
            m.d.comb += bus.bvalid.eq(bvalid | (bus.awvalid & bus.wvalid))
        with m.If(fault == FAULTS["r_early"]):
            m.d.comb += bus.rvalid.eq(rvalid | bus.arvalid)
        with m.If(fault == FAULTS["r_stray"]):
            m.d.comb += bus.rvalid.eq(rvalid | bus.awvalid)
        with m.If(fault == FAULTS["r_change"]):
            m.d.comb += bus.rdata.eq(rdata + (count & waited.replicate(32)))
        return m


@pytest.fixture()
def standin():
    t = SimTransport(top=AxiLiteStandIn(), top_name="axil_standin")
    yield t
    asyncio.run(t.close())


def _accesses(t, n, value=0x1234_5678):
    async def go():
        for i in range(n):
            await t.write32(0, value + i)
            assert await t.read32(0) == value + i
    asyncio.run(go())


def test_throttled_bus_takes_longer_and_answers_the_same(standin):
    c0 = standin.cycles
    _accesses(standin, 50)
    plain = standin.cycles - c0
    standin.bus_throttle = True
    assert standin.bus_throttle
    c0 = standin.cycles
    _accesses(standin, 50)
    assert standin.cycles - c0 > plain * 3 // 2, (standin.cycles - c0, plain)   # the throttle stalled it


@pytest.mark.parametrize("fault, seen_unthrottled", [("b_early", True), ("b_drop", False), ("r_early", True),
                                                     ("r_drop", False), ("r_change", False), ("r_stray", True)])
@pytest.mark.parametrize("throttle", [False, True])
def test_handshake_violations_are_reported(standin, fault, seen_unthrottled, throttle):
    """Each broken rule fails the access with its name. A response that does not wait for its ready
    is seen only on the throttled bus: the plain bus takes every response at once."""
    asyncio.run(standin.write32(4, FAULTS[fault]))
    standin.bus_throttle = throttle
    expected = {"b_early": "BVALID without a write whose AW and W", "b_drop": "BVALID dropped",
                "r_early": "RVALID without a read whose AR", "r_drop": "RVALID dropped",
                "r_change": "RDATA/RRESP changed", "r_stray": "RVALID during a write"}[fault]
    if not (throttle or seen_unthrottled):
        _accesses(standin, 50)
        return
    with pytest.raises(TransportError, match="broke the AXI4-Lite handshake") as exc:
        _accesses(standin, 50)
    assert expected in str(exc.value)
