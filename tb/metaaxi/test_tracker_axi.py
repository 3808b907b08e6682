"""The tracker behind its AXI4 metadata master (TrackerAxi4) on cocotbext-axi's AxiRam, with
random pauses on all five channels: decisions equal the golden model and policy.replay event
for event; an independent AXI monitor checks every beat's address and that no read of a word
is issued while a write to it awaits its B response."""
import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiRam

from cxlkv.models import metaaxi as M
from cxlkv.models import policy as P
from cxlkv.models import tracegen
from cxlkv.models import tracker as T
from cxlkv.tb.common import drive_ready, drive_stream, report_metric, test_rng
from cxlkv.tb.tracker.test_tracker import TrackerEnv, trace_events

BASE = 0x4_0000


def _pauses(rng, p):
    while True:
        yield rng.random() < p


class AxiTrackerEnv(TrackerEnv):
    """TrackerEnv with the metadata in an AxiRam behind the DUT's m_axi port."""

    def attach_memory(self, rng, *, pause=0.0):
        dut, g = self.dut, self.geom
        dut.base.value = BASE
        self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi", bus_separator="__"), dut.clk, dut.rst,
                          size=BASE + 8 * g.n_queues * g.n_positions)
        if pause:
            for ch in (self.ram.write_if.aw_channel, self.ram.write_if.w_channel, self.ram.write_if.b_channel,
                       self.ram.read_if.ar_channel, self.ram.read_if.r_channel):
                ch.set_pause_generator(_pauses(rng, pause))
        self.ar = self.aw = self.raw_violations = 0
        return [self._axi_monitor()]

    async def _axi_monitor(self):
        dut, g = self.dut, self.geom
        pending: list[int] = []              # byte addresses of writes whose B has not been seen
        aw_q: list[int] = []
        limit = BASE + 8 * g.n_queues * g.n_positions
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.m_axi__arvalid.value) and int(dut.m_axi__arready.value):
                a = int(dut.m_axi__araddr.value)
                assert BASE <= a < limit and a % 8 == 0, f"AR address {a:#x} outside the region"
                assert int(dut.m_axi__arlen.value) == 0 and int(dut.m_axi__arsize.value) == 3
                self.raw_violations += a in pending
                self.ar += 1
            if int(dut.m_axi__awvalid.value) and int(dut.m_axi__awready.value):
                a = int(dut.m_axi__awaddr.value)
                assert BASE <= a < limit and a % 8 == 0, f"AW address {a:#x} outside the region"
                aw_q.append(a)
                pending.append(a)
                self.aw += 1
            if int(dut.m_axi__bvalid.value) and int(dut.m_axi__bready.value):
                pending.remove(aw_q.pop(0))


@cocotb.test()
async def test_trace_over_axi(dut):
    """The mixed 2 x 2 trace (11,744 events), C = 4, 30 % pauses on every AXI channel and
    decision backpressure: every decision equals the model's and policy.replay's."""
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=1)
    prm = P.make_params("hw")
    ref = P.replay(trace, "hw", 4, params=prm, record_victims=True)
    env = AxiTrackerEnv(dut, T.TrackerConfig.from_params(prm, 4))
    rng = test_rng()
    await env.start(pause=0.3)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng, ready_prob=0.8, burst=3))
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, trace_events(trace), rng, idle=0.02)
    await env.drain(timeout=200_000)
    env.check()
    assert env.codes == ref.victims.tolist(), "DUT victims differ from policy.replay's hw"
    assert env.raw_violations == 0, f"{env.raw_violations} reads issued while a write to the word was pending"
    for name in ("rd_errors", "wr_errors", "protocol_errors"):
        assert int(getattr(dut, name).value) == 0, name
    # every event with a metadata word writes it; reads are the events not forwarded
    assert env.aw == len(trace) and 0 < env.ar <= len(trace)
    # the RAM holds the model's metadata words
    for (q, p), (ema, t_last, slot) in env.model.meta.items():
        word = env.ram.read_qword(BASE + 8 * ((q << env.geom.pb) | p))
        assert word == ema | t_last << 16 | slot << 48, f"metadata of queue {q} position {p}"
    dut._log.info("AXI: %d AR, %d AW, %d cycles a read waited for a B", env.ar, env.aw,
                  int(dut.raw_holds.value))


@cocotb.test()
async def test_full_rate_over_axi(dut):
    """No pauses: the AXI master keeps the tracker at one event per clock."""
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=16, seed=2)
    env = AxiTrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 4))
    rng = test_rng()
    await env.start()
    env.dec_port.ready.value = 1
    events = trace_events(trace)
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, events, rng)
    await env.drain()
    env.check()
    rate = len(events) / (env.last_accept - env.first_accept + 1)
    dut._log.info("over AXI (AxiRam, no pauses): %d events, %.4f events/cycle", len(events), rate)
    assert env.raw_violations == 0
    report_metric("metaaxi.tracker_events_per_cycle", round(rate, 6), "events/cycle",
                  {"design": "TrackerAxi4(3, 2, 128, 128)", "slave": "cocotbext-axi AxiRam, no pauses",
                   "trace": "mixed 2x2, prefill 32, 16 steps", "events": len(events), "budget": 4})


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: one flipped bit in the model's 100th prediction is reported, exactly it."""
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=8, seed=3)
    env = AxiTrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 4), corrupt_at=100)
    rng = test_rng()
    await env.start(pause=0.2)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng))
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, trace_events(trace)[:300], rng)
    await env.drain()
    env.sb.assert_caught_one(index=100, log=dut._log)
    assert M.byte_address(BASE, 3) == BASE + 24
