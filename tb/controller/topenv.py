"""cocotb environment of the controller top in its default structure (``Controller(...)``: tracker on
chip, tier mover with its memory models, prefetch engine, HDM decode; no host data path, no BI-snoop).

* **Registers**: the host driver (``cxlkv.sw.driver.Device``) over :class:`MirrorTransport`, an
  AXI4-Lite master (cocotbext-axi) on ``s_axil``, with random gaps on AW, W and AR and backpressure
  on B and R (``pause_axil``), whose every write, once the DUT has answered it, is
  also made to the golden model (``ControllerModel.write32``) with the same response expected. Reads
  go to the DUT only; :meth:`TopEnv.check_registers` compares every register word and the cold-list
  window with ``ControllerModel.read32``.
* **Stimulus**: ``drive_stream`` on ``event`` (direct events) and on ``access`` and ``hint`` (the HDM
  decode), with random gaps; ``drive_ready`` puts random backpressure on ``decision`` and ``route``.
  The direct port and the HDM decode are driven in separate phases, each drained before the next
  starts: both feed the same tracker and the order in which it takes them is not visible at the ports.
* **Monitor** (ReadOnly, started before reset is released): an event accepted on ``event`` goes
  through ``ControllerModel.events``; a hint and an access accepted (the hint first when both go in
  the same clock, the decode's rule) through ``ControllerModel.accesses``. The model's answers are
  the predictions of two :class:`InOrderScoreboard`: ``decision`` (every field of the port: the
  model's decision, the event's entry, and the slot of the tracker model's own decision,
  ``ControllerModel.tracker_decisions``) and ``route``.
"""
from __future__ import annotations

import logging
from dataclasses import replace

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from cxlkv.models import hdm as MH
from cxlkv.models import regmap
from cxlkv.models.controller import HDM_PARAMS, ControllerModel
from cxlkv.sw.driver import Device
from cxlkv.sw.transport import BusError
from cxlkv.tb.common import (AxiLiteTransport, InOrderScoreboard, Packer, StreamPort, drive_ready, drive_stream,
                             params, pause_axil)

COLDLIST = regmap.MEMORIES[0]
#: cycles without an output handshake while predictions are owed before a drain calls the DUT stuck
STALL_CYCLES = 20_000


class MirrorTransport(AxiLiteTransport):
    """The driver's transport: reads from the DUT; every write to the DUT and, after its response,
    to the model, whose response must be the same (the register write path of both)."""
    name = "axil+model"

    def __init__(self, master, model):
        super().__init__(master)
        self.model = model

    async def write32(self, addr, value):
        try:
            await super().write32(addr, value)
            resp = 0
        except BusError as exc:
            resp = exc.resp
        mresp = self.model.write32(addr, value)
        if bool(resp) != bool(mresp):
            raise AssertionError(f"write {addr:#x} = {value:#x}: DUT response {resp}, model {mresp}")
        if resp:
            raise BusError("write", addr, resp)


