"""cocotb environment of the controller top's CXL.mem side (``Controller(..., host_data=True, bisnoop=True)``).

One clocked loop per simulation (cheaper than a coroutine per port) that, every clock:

* **drives** the M2S channels (``m2s_req``, ``m2s_rwd``, ``m2s_birsp``) from per-channel queues, an item
  held until taken, a random gap after each (``idle``), and the S2M ``ready`` of ``s2m_ndr``, ``s2m_drs``,
  ``s2m_bisnp`` with random bursts of backpressure (``ready_prob``), and so the ``ready`` of the
  top's ``route`` and ``decision`` streams, so that their stalls reach the CXL.mem side; ``hint`` from a
  queue (:meth:`CxlEnv.send_hint`; the random tests a and b put steps and attention samples there);
  ``event`` idles;
* **compares** the top's ``route`` and ``decision`` streams with ``ControllerModel`` (``cxltop.py``): the
  model is fed each access and hint where the HDM decode inside the top takes it, and configured by the
  bench's own register writes (the driver's transport mirrors them);
* **monitors** (ReadOnly) every handshake on those ports and on the BI-snoop engine instance's own
  channels inside the top (Verilator hierarchy, ``--public-flat-rw`` from cocotb's runner): the engine's
  accepted inputs (M2S Req/RwD/BIRsp, policy; its ``tick``) go through ``cxlkv.models.bisnoop.BISnoopModel``
  in acceptance order, its outputs (NDR, BISnp, policy_rsp, error) are compared in order
  (:class:`InOrderScoreboard` per channel);
* **delivers** each S2M message to a MESI host cache (``tb/bisnoop/host.py``, ``early_answer=True``;
  one or more, on disjoint lines, each with its own tag range: NDR/DRS go by tag, BISnp by line) after
  a random delay (in order per channel, so a BISnp can overtake a Cmp), and queues the host's answers.
  Addresses: the host's lines are the engine's (0 .. lines-1); the wire carries ``line + HDM_BASE/64``.

The host's MemData check is replaced by a data scoreboard (:meth:`CxlEnv.data_check`): every
MemData must equal the host's newest write of the line, bit for bit in an FP16 queue, and exactly
``dequantize(quantize(write))`` (``cxlkv.models.quant``) in an FP8/INT8/INT4 queue.

Messages the bench sends itself (error cases) use tags from ``OWN_TAG0`` on; their answers are
collected in ``own`` instead of reaching the host.
"""
from __future__ import annotations

import logging

import numpy as np

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from cxlkv.hdl.bisnoop import CHANNELS
from cxlkv.hdl.controller import BI_BUSY_LIMIT
from cxlkv.hdl.tiermover import TierMoverLayouts
from cxlkv.models import bisnoop as M
from cxlkv.models import controller as MC
from cxlkv.models import hdm as MH
from cxlkv.models import quant as Q
from cxlkv.models.tiermover import TierMoverConfig
from cxlkv.sw.driver import Device
from cxlkv.sw.transport import int_line, line_int
from cxlkv.tb.bisnoop.host import COVER, HostCache, HostCheckError
from cxlkv.tb.common import InOrderScoreboard, Packer, StreamPort, params
from cxlkv.tb.controller.cxltop import TopCheck

#: the top's CXL.mem channels (BISnoopEngine layouts, 512-bit data)
M2S = ("m2s_req", "m2s_rwd", "m2s_birsp")
S2M = ("s2m_ndr", "s2m_drs", "s2m_bisnp")
#: the top's streams of routes and decisions: backpressured like S2M, compared with ControllerModel (cxltop.py)
OBSERVED = ("route", "decision")
DW = 512
#: the engine outputs compared with the model in situ (its DRS data comes from the data path)
ENGINE_CHECKED = ("s2m_ndr", "s2m_bisnp", "policy_rsp", "error")
ENGINE_IN = ("m2s_req", "m2s_rwd", "m2s_birsp", "policy")
#: the bench's HDM window base (a line address offset of 0x1000 on the wire)
HDM_BASE = 0x40000
LINES_PER_ENTRY = 8
#: tags of the bench's own messages (the host's stay far below in a run)
OWN_TAG0 = 0xF000
#: format of queue q: q mod 4 (fp16, fp8, int8, int4)
PROTO_KINDS = (M.E_UNKNOWN_TAG, M.E_ILLEGAL_RSP, M.E_CONFLICT_NONE, M.E_BAD_MSG, M.E_BAD_ADDR)
#: the engine's instance name in the top (``m.submodules.bisnoop``); else the first child with an
#: ``m2s_birsp__valid``
ENGINE_NAMES = ("bisnoop",)


