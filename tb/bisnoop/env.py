"""cocotb environment of the BI-snoop engine: drivers, monitor, model-fed scoreboards, scenario replay.

* One driver per input channel offers the head of its queue; the monitor (ReadOnly
  phase) records every handshake, pops accepted inputs, feeds them to the golden
  model in acceptance order (the engine takes at most one input per clock) and
  queues the model's messages in one :class:`InOrderScoreboard` per output channel.
* :meth:`BISnoopEnv.replay` runs a contract scenario: each input is offered and the
  device is left to go quiet before the next; a request the device cannot accept
  (park queue full) stays offered on its channel, exactly as :func:`run_model` does.
"""
from __future__ import annotations

import os
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.hdl.bisnoop import CHANNELS
from cxlkv.models import bisnoop as M
from cxlkv.tb.common import InOrderScoreboard, Packer, StreamPort, params


class BISnoopEnv:
    def __init__(self, dut, rng, corrupt_at=None, corrupt_each_from=None, corrupt_on=None):
        self.dut, self.rng = dut, rng
        self.cfg = {**M.SCENARIO_CONFIG, **params()}
        self.dw = self.cfg["data_width"]
        self.ports = {name: StreamPort(dut, name) for name in CHANNELS}
        self.packers = {name: Packer(lay(self.dw)) for name, (_, lay) in CHANNELS.items()}
        self.queues = {ch: deque() for ch in M.IN_CHANNELS}
        self.idle_prob = {ch: 0.0 for ch in M.IN_CHANNELS}
        self.model = None                   # None: outputs are neither predicted nor compared
        self.sb = {ch: InOrderScoreboard(ch) for ch in M.OUT_CHANNELS}
        self.log = []                       # (cycle, channel, fields) of every output
        self.listeners = []                 # called with (channel, fields) per output
        self.cycle = 0
        self.accepted = 0
        self.first_accept = self.last_accept = None
        self.corrupt_at = corrupt_at        # negative test: damage one model prediction
        # negative test of every channel's scoreboard: damage each channel's first prediction made
        # at or after overall prediction ``corrupt_each_from``; corrupted[ch] = its index on ch
        self.corrupt_each_from = corrupt_each_from
        # negative test of one channel's scoreboard: (channel, index) damages that channel's prediction
        # number ``index`` (counted from the first prediction after construction)
        self.corrupt_on = corrupt_on
        self.corrupted = {}
        self.per_channel = {ch: 0 for ch in M.OUT_CHANNELS}
        self.predicted = 0
        self._hold = {ch: 0 for ch in M.IN_CHANNELS}

    # -- set-up -------------------------------------------------------------------------------
    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for ch in M.IN_CHANNELS:
            self.ports[ch].valid.value = 0
        for ch in M.OUT_CHANNELS:
            self.ports[ch].ready.value = 1
        dut.tick.value = 0
        dut.timeout.value = 0
        dut.bi_id.value = 0
        dut.clear_status.value = 0
        await self.reset()
        for ch in M.IN_CHANNELS:
            cocotb.start_soon(self._drive(ch))
        cocotb.start_soon(self._monitor())

    async def reset(self):
        self.dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    async def clean_slate(self, timeout=0, bi_id=0):
        """Reset, zero the line store (reset does not clear memory), start a fresh model."""
        self.model = None
        self.dut.timeout.value = timeout
        self.dut.bi_id.value = bi_id
        await self.reset()
        self.dut.clear_status.value = (1 << M.N_ERROR_KINDS) - 1
        for line in range(self.cfg["lines"]):
            self.queues["m2s_rwd"].append({"opcode": M.MEM_WR, "snp_type": 0, "meta_field": M.MF_NOOP,
                                           "meta_value": 0, "tag": 0, "addr": line,
                                           "be": (1 << self.dw // 8) - 1, "data": 0})
        await self.quiet()
        self.dut.clear_status.value = 0
        await RisingEdge(self.dut.clk)
        self.model = M.BISnoopModel(**self.cfg, timeout=timeout, bi_id=bi_id)

    # -- driving and monitoring --------------------------------------------------------------
    async def _drive(self, ch):
        port, pk, q = self.ports[ch], self.packers[ch], self.queues[ch]
        while True:
            if q and not self._hold[ch]:
                port.payload.value = pk.pack(q[0])
                port.valid.value = 1
            else:
                port.valid.value = 0
                if self._hold[ch]:
                    self._hold[ch] -= 1
            await RisingEdge(self.dut.clk)

    def _expect(self, outputs):
        for ch, msg in outputs:
            each = (self.corrupt_each_from is not None and self.predicted >= self.corrupt_each_from
                    and ch not in self.corrupted)
            aimed = self.corrupt_on == (ch, self.per_channel[ch])
            if self.predicted == self.corrupt_at or each or aimed:
                key = next(k for k in ("tag", "bitag", "data", "addr") if isinstance(msg.get(k), int))
                msg = dict(msg, **{key: msg[key] ^ 1})
                if each:
                    self.corrupted[ch] = self.per_channel[ch]
            self.predicted += 1
            self.per_channel[ch] += 1
            self.sb[ch].expect(msg)

    async def _monitor(self):
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            self.cycle += 1
            for ch in M.IN_CHANNELS:
                port = self.ports[ch]
                if port.valid.value and port.ready.value:
                    msg = self.packers[ch].unpack(int(port.payload.value))
                    q = self.queues[ch]
                    assert q and q[0] == msg, f"{ch}: accepted {msg}, offered {q[0] if q else None}"
                    q.popleft()
                    self.accepted += 1
                    if self.first_accept is None:
                        self.first_accept = self.cycle
                    self.last_accept = self.cycle
                    if self.idle_prob[ch] and self.rng.random() < self.idle_prob[ch]:
                        self._hold[ch] = self.rng.randrange(1, 4)
                    if self.model is not None:
                        self._expect(self.model.accept(ch, msg))
            for ch in M.OUT_CHANNELS:
                port = self.ports[ch]
                if port.valid.value and port.ready.value:
                    msg = self.packers[ch].unpack(int(port.payload.value))
                    if self.model is None:
                        continue
                    self.sb[ch].actual(msg)
                    self.log.append((self.cycle, ch, msg))
                    for fn in self.listeners:
                        fn(ch, msg)

    def _quiet_now(self):
        if not int(self.dut.idle.value):
            return False
        for ch in M.IN_CHANNELS:
            port = self.ports[ch]
            if port.valid.value and port.ready.value:
                return False
            if self.queues[ch] and not (ch == "m2s_req" and port.valid.value):
                return False                # an offer not yet on the wire, or a gap
        return True

    async def quiet(self, cycles=3, limit=100_000):
        """Wait until the device is idle and nothing more can be accepted, for ``cycles`` clocks."""
        n = 0
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            n = n + 1 if self._quiet_now() else 0
            if n >= cycles:
                await RisingEdge(self.dut.clk)
                return
        raise AssertionError("the device never went quiet")

    # -- scenarios ----------------------------------------------------------------------------
    async def replay(self, items):
        """Run one parsed scenario from a clean slate; returns its outputs in send order."""
        await self.clean_slate()
        start = len(self.log)
        for ch, msg in items:
            if ch == "config":
                self.dut.timeout.value = msg["timeout"]
                self.dut.bi_id.value = msg["bi_id"]
                self.model.timeout, self.model.bi_id = msg["timeout"], msg["bi_id"]
                await RisingEdge(self.dut.clk)
            elif ch == "tick":
                for _ in range(msg["n"]):
                    self.dut.tick.value = 1
                    await RisingEdge(self.dut.clk)
                    self.dut.tick.value = 0
                    self._expect(self.model.tick())
                    await self.quiet()
            else:
                self.queues[ch].append(msg)
                await self.quiet()
        out = self.log[start:]
        out.sort(key=lambda e: (e[0], M.OUT_CHANNELS.index(e[1])))
        return [(ch, msg) for _, ch, msg in out]

    def counters(self):
        word = int(self.dut.err_count.value)
        return [(word >> (M.COUNTER_BITS * k)) & ((1 << M.COUNTER_BITS) - 1) for k in range(M.N_ERROR_KINDS)]

    def check_scoreboards(self):
        """Every channel matched its prediction in order; channels nobody used are skipped."""
        used = [sb for sb in self.sb.values() if sb.compared or sb.expected or sb.unexpected]
        assert used, "no output was compared at all"
        for sb in used:
            sb.check()


def scenario_paths():
    """Scenario files to replay: CXLKV_BISNOOP_SCENARIOS (os.pathsep-separated) or every directed one."""
    from pathlib import Path
    env = os.environ.get("CXLKV_BISNOOP_SCENARIOS")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return sorted((Path(__file__).parent / "scenarios").glob("*.jsonl"))