class TopPredictor:
    """ControllerModel's predictions of the top's ``decision`` and ``route`` streams, in two in-order
    scoreboards, from what the top took (``feed_event``, ``feed_accesses``): the one piece both benches
    of the top use (``controller_top`` fed at its ports, ``controller_cxl`` where its HDM decode takes
    accesses and hints). ``corrupt_*_at``: that prediction is corrupted (one bit), for negative tests."""
    COVER = ("hit", "inserted", "victim", "no_victim", "error", "route_error", "event", "hinted", "write_event",
             "same_clock_hint")

    def __init__(self, model, *, corrupt_decision_at=None, corrupt_route_at=None):
        self.model = model
        self.sb = {"decision": InOrderScoreboard("top decision"), "route": InOrderScoreboard("top route")}
        self.corrupt = {"decision": corrupt_decision_at, "route": corrupt_route_at}
        self.predicted = {"decision": 0, "route": 0}
        self.cover = dict.fromkeys(self.COVER, 0)

    def _expect(self, name, item):
        if self.predicted[name] == self.corrupt[name]:
            item = {**item, "victim": item["victim"] ^ 1} if name == "decision" else replace(item, tag=item.tag ^ 1)
        self.predicted[name] += 1
        self.sb[name].expect(item)

    def _decision(self, layer, head, position, answer, tracker_decision):
        """The port's decision from the model's answer (hit, inserted, victim_valid, no_victim,
        error, victim) of one event and the tracker model's decision (for the slot)."""
        hit, inserted, vv, nv, err, victim = answer
        c = self.cover
        c["hit"] += hit
        c["inserted"] += inserted
        c["victim"] += vv
        c["no_victim"] += nv
        c["error"] += err
        return {"layer": layer, "head": head, "position": position, "hit": hit, "inserted": inserted,
                "victim_valid": vv, "no_victim": nv, "error": err, "victim": victim,
                "slot": tracker_decision.slot, "prefetch": 0, "lookup": 0}

    def feed_event(self, e) -> bool:
        """An event the direct port took (its payload fields); False when the model takes none."""
        out = self.model.events([(e["layer"], e["head"], e["position"], e["write"], e["sample"], e["step"])])
        if out is None:
            return False
        self._expect("decision", self._decision(e["layer"], e["head"], e["position"], out[0],
                                                *self.model.tracker_decisions))
        return True

    def feed_accesses(self, items) -> bool:
        """Hints and accesses the HDM decode took in one clock (the hint first), as
        ``ControllerModel.accesses`` takes them; False when the model takes none."""
        out = self.model.accesses(items)
        if out is None:
            return False
        routes, decisions = out
        with_event = [r for r in routes if r.event]
        assert len(with_event) == len(decisions) == len(self.model.tracker_decisions), (routes, decisions)
        for r in routes:
            self._expect("route", r)
            self.cover["route_error"] += r.status != 0
            self.cover["hinted"] += r.hinted
        for r, d, td in zip(with_event, decisions, self.model.tracker_decisions):
            self._expect("decision", self._decision(r.layer, r.head, r.position, d, td))
            self.cover["event"] += 1
            self.cover["write_event"] += r.write
        return True

    def owed(self) -> bool:
        return any(sb.expected for sb in self.sb.values())