def find_engine(dut):
    for name in ENGINE_NAMES:
        try:
            h = dut[name]
            h["m2s_birsp__valid"]
            return h
        except (AttributeError, KeyError, LookupError, RuntimeError):
            continue
    for child in dut:
        try:
            child["m2s_birsp__valid"]
            return child
        except Exception:        # noqa: BLE001 - anything without the port is not the engine
            continue
    raise AssertionError("no BI-snoop engine instance (a child with m2s_birsp__valid) in the top")


def _opt(handle, name):
    try:
        return handle[name]
    except (AttributeError, KeyError, LookupError):
        return None


def _opt_value(handle, name, default):
    """A port of the engine instance; Amaranth drops the ones the top ties to a constant (``bi_id``)."""
    h = _opt(handle, name)
    return default if h is None else int(h.value)


class EnginePort:
    """One stream of the engine instance; a ``ready`` the top ties to 1 is not in the Verilog (None)."""

    def __init__(self, eng, name):
        self.valid = eng[f"{name}__valid"]
        self.payload = eng[f"{name}__payload"]
        self.ready = _opt(eng, f"{name}__ready")

    def fire(self):
        return bool(self.valid.value) and (self.ready is None or bool(self.ready.value))


class CxlEnv:
    def __init__(self, dut, rng, corrupt_model_at=None, corrupt_data_at=None, ready_prob=0.7, idle=0.2,
                 max_delay=10, hdm_base=HDM_BASE, corrupt_decision_at=None, corrupt_route_at=None):
        self.dut, self.rng = dut, rng
        p = params()
        self.p = p
        self.n_layers, self.n_kv_heads, self.entries_log2 = p["n_layers"], p["n_kv_heads"], p["entries_log2"]
        self.n_queues = self.n_layers * self.n_kv_heads
        self.geom = MH.HdmGeometry(n_layers=self.n_layers, n_kv_heads=self.n_kv_heads,
                                   n_positions=1 << self.entries_log2)
        self.hdm = MH.HdmConfig.packed(self.geom, base=hdm_base)
        self.lines = MC.bisnoop_lines(self.n_layers, self.n_kv_heads, self.entries_log2, LINES_PER_ENTRY)
        assert self.hdm.size // 64 == self.lines, "the packed window and the filter disagree"
        assert self.hdm.lines_per_entry == LINES_PER_ENTRY, f"the packed window's entries are not {LINES_PER_ENTRY} lines"
        self.base_line = hdm_base >> 6
        self.ps, self.hs = self.hdm.pos_shift, self.hdm.head_shift
        self.formats = [q % 4 for q in range(self.n_queues)]
        self.ports = {ch: StreamPort(dut, ch) for ch in M2S + S2M}
        self.packers = {ch: Packer(CHANNELS[ch][1](DW)) for ch in M2S + S2M}
        self.queues = {ch: [] for ch in M2S}
        self._qpos = {ch: 0 for ch in M2S}
        self._wire = {ch: None for ch in M2S}
        self._valid = {ch: 0 for ch in M2S}
        self._gap = {ch: 0 for ch in M2S}
        self._ready = {ch: 1 for ch in S2M + OBSERVED}
        self._hold = {ch: 0 for ch in S2M + OBSERVED}
        self.ready_prob, self.idle, self.max_delay = ready_prob, idle, max_delay
        self.inbox = {ch: [] for ch in S2M}
        self._last_due = {ch: 0 for ch in S2M}
        self.hold_snoops = False            # timeout test: BISnps are kept, not delivered
        self.cycle = 0
        self.errors = []                    # host checks and bench checks (each a string)
        self.stimulus = None                # called once per clock before the sample
        self.own = {}                       # own tag -> [(channel, msg)]
        self.own_bisnp = []                 # BISnps the host did not get (hold_snoops)
        self.bisnp_cycles = []              # the cycle each BISnp left the top
        self.error_cycles = []              # (cycle, kind) of each engine error
        # what the ports showed (the counters must equal these)
        self.expect_ndr = self.expect_drs = self.expect_routes = 0
        self.write_log = []                 # (cycle, line, data) of every write the top took
        self.seen = {"bisnp": 0, "birsp": [0, 0, 0], "birsp_other": 0, "conflicts": 0, "routes": 0,
                     "decisions": 0, "ndr": 0, "drs": 0, "nxm": 0, "m2s": 0}
        # the data scoreboard
        self.corrupt_data_at = corrupt_data_at
        self.data_compared = 0
        self.data_mismatches = []
        self._dq_cache = {}
        # the engine in situ
        self.corrupt_model_at = corrupt_model_at
        self.predicted = 0
        self.sb = {ch: InOrderScoreboard(f"engine {ch}") for ch in ENGINE_CHECKED}
        self.eng_errors = {k: 0 for k in range(1, M.N_ERROR_KINDS + 1)}
        # the evict gate as the ports show it: the victim entry's lines, Busy answers it may still retry
        self.gate_lines: set = set()
        self.gate_busy_left = 0
        self.expect_skipped = 0
        self._gate_step = False
        self.model = None
        # the top's decisions and routes against ControllerModel (its register writes mirrored)
        self.top = TopCheck(dut, p, corrupt_decision_at=corrupt_decision_at, corrupt_route_at=corrupt_route_at)
        self.hints = []                     # hints for the ``hint`` port, the head offered until taken
        self._hint_valid = False
        self._hint_wire = None
        self.used_lines = []
        self.hosts = []                     # MESI host caches on disjoint lines, each with its own tags
        self.owner = {}                     # line -> its host
        self.host_lines = []                # per host: its lines
        self._np = np.random.default_rng(rng.getrandbits(32))

    # -- addresses, formats, data --------------------------------------------------------------
    def line_of(self, queue, position, sub):
        layer, head = divmod(queue, self.n_kv_heads)
        return (((layer << self.hs) | head) << self.ps | position) * LINES_PER_ENTRY + sub

    def queue_of(self, line):
        entry = line // LINES_PER_ENTRY
        head = (entry >> self.ps) & ((1 << self.hs) - 1)
        layer = entry >> (self.ps + self.hs)
        return layer * self.n_kv_heads + head

    def expect(self, line, value):
        """What a read of ``line`` returns after a write of ``value``: the queue's format round trip."""
        fmt = self.formats[self.queue_of(line)]
        if fmt == Q.FP16:
            return value
        key = (fmt, value)
        if key not in self._dq_cache:
            out, _bad = Q.dequantize_records(Q.quantize_records(int_line(value)[None, :], fmt))
            self._dq_cache[key] = line_int(out[0])
        return self._dq_cache[key]

    def data_check(self, line, data, truth):
        """The MemData scoreboard (the host calls it for every MemData of its reads)."""
        exp = self.expect(line, truth)
        if self.data_compared == self.corrupt_data_at:
            exp ^= 1 << 7
        if data != exp and len(self.data_mismatches) < 20:
            self.data_mismatches.append((self.data_compared, line, exp, data))
            if self.corrupt_data_at is None:          # stop the run at once (a negative test counts instead)
                self._error(f"MemData #{self.data_compared} line {line:#x} (queue {self.queue_of(line)}): expected "
                            f"{exp:#x}, got {data:#x}{self._whose(data)}")
        self.data_compared += 1

    def _whose(self, data):
        """For a mismatch report: the lines whose newest write reads back as ``data``."""
        if not self.hosts:
            return ""
        hits = [line for line in self.used_lines if data and self.expect(line, self.owner[line].truth[line]) == data]
        old = [(hex(line), cyc) for cyc, line, v in self.write_log if data and self.expect(line, v) == data]
        return (f" (the newest write of line(s) {[hex(x) for x in hits]}; written to (line, cycle) {old[:4]}; "
                f"{self.diagnose()})")

    def check_data(self):
        if self.data_mismatches:
            i, line, exp, got = self.data_mismatches[0]
            raise AssertionError(f"MemData: {len(self.data_mismatches)} mismatches of {self.data_compared}; first #{i}, "
                                 f"line {line} (queue {self.queue_of(line)}, format "
                                 f"{Q.FORMATS[self.formats[self.queue_of(line)]]}): expected {exp:#x}, got {got:#x}")
        if not self.data_compared:
            raise AssertionError("MemData: nothing was compared")

    def new_value(self, line):
        """A store's value: FP16 lanes of a few kinds (random bits, gaussian of a random scale, an Inf lane)."""
        r = self.rng.random()
        if r < 0.35:
            return self.rng.getrandbits(DW)
        x = (self._np.standard_normal(32) * 2.0 ** self._np.integers(-12, 12)).astype(np.float16)
        if r > 0.95:
            x[self._np.integers(32)] = np.inf
        return line_int(x.view(np.uint16))

    # -- set-up ---------------------------------------------------------------------------------
    async def start(self, timeout_cycles=0):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for ch in M2S:
            self.ports[ch].valid.value = 0
        for ch in S2M:
            self.ports[ch].ready.value = 1
        for name in ("route", "decision"):
            getattr(dut, f"{name}__ready").value = 1
        for name in ("event", "hint"):
            getattr(dut, f"{name}__valid").value = 0
        self.eng = find_engine(dut)
        self.eng_ports = {ch: EnginePort(self.eng, ch) for ch in ENGINE_IN + ENGINE_CHECKED}
        eng_dw = (len(self.eng_ports["m2s_rwd"].payload) - 73) * 8 // 9
        self.eng_dw = eng_dw
        self.eng_packers = {ch: Packer(lay(eng_dw)) for ch, (_, lay) in CHANNELS.items()}
        self.eng_tick = self.eng["tick"]
        self.eng_timeout = self.eng["timeout"]
        # the tier mover's evict request, decoded with the tier mover's own layout (hdl/tiermover.py)
        mover = TierMoverConfig(n_queues=self.n_queues, n_positions=1 << self.entries_log2,
                                frames_per_queue=self.p["max_budget"])
        self.evict_req_packer = Packer(TierMoverLayouts(mover).evict_req)
        payload = dut.evict_req__payload
        assert len(payload) == self.evict_req_packer.width, \
            f"evict_req payload of {len(payload)} bits, the tier mover's layout {self.evict_req_packer.width}"
        self.evict_req = (dut.evict_req__valid, dut.evict_req__ready, payload)
        self.evict_grant = (dut.evict_grant__valid, dut.evict_grant__ready)
        dut.rst.value = 1
        cocotb.start_soon(self._loop())          # the monitor runs before reset is released
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        self.model = M.BISnoopModel(lines=self.lines, n_tags=self.p.get("bitags", 4),
                                    park_depth=MC.BI_PARK_DEPTH, data_width=eng_dw,
                                    bi_id=_opt_value(self.eng, "bi_id", 0))
        self.master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk, dut.rst)
        for part in (self.master.write_if, self.master.read_if):    # a line per register access otherwise
            part.log.setLevel(logging.WARNING)
        self.dev = Device(self.top.transport(self.master))
        await self.dev.check_identity()
        caps = await self.dev.read_fields("CAPS")
        assert caps["bisnoop"] == 1 and caps["quant"] == 1, f"CAPS {caps}: no BI-snoop or no host data path"
        await self.configure(timeout_cycles)

    async def configure(self, timeout_cycles=0, budget=2, pins=1):
        dev = self.dev
        await dev.write_fields("CONTROL", enable=0)
        await dev.configure_hdm(self.hdm)
        await dev.write_fields("QUEUE_BUDGET", entries=budget)
        # one pinned position by default (the reset's 4 could pin both of a queue's slots at budget 2:
        # a seed of test_random_a then made 11 evictions and no writeback); test_no_victim pins 2
        await dev.write_fields("PINS", first_n=pins)
        for q, f in enumerate(self.formats):
            await dev.set_format(q, f)
        await dev.write_fields("BI_TIMEOUT", cycles=timeout_cycles)
        await dev.write_fields("CONTROL", enable=1)
        await dev.clear_counters()
        await dev.settle()

    def make_hosts(self, used_lines, n=1):
        """``n`` host caches; the lines alternate between them (an entry's lines are held by several)."""
        self.used_lines = sorted(used_lines)
        span = (OWN_TAG0 - 1) // n
        self.hosts = [HostCache(self.lines, DW, self.rng, data_check=self.data_check, early_answer=True,
                                new_value=self.new_value, tags=(1 + k * span, (k + 1) * span)) for k in range(n)]
        self.host_lines = [self.used_lines[k::n] for k in range(n)]
        self.owner = {line: self.hosts[k] for k in range(n) for line in self.host_lines[k]}
        return self.hosts

    # -- sending --------------------------------------------------------------------------------
    def send(self, msgs):
        """Queue host messages (host line addresses) on their channels."""
        for ch, msg in msgs:
            if "addr" in msg:
                msg = dict(msg, addr=msg["addr"] + self.base_line)
            self.queues[ch].append(msg)

    def send_own(self, ch, msg):
        """A message of the bench itself (wire address); its answers go to ``own[tag]``."""
        if ch in ("m2s_req", "m2s_rwd"):
            self.own.setdefault(msg["tag"], [])
        self.queues[ch].append(msg)

    def send_hint(self, hint):
        """Queue a hint (models.hdm.Hint) for the top's ``hint`` port."""
        self.hints.append(hint)

    def pending_m2s(self):
        return sum(len(q) - self._qpos[ch] for ch, q in self.queues.items())

    # -- the clocked loop ------------------------------------------------------------------------
    async def _loop(self):
        dut, rng = self.dut, self.rng
        ports, packers = self.ports, self.packers
        eports = None
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            # drive the M2S channels
            for ch in M2S:
                q, i = self.queues[ch], self._qpos[ch]
                port = ports[ch]
                if i < len(q) and not self._gap[ch]:
                    if self._wire[ch] is not q[i]:
                        port.payload.value = packers[ch].pack(q[i])
                        self._wire[ch] = q[i]
                    if not self._valid[ch]:
                        port.valid.value = 1
                        self._valid[ch] = 1
                else:
                    if self._valid[ch]:
                        port.valid.value = 0
                        self._valid[ch] = 0
                    if self._gap[ch]:
                        self._gap[ch] -= 1
            # S2M backpressure, and the observed streams'
            for ch in S2M + OBSERVED:
                if self._hold[ch]:
                    self._hold[ch] -= 1
                    r = 0 if self._hold[ch] else 1
                elif self.ready_prob < 1.0 and rng.random() > self.ready_prob:
                    self._hold[ch] = rng.randrange(1, 6)
                    r = 0
                else:
                    r = 1
                if r != self._ready[ch]:
                    (ports[ch].ready if ch in S2M else getattr(dut, f"{ch}__ready")).value = r
                    self._ready[ch] = r
            # deliver due messages to the host
            for ch in S2M:
                box = self.inbox[ch]
                while box and box[0][0] <= self.cycle:
                    self._deliver(ch, box.pop(0)[1])
            if self.stimulus is not None:
                self.stimulus()
            if self.hints and self._hint_wire is None:
                dut.hint__payload.value = self.top.pk["hint"].pack(self.hints[0].__dict__)
                self._hint_wire = self.hints[0]
            if bool(self.hints) != self._hint_valid:
                self._hint_valid = bool(self.hints)
                dut.hint__valid.value = int(self._hint_valid)
            await ReadOnly()
            fired = self.top.sample(self._ready)  # from reset on: the decode's intake, the top's outputs
            if self._hint_valid and dut.hint__ready.value:
                self.hints.pop(0)
                self._hint_wire = None            # the next one (if any) goes on at the next clock
            if self.model is None:
                continue
            if eports is None:
                eports = self.eng_ports
            # the top's ports
            for ch in M2S:
                if self._valid[ch] and ports[ch].ready.value:
                    msg = self.queues[ch][self._qpos[ch]]
                    self._qpos[ch] += 1
                    if self._qpos[ch] > 256:            # keep the lists short
                        del self.queues[ch][:self._qpos[ch]]
                        self._qpos[ch] = 0
                    self._accepted(ch, msg)
                    if self.idle and rng.random() < self.idle:
                        self._gap[ch] = rng.randrange(1, 4)
            for ch in S2M:
                if self._ready[ch] and ports[ch].valid.value:
                    msg = packers[ch].unpack(int(ports[ch].payload.value))
                    self._output(ch, msg)
            self.seen["routes"] += fired["route"]
            self.seen["decisions"] += fired["decision"]
            # the evict gate: a new victim entry, or the grant (the gate ignores answers in both cycles)
            erv, err_, erpl = self.evict_req
            gate_step = bool(erv.value and err_.value)
            if gate_step:
                victim = self.evict_req_packer.unpack(int(erpl.value))
                self.gate_lines = {self.line_of(victim["queue"], victim["position"], sub)
                                   for sub in range(LINES_PER_ENTRY)}
                self.gate_busy_left = BI_BUSY_LIMIT
            elif self.evict_grant[0].value and self.evict_grant[1].value:
                self.gate_lines, gate_step = set(), True
            self._gate_step = gate_step
            # the engine inside
            active = False
            for ch in ENGINE_IN:
                ep = eports[ch]
                if ep.fire():
                    msg = self.eng_packers[ch].unpack(int(ep.payload.value))
                    self._engine_in(ch, msg)
                    active = True
            if self.eng_tick.value:                   # the engine's time base (BI_TIMEOUT in ticks)
                self.model.timeout = int(self.eng_timeout.value)
                self._expect(self.model.tick())
            for ch in ENGINE_CHECKED:
                ep = eports[ch]
                if ep.fire():
                    msg = self.eng_packers[ch].unpack(int(ep.payload.value))
                    self._engine_out(ch, msg)
                    active = True
            if active and self.hosts:
                try:
                    for host, lines in zip(self.hosts, self.host_lines):
                        host.check_filter(self.model.state, lines)
                except HostCheckError as exc:
                    self._error(f"filter: {exc}")

    def _error(self, text):
        if len(self.errors) < 50:
            self.errors.append(f"cycle {self.cycle}: {text}")

    def _accepted(self, ch, msg):
        self.seen["m2s"] += 1
        op = msg["opcode"]
        if ch == "m2s_req" and op != M.MEM_SPEC_RD:
            self.expect_ndr += 1                  # every Req but MemSpecRd gets one NDR
            if op in (M.MEM_RD, M.MEM_RD_DATA):
                self.expect_drs += 1
                self.expect_routes += 1
        elif ch == "m2s_rwd":
            self.expect_ndr += 1                  # Cmp, or BIConflictAck
            if op == M.MEM_WR or (op == M.MEM_WR_PTL and msg["be"] == (1 << 64) - 1):
                self.expect_routes += 1
                self.write_log.append((self.cycle, msg["addr"] - self.base_line, msg["data"]))
        if ch == "m2s_birsp":
            if msg["opcode"] in (M.BIRSP_I, M.BIRSP_S, M.BIRSP_E):
                self.seen["birsp"][msg["opcode"]] += 1
            else:
                self.seen["birsp_other"] += 1
        elif ch == "m2s_rwd" and msg["opcode"] == M.BI_CONFLICT:
            self.seen["conflicts"] += 1

    def _output(self, ch, msg):
        if ch == "s2m_bisnp":
            self.seen["bisnp"] += 1
            self.bisnp_cycles.append(self.cycle)   # as it left the top (test_bi_timeout times from it)
        elif ch == "s2m_ndr":
            self.seen["ndr"] += 1
        else:
            self.seen["drs"] += 1
            self.seen["nxm"] += msg["opcode"] == M.MEM_DATA_NXM
        due = max(self._last_due[ch], self.cycle + self.rng.randrange(self.max_delay + 1))
        self._last_due[ch] = due
        self.inbox[ch].append((due, msg))

    def _deliver(self, ch, msg):
        if ch != "s2m_bisnp" and msg["tag"] in self.own:
            self.own[msg["tag"]].append((ch, msg))
            return
        if ch == "s2m_bisnp" and (self.hold_snoops or not self.hosts):
            self.own_bisnp.append(msg)            # as on the wire
            return
        if ch == "s2m_bisnp":
            line = msg["addr"] - self.base_line
            if not 0 <= line < self.lines:
                self._error(f"BISnp {msg}: address {msg['addr']:#x} outside the HDM window (lines "
                            f"{self.base_line:#x} .. {self.base_line + self.lines - 1:#x})")
                return
            msg = dict(msg, addr=line)
            host = self.owner.get(line)
        else:
            host = next((h for h in self.hosts if h.owns_tag(msg["tag"])), None)
        if host is None:
            self._error(f"{ch} {msg}: no host's line or tag, and no own request")
            return
        try:
            self.send(host.receive(ch, msg))
        except HostCheckError as exc:
            self._error(f"host: {exc}")

    # -- the engine in situ ----------------------------------------------------------------------
    def _engine_in(self, ch, msg):
        if not self.model.can_accept(ch, msg):
            self._error(f"engine accepted {ch} {msg} that the model would hold (park queue full)")
            return
        self._expect(self.model.accept(ch, msg))

    def _expect(self, outputs):
        for ch, msg in outputs:
            if ch not in self.sb:
                continue
            if self.predicted == self.corrupt_model_at:
                key = "tag" if "tag" in msg else ("bitag" if "bitag" in msg else "addr")
                msg = dict(msg, **{key: msg[key] ^ 1})
            self.predicted += 1
            self.sb[ch].expect(msg)

    def _engine_out(self, ch, msg):
        self.sb[ch].actual(msg)
        if ch == "error":
            self.eng_errors[msg["kind"]] = self.eng_errors.get(msg["kind"], 0) + 1
            self.error_cycles.append((self.cycle, msg["kind"]))
        elif ch == "policy_rsp" and msg["addr"] in self.owner:
            try:
                self.owner[msg["addr"]].released(msg, check_data=False)
            except HostCheckError as exc:
                self._error(f"host: {exc}")
        if ch == "policy_rsp" and msg["op"] == M.R_BUSY:
            if not self._gate_step and msg["addr"] in self.gate_lines:
                if self.gate_busy_left:                  # asked again after BI_RETRY_CYCLES
                    self.gate_busy_left -= 1
                else:                                    # left to the host, unsnooped
                    self.expect_skipped += 1

    def check_engine(self):
        """Every engine output matched the model in order (channels that carried nothing are skipped)."""
        used = [sb for sb in self.sb.values() if sb.compared or sb.expected or sb.unexpected]
        assert used, "the engine produced nothing"
        for sb in used:
            sb.check()

    async def check_top(self, limit=2_000):
        """The top's decisions and routes against ControllerModel: once every prediction has had
        ``limit`` clocks to arrive (the ports' backpressure goes on), both scoreboards."""
        for _ in range(limit):
            if not self.top.owed():
                break
            await RisingEdge(self.dut.clk)
        self.top.check()

    # -- waiting ---------------------------------------------------------------------------------
    async def cycles(self, n):
        for _ in range(n):
            await RisingEdge(self.dut.clk)

    def quiet_now(self):
        host_busy = any(h.pending or h.snoops for h in self.hosts)
        return not (host_busy or self.pending_m2s() or any(self.inbox.values()))

    def diagnose(self):
        """What waits where (for a stall report): M2S queue heads, the top's access queue, the engine."""
        heads = {ch: [(m["opcode"], m.get("tag"), m.get("addr", m.get("bitag")))
                      for m in q[self._qpos[ch]:self._qpos[ch] + 3]] for ch, q in self.queues.items()}
        inside = {}
        for name, sig in (("bi_access_queue", "level"), ("bi_wdata_queue", "level")):
            try:
                inside[f"{name}.{sig}"] = int(self.dut[name][sig].value)
            except (KeyError, AttributeError, ValueError):
                pass
        inside["engine_idle"] = int(self.eng["idle"].value)
        ready = {ch: int(self.ports[ch].ready.value) for ch in M2S}
        return f"M2S heads (opcode, tag, addr) {heads}, M2S ready {ready}, inside {inside}"

    async def settle(self, limit=50_000, what="settle"):
        """Until every message has been taken and answered and the host waits for nothing."""
        n = 0
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            n = n + 1 if self.quiet_now() else 0
            if n >= 8:
                return
            if self.errors:
                raise AssertionError(self.errors[0])
        host = next((h for h in self.hosts if h.pending or h.snoops), None)
        raise AssertionError(f"{what}: no progress after {limit} clocks (deadlock?): m2s queued "
                             f"{self.pending_m2s()}, host pending "
                             f"{dict(list(host.pending.items())[:4]) if host else None}, snoops "
                             f"{dict(list(host.snoops.items())[:4]) if host else None}, inbox "
                             f"{ {ch: len(b) for ch, b in self.inbox.items()} }; {self.diagnose()}")

    async def wait_own(self, tag, n, limit=50_000):
        for _ in range(limit):
            if len(self.own.get(tag, [])) >= n:
                return self.own[tag]
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"own request tag {tag:#x}: {len(self.own.get(tag, []))} of {n} answers after {limit} clocks")

    # -- counters --------------------------------------------------------------------------------
    async def check_counters(self):
        """BISNP_SENT, BIRSP_*, BI_CONFLICTS, PROTO_ERRORS, BI_TIMEOUTS, BI_SNOOPS_SKIPPED equal what the
        ports showed; the tracker's and the HDM decode's counters equal the model's (TopCheck.counter_diffs)."""
        dev = self.dev
        got = {name: await dev.read_reg(name) for name in
               ("BISNP_SENT", "BIRSP_I", "BIRSP_S", "BIRSP_E", "BI_CONFLICTS", "PROTO_ERRORS", "BI_TIMEOUTS",
                "BI_SNOOPS_SKIPPED")}
        want = {"BISNP_SENT": self.seen["bisnp"], "BIRSP_I": self.seen["birsp"][0], "BIRSP_S": self.seen["birsp"][1],
                "BIRSP_E": self.seen["birsp"][2], "BI_CONFLICTS": self.seen["conflicts"],
                "PROTO_ERRORS": sum(self.eng_errors.get(k, 0) for k in PROTO_KINDS),
                "BI_TIMEOUTS": self.eng_errors.get(M.E_TIMEOUT, 0), "BI_SNOOPS_SKIPPED": self.expect_skipped}
        assert got == want, f"counters {got}, the ports showed {want}"
        diffs = await self.top.counter_diffs(dev)
        assert not diffs, f"tracker/HDM counters differ from the model (DUT, model): {diffs}"
        return got


def cover_ok(host_state, filter_state):
    return filter_state >= COVER[host_state]