class TopEnv:
    def __init__(self, dut, rng, *, corrupt_decision_at=None, corrupt_route_at=None,
                 ready_prob=0.7, burst=3):
        from cxlkv.hdl.controller import Controller
        self.dut, self.rng = dut, rng
        p = self.p = params()
        self.model = ControllerModel(**p)
        top = Controller(**p)                    # for its port layouts only
        top._MustUse__silence = True
        members = top.signature.members

        def packer(name):
            return Packer(members[name].signature.members["payload"].shape)
        self.pk = {name: packer(name) for name in ("event", "decision", "access", "hint", "route")}
        self.ports = {name: StreamPort(dut, name) for name in self.pk}
        self.n_layers, self.n_kv_heads = p["n_layers"], p["n_kv_heads"]
        self.n_positions = 1 << p["entries_log2"]
        self.hdm_geom = MH.HdmGeometry(self.n_layers, self.n_kv_heads, self.n_positions, **HDM_PARAMS)
        self.pred = TopPredictor(self.model, corrupt_decision_at=corrupt_decision_at,
                                 corrupt_route_at=corrupt_route_at)
        self.sb, self.cover = self.pred.sb, self.pred.cover
        self.ready_prob, self.burst = ready_prob, burst
        self.cycle = 0
        self.last_out = 0                       # cycle of the last output handshake
        self.accepted = {"event": 0, "access": 0, "hint": 0}
        self.dev = None

    # -- start -----------------------------------------------------------------------------------
    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for name in ("event", "access", "hint"):
            self.ports[name].valid.value = 0
        for name in ("decision", "route"):
            self.ports[name].ready.value = 0
        dut.rst.value = 1
        cocotb.start_soon(self._monitor())      # before reset is released
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        for name in ("decision", "route"):
            cocotb.start_soon(drive_ready(dut.clk, self.ports[name], self.rng, self.ready_prob, self.burst))
        master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk, dut.rst)
        for part in (master.write_if, master.read_if):
            part.log.setLevel(logging.WARNING)
        pause_axil(master, self.rng)           # the register bus with gaps and B/R backpressure too
        self.dev = Device(MirrorTransport(master, self.model))
        await self.dev.check_identity()
        caps = await self.dev.read_fields("CAPS")
        assert caps["tracker"] and caps["hdm"] and caps["tiermover"] and not caps["quant"] and not caps["bisnoop"], \
            f"CAPS {caps}: not the default structure"
        # the cold-list RAM is not cleared by reset (an earlier test of the simulation left entries in
        # it): the model's ring starts from what the DUT's holds, so the whole window compares
        for i in range(COLDLIST.entries):
            lo = await self.dev.t.read32(COLDLIST.offset + 8 * i)
            hi = await self.dev.t.read32(COLDLIST.offset + 8 * i + 4)
            self.model.coldlist[i] = hi << 32 | lo

    # -- monitor ---------------------------------------------------------------------------------
    def _fire(self, name):
        port = self.ports[name]
        return bool(port.valid.value) and bool(port.ready.value)

    def _unpack(self, name):
        return self.pk[name].unpack(int(self.ports[name].payload.value))

    async def _monitor(self):
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)
            await ReadOnly()
            self.cycle += 1
            if self._fire("event"):
                e = self._unpack("event")
                self.accepted["event"] += 1
                assert self.pred.feed_event(e), "the DUT took an event the model does not accept"
            items = []
            h = self._fire("hint")
            if h:                               # a hint and an access of one clock: the hint first
                items.append(("hint", MH.Hint(**self._unpack("hint"))))
                self.accepted["hint"] += 1
            if self._fire("access"):
                items.append(("access", MH.Access(**self._unpack("access"))))
                self.accepted["access"] += 1
                self.cover["same_clock_hint"] += h
            if items:
                assert self.pred.feed_accesses(items), "the DUT took an access the model does not accept"
            if self._fire("decision"):
                self.sb["decision"].actual(self._unpack("decision"))
                self.last_out = self.cycle
            if self._fire("route"):
                self.sb["route"].actual(MH.Route(**self._unpack("route")))
                self.last_out = self.cycle

    # -- drivers -----------------------------------------------------------------------------------
    async def drive_events(self, records, idle):
        await drive_stream(self.dut.clk, self.ports["event"], self.pk["event"], records, self.rng, idle=idle)

    async def drive_hdm(self, accesses, hints, idle_a, idle_h):
        """Accesses and hints, each stream at its own pace: any interleaving the decode may see."""
        clk = self.dut.clk
        ta = cocotb.start_soon(drive_stream(clk, self.ports["access"], self.pk["access"],
                                            [a.__dict__ for a in accesses], self.rng, idle=idle_a))
        th = cocotb.start_soon(drive_stream(clk, self.ports["hint"], self.pk["hint"],
                                            [x.__dict__ for x in hints], self.rng, idle=idle_h))
        await ta
        await th

    async def drain(self, what):
        """Until every prediction has been met (with backpressure still on), then STATUS.busy = 0."""
        clk = self.dut.clk
        quiet = 0
        while quiet < 16:
            await RisingEdge(clk)
            owed = self.pred.owed()
            quiet = 0 if owed else quiet + 1
            if owed and self.cycle - self.last_out > STALL_CYCLES:
                raise AssertionError(f"{what}: no output for {STALL_CYCLES} cycles with "
                                     f"{ {n: len(sb.expected) for n, sb in self.sb.items()} } predictions owed")
        await self.dev.settle()

    # -- registers ---------------------------------------------------------------------------------
    async def register_diffs(self):
        """Every register word and the cold-list window, DUT over AXI4-Lite against the model:
        [(name, word, DUT, model)]. Counters are read low word first (it latches the high word)."""
        t = self.dev.t
        diffs = []

        async def one(name, word, addr):
            try:
                got = (await t.read32(addr), 0)
            except BusError as exc:
                got = (0, exc.resp)
            exp, resp = self.model.read32(addr)
            exp = (exp if not resp else 0, resp)
            if got != exp:
                diffs.append((name, word, got, exp))
        for reg in regmap.REGISTERS:
            for w in range(reg.words):
                await one(reg.name, w, reg.offset + 4 * w)
        for w in range(COLDLIST.size // 4):
            await one(COLDLIST.name, w, COLDLIST.offset + 4 * w)
        return diffs

    async def check_registers(self, what):
        diffs = await self.register_diffs()
        if diffs:
            lines = [f"  {n}[{w}]: DUT {g[0]:#x} (resp {g[1]}), model {e[0]:#x} (resp {e[1]})" for n, w, g, e in diffs[:10]]
            raise AssertionError(f"{what}: {len(diffs)} register mismatches (DUT vs model)\n" + "\n".join(lines))

    def check_scoreboards(self):
        for sb in self.sb.values():
            sb.check()
