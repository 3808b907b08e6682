"""cocotb tests of the HDM decode and hint path against its golden model.

A monitor samples the ``access`` and ``hint`` handshakes every clock in the ReadOnly phase and
applies them to the transaction-level model in acceptance order (a hint before an access of
the same clock, the block's rule); the model's route records and tracker events go into two
in-order scoreboards, which the ``route`` and ``event`` monitors feed with what the block sends.
At the end of every phase the eleven counters, the step and the pending-hint count are
compared with the model's. Both outputs are held to the stream rule every cycle (payload and
``valid`` kept while stalled: tb/common.py ``StreamStability``). Every wait on the block is bounded by a cycle count: an input offered
and never taken fails after OFFER_MAX_WAIT cycles (tb/common.py) with an AssertionError naming the
port (``access``, ``hint``), instead of waiting for the suite's time limit.

Environment: CXLKV_EVENTS (accesses per configuration of the random test, default 6000),
CXLKV_THROUGHPUT_ACCESSES (default 20000), CXLKV_SEED.
"""
from dataclasses import replace

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cxlkv.hdl.hdm import Hdm
from cxlkv.models import hdm as M
from cxlkv.models.trace import Trace, load_trace
from cxlkv.tb.common import (OFFER_MAX_WAIT, InOrderScoreboard, Packer, StreamPort, StreamStability, drive_stream,
                             env_int, params, report_metric, test_rng, watch_stability)

TRACES = __import__("pathlib").Path(__file__).resolve().parents[2] / "traces"


class HdmEnv:
    def __init__(self, dut, rng, cfg, corrupt_event_at=None, corrupt_route_at=None, corrupt_stall_at=None):
        self.dut, self.rng = dut, rng
        prm = params()
        self.geom = M.HdmGeometry(**prm)
        comp = Hdm(**prm)                # for its payload layouts only
        comp._MustUse__silence = True
        self.acc_pack, self.hint_pack = Packer(comp.access_layout), Packer(comp.hint_layout)
        self.ev_pack, self.rt_pack = Packer(comp.event_layout), Packer(comp.route_layout)
        self.acc, self.hint = StreamPort(dut, "access"), StreamPort(dut, "hint")
        self.ev, self.rt = StreamPort(dut, "event"), StreamPort(dut, "route")
        self.model = M.HdmModel(self.geom, cfg)
        self.cfg = cfg
        self.sb_ev = InOrderScoreboard("hdm.event")
        self.sb_rt = InOrderScoreboard("hdm.route")
        self.corrupt_event_at = corrupt_event_at
        self.corrupt_route_at = corrupt_route_at
        self.events_expected = 0
        self.events_seen = []            # the block's events, as sent
        self.cycles = 0
        self.accepted = 0
        self.first_accept = self.last_accept = None
        self.forwarded = 0               # reads that took the hint accepted in their own clock
        self.ev_ready_prob = self.rt_ready_prob = 1.0
        # the stream rule on both outputs (their payload held while stalled), every cycle; the negative
        # test's corrupt_stall_at alters one stalled cycle's payload as seen by each
        self.stability = {n: StreamStability(f"hdm.{n} stability", corrupt_stall_at) for n in ("event", "route")}

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst.value = 1
        for s in (self.acc.valid, self.hint.valid, self.ev.ready, self.rt.ready):
            s.value = 0
        self.configure(self.cfg)
        for port in (self.ev, self.rt):
            cocotb.start_soon(watch_stability(dut.clk, port, self.stability[port.name], dut.rst))
        cocotb.start_soon(self._inputs())
        cocotb.start_soon(self._outputs())
        cocotb.start_soon(self._readies())
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0

    def configure(self, cfg):
        self.cfg = cfg
        self.model.configure(cfg)
        d = self.dut
        for name in ("base", "size", "entry_shift", "pos_shift", "head_shift", "n_layers", "n_kv_heads",
                     "n_positions", "default_sample"):
            getattr(d, name).value = getattr(cfg, name)

    # ---- monitors ------------------------------------------------------------------------------
    async def _inputs(self):
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)
            await ReadOnly()
            self.cycles += 1
            h = a = None
            pending_before = list(self.model.pending)
            if self.hint.valid.value and self.hint.ready.value:
                h = M.Hint(**self.hint_pack.unpack(int(self.hint.payload.value)))
                self.model.hint(h)
            if self.acc.valid.value and self.acc.ready.value:
                a = M.Access(**self.acc_pack.unpack(int(self.acc.payload.value)))
                route, ev = self.model.access(a)
                if self.accepted == self.corrupt_route_at:         # accepted: this route's index
                    route = replace(route, tag=route.tag ^ 1)
                self.sb_rt.expect(route)
                if ev is not None:
                    if self.events_expected == self.corrupt_event_at:
                        ev = M.Event(ev.layer, ev.head, ev.position, ev.write, ev.sample ^ 1, ev.step)
                    self.sb_ev.expect(ev)
                    self.events_expected += 1
                    if (route.hinted and h is not None and h.has_sample
                            and (h.layer, h.head, h.position) == (ev.layer, ev.head, ev.position)
                            and not any(p[:3] == (ev.layer, ev.head, ev.position) for p in pending_before)):
                        self.forwarded += 1
                self.accepted += 1
                if self.first_accept is None:
                    self.first_accept = self.cycles
                self.last_accept = self.cycles

    async def _outputs(self):
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)
            await ReadOnly()
            if self.ev.valid.value and self.ev.ready.value:
                ev = M.Event(**self.ev_pack.unpack(int(self.ev.payload.value)))
                self.events_seen.append(ev)
                self.sb_ev.actual(ev)
            if self.rt.valid.value and self.rt.ready.value:
                self.sb_rt.actual(M.Route(**self.rt_pack.unpack(int(self.rt.payload.value))))

    async def _readies(self):
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)
            self.ev.ready.value = int(self.rng.random() < self.ev_ready_prob)
            self.rt.ready.value = int(self.rng.random() < self.rt_ready_prob)

    # ---- drivers ----------------------------------------------------------------------------------
    async def _offer(self, port, packer, items, idle):
        await drive_stream(self.dut.clk, port, packer, [item.__dict__ for item in items], self.rng, idle=idle)

    async def drive_independent(self, accesses, hints, idle_a=0.1, idle_h=0.3):
        """Both streams at once, each at its own pace: any interleaving the block may see."""
        ta = cocotb.start_soon(self._offer(self.acc, self.acc_pack, accesses, idle_a))
        th = cocotb.start_soon(self._offer(self.hint, self.hint_pack, hints, idle_h))
        await ta
        await th

    async def drive_sequence(self, items, idle=0.0):
        """A ("hint", h) / ("access", a) sequence in its order: a hint followed by an access go in
        the same clock (the hint is applied first), nothing else shares a clock."""
        clk = self.dut.clk
        i, n = 0, len(items)
        while i < n:
            while idle and self.rng.random() < idle:
                await RisingEdge(clk)
            first, (kind, x) = i, items[i]
            h = x if kind == "hint" else None
            a = x if kind == "access" else (items[i + 1][1] if i + 1 < n and items[i + 1][0] == "access" else None)
            i += 1 + (h is not None and a is not None)
            if h is not None:
                self.hint.payload.value = self.hint_pack.pack(h.__dict__)
                self.hint.valid.value = 1
            if a is not None:
                self.acc.payload.value = self.acc_pack.pack(a.__dict__)
                self.acc.valid.value = 1
            for _ in range(OFFER_MAX_WAIT):
                await ReadOnly()
                rh, ra = bool(self.hint.ready.value), bool(self.acc.ready.value)
                assert rh == ra, "hint.ready and access.ready differ"
                await RisingEdge(clk)
                if ra:
                    break
            else:
                ports = " and ".join(p for p, x in (("hint", h), ("access", a)) if x is not None)
                raise AssertionError(f"{ports}: ready stayed low for {OFFER_MAX_WAIT} cycles with valid high "
                                     f"(sequence item {first} of {n}: {str(a or h)[:200]}): "
                                     "the design stopped taking input")
            self.hint.valid.value = 0
            self.acc.valid.value = 0

    async def drain(self, cycles=None):
        """Let every output leave and the stale hints be removed."""
        saved = self.ev_ready_prob, self.rt_ready_prob
        self.ev_ready_prob = self.rt_ready_prob = 1.0
        for _ in range(cycles or (self.geom.hint_depth + 8)):
            await RisingEdge(self.dut.clk)
        self.ev_ready_prob, self.rt_ready_prob = saved

    async def check_state(self):
        await ReadOnly()
        d, m = self.dut, self.model
        got = {k: int(getattr(d, k).value) for k in M.COUNTER_NAMES}
        assert got == m.counters, f"counters: block {got}, model {m.counters}"
        assert int(d.step.value) == m.step, f"step: block {int(d.step.value)}, model {m.step}"
        assert int(d.hints_pending.value) == len(m.pending), \
            f"hints pending: block {int(d.hints_pending.value)}, model {len(m.pending)}"
        assert int(d.cfg_error.value) == int(m.cfg_error), "cfg_error differs"
        await RisingEdge(d.clk)

    def finish(self):
        self.sb_rt.check()
        self.sb_ev.check()
        for chk in self.stability.values():
            chk.check()


# ---- stimulus ----------------------------------------------------------------------------------

def random_traffic(rng, geom, cfg, n, step0=0):
    """Accesses (inside the window on a small pool of hot entries, random entries, beyond the
    geometry, outside the window, unaligned) and hints (samples for the hot entries, step
    advances, backward steps, bad entries)."""
    amask = (1 << geom.addr_width) - 1
    nl_span = max(1, cfg.size >> (cfg.head_shift + cfg.pos_shift + cfg.entry_shift))

    def entry():
        return rng.randrange(cfg.n_layers), rng.randrange(cfg.n_kv_heads), rng.randrange(cfg.n_positions)

    pool = [entry() for _ in range(10)]
    lines = cfg.lines_per_entry if M.ENTRY_SHIFT_MIN <= cfg.entry_shift <= M.ENTRY_SHIFT_MAX else 8
    accesses = []
    for _ in range(n):
        r = rng.random()
        line = 0 if rng.random() < 0.5 else rng.randrange(lines)
        if r < 0.65:
            l, h, p = rng.choice(pool)
        elif r < 0.78:
            l, h, p = entry()
        elif r < 0.88:             # in the window's span, any field value: often beyond the geometry
            l, h, p = rng.randrange(nl_span + 1), rng.randrange(1 << cfg.head_shift), rng.randrange(1 << cfg.pos_shift)
        else:
            l = None
        if l is None:
            k = rng.random()
            if k < 0.3:
                addr = cfg.base - 64 * rng.randrange(1, 64)
            elif k < 0.6:
                addr = cfg.base + cfg.size + 64 * rng.randrange(0, 64)
            else:
                addr = rng.randrange(1 << geom.addr_width)
        else:
            addr = cfg.address(l, h, p, line) if M.ENTRY_SHIFT_MIN <= cfg.entry_shift <= M.ENTRY_SHIFT_MAX \
                else cfg.base + 64 * rng.randrange(1 << 16)
        if rng.random() < 0.05:
            addr += rng.randrange(1, 64)          # low bits are ignored (line granularity)
        accesses.append(M.Access(addr & amask, int(rng.random() < 0.2), rng.randrange(1 << geom.tag_width)))
    hints, step = [], step0
    for _ in range(n // 2):
        r = rng.random()
        if r < 0.12:
            step += rng.randrange(1, 3)
            hints.append(M.Hint(step))
        elif r < 0.16:
            hints.append(M.Hint(max(0, step - rng.randrange(1, 4))))           # backward: counted
        elif r < 0.19:
            hints.append(M.Hint(step, 1, rng.randrange(1 << geom.lb), rng.randrange(1 << geom.hb),
                                rng.randrange(geom.n_positions), rng.randrange(1 << 16)))   # often bad
        else:
            l, h, p = rng.choice(pool) if rng.random() < 0.9 else entry()
            s = step + (1 if rng.random() < 0.03 else 0)
            step = s
            hints.append(M.Hint(s, 1, l, h, p, rng.randrange(1 << 16)))
    return accesses, hints, step


def configs(geom):
    """Run-time configurations of the random test (the last one is refused: cfg_error)."""
    g = geom
    return [
        # sparse strides: heads 2-3, positions >= 400 and layers 3-4 are in the window but beyond
        M.HdmConfig(base=0x3_0000_0000, size=5 << (2 + 10 + 9), entry_shift=9, pos_shift=10, head_shift=2,
                    n_layers=3, n_kv_heads=2, n_positions=400, default_sample=0x1234),
        # packed, 256-byte entries (4 lines), at the top of the address space
        M.HdmConfig.packed(g, base=(1 << g.addr_width) - (2 << 20), entry_bytes=256),
        # 4 KiB entries (64 lines), one head
        M.HdmConfig(base=0, size=2 << (0 + 8 + 12), entry_shift=12, pos_shift=8, head_shift=0,
                    n_layers=2, n_kv_heads=1, n_positions=256, default_sample=0xFFFF),
        # refused: unaligned base, entry_shift too small
        M.HdmConfig(base=0x1000 + 32, size=1 << 20, entry_shift=5, pos_shift=9, head_shift=1, n_layers=4,
                    n_kv_heads=2, n_positions=512),
    ]


def sub_trace(t, n):
    return Trace(t.step[:n], t.layer[:n], t.head[:n], t.pos[:n], t.op[:n], t.score[:n], t.n_layers, t.n_kv_heads)


# ---- tests ---------------------------------------------------------------------------------------

@cocotb.test()
async def test_random(dut):
    """Random accesses in and out of the window, every line offset, hints, step changes, both
    streams at independent paces, backpressure on both outputs; four configurations."""
    rng = test_rng()
    geom = M.HdmGeometry(**params())
    cfgs = configs(geom)
    env = HdmEnv(dut, rng, cfgs[0])
    await env.start()
    n = env_int("CXLKV_EVENTS", 6000)
    step = 0
    for k, cfg in enumerate(cfgs):
        env.configure(cfg)
        for _ in range(3):                 # the decode takes a new configuration in 3 clocks
            await RisingEdge(dut.clk)
        env.ev_ready_prob, env.rt_ready_prob = ((0.5, 0.8), (1.0, 0.6), (0.7, 1.0), (1.0, 1.0))[k]
        acc, hints, step = random_traffic(rng, geom, cfg, n if k < 3 else n // 6, step)
        await env.drive_independent(acc, hints, idle_a=(0.0, 0.2, 0.1, 0.0)[k], idle_h=(0.4, 0.2, 0.6, 0.3)[k])
        # the same configuration again, in a fixed order: every read of a hot entry right after its hint
        seq = []
        for a in acc[: n // 4]:
            if rng.random() < 0.5:
                st, *_ = M.decode(geom, cfg, a.addr)
                if st == M.OK:
                    _, l, h, p, _ = M.decode(geom, cfg, a.addr)
                    seq.append(("hint", M.Hint(step, 1, l, h, p, rng.randrange(1 << 16))))
            seq.append(("access", a))
        await env.drive_sequence(seq, idle=0.1)
        await env.drain()
        await env.check_state()
        dut._log.info("config %d: %s", k, env.model.counters)
    env.finish()
    c = env.model.counters
    for name in M.COUNTER_NAMES:
        assert c[name] > 0, f"coverage: counter {name} never moved"
    assert env.forwarded > 0, "coverage: no read took the hint of its own clock"
    for chk in env.stability.values():
        assert chk.checked > 0, f"coverage: {chk.name}: the stream was never stalled"
    dut._log.info("random: %d accesses, %d events, %d cycles, %d same-clock hints",
                  c["accesses"], c["events"], env.cycles, env.forwarded)


async def _replay(dut, trace, cfg, ready, idle, **kw):
    rng = test_rng()
    geom = M.HdmGeometry(**params())
    env = HdmEnv(dut, rng, cfg)
    env.ev_ready_prob, env.rt_ready_prob = ready
    await env.start()
    items = M.stimulus_from_trace(trace, geom, cfg, **kw)
    await env.drive_sequence(items, idle=idle)
    await env.drain()
    await env.check_state()
    env.finish()
    want = M.trace_events(trace)
    assert env.events_seen == want, "the block's events differ from the trace's"
    return env


@cocotb.test()
async def test_replay_trace_all_lines(dut):
    """The first 3,000 events of traces/tiny_llama_stdlib_top32.npz, every line of every entry
    (8 × 64 B), a hint before every read, random gaps and backpressure: the block's event stream
    equals the trace's (layer, head, position, op, score_to_uq16(score), step), event for event."""
    geom = M.HdmGeometry(**params())
    t = sub_trace(load_trace(TRACES / "tiny_llama_stdlib_top32.npz"), env_int("CXLKV_REPLAY_EVENTS", 3000))
    cfg = M.HdmConfig.packed(geom, base=0x12_3456_0000, n_layers=t.n_layers, n_kv_heads=t.n_kv_heads)
    env = await _replay(dut, t, cfg, (0.7, 0.8), 0.1, lines="all", hint_every_read=True)
    dut._log.info("replayed %d events, %d accesses, %d hints", len(t), env.model.counters["accesses"],
                  env.model.counters["hints"])


@cocotb.test()
async def test_replay_trace_line0(dut):
    """The whole traces/tiny_llama_stdlib_thr001.npz (37,276 events), line 0 of each entry only,
    hints only where the sample differs from the default (663, the trace's most common read sample)."""
    geom = M.HdmGeometry(**params())
    t = load_trace(TRACES / "tiny_llama_stdlib_thr001.npz")
    cfg = M.HdmConfig.packed(geom, base=0xF_0000_0000, n_layers=t.n_layers, n_kv_heads=t.n_kv_heads,
                             default_sample=663)
    env = await _replay(dut, t, cfg, (0.9, 0.9), 0.0, lines="first")
    assert env.model.counters["default_samples"] > 0 and env.model.counters["hints_used"] > 0


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test, both scoreboards and both stream rule checkers in one run: one flipped sample bit
    in the 100th predicted event and one flipped tag bit in the 300th predicted route are reported,
    each by its own scoreboard, and only they (with backpressure on both outputs, so the corruptions
    are caught under stalls too); the payload seen in the 25th checked stalled cycle of each output,
    altered by one bit as a design changing it would, is the one violation each checker reports."""
    rng = test_rng()
    geom = M.HdmGeometry(**params())
    cfg = configs(geom)[0]
    env = HdmEnv(dut, rng, cfg, corrupt_event_at=100, corrupt_route_at=300, corrupt_stall_at=25)
    env.ev_ready_prob, env.rt_ready_prob = 0.7, 0.7
    await env.start()
    acc, hints, _ = random_traffic(rng, geom, cfg, 1500)
    await env.drive_independent(acc, hints)
    await env.drain()
    for sb, index in ((env.sb_ev, 100), (env.sb_rt, 300)):
        assert not sb.expected, f"{sb.name}: {len(sb.expected)} predictions never arrived"
        sb.assert_caught_one(index=index, log=dut._log)
    for chk in env.stability.values():
        assert chk.checked > 25, f"{chk.name}: only {chk.checked} stalled cycles checked"
        chk.assert_caught([25], log=dut._log)


@cocotb.test()
async def test_throughput(dut):
    """An access offered every clock (and a hint with every eighth), outputs always ready:
    accesses per clock (hdm.accesses_per_cycle)."""
    rng = test_rng()
    geom = M.HdmGeometry(**params())
    cfg = M.HdmConfig.packed(geom, base=0x40_0000_0000)
    env = HdmEnv(dut, rng, cfg)
    await env.start()
    n = env_int("CXLKV_THROUGHPUT_ACCESSES", 20_000)
    items = []
    for i in range(n):
        l, h, p, ln = rng.randrange(geom.n_layers), rng.randrange(geom.n_kv_heads), rng.randrange(geom.n_positions), i % 8
        if ln == 0:
            items.append(("hint", M.Hint(i // 800, 1, l, h, p, rng.randrange(1 << 16))))
        items.append(("access", M.Access(cfg.address(l, h, p, ln), int(rng.random() < 0.1), i & 0xFFFF)))
    await env.drive_sequence(items)
    await env.drain()
    await env.check_state()
    env.finish()
    rate = env.accepted / (env.last_accept - env.first_accept + 1)
    report_metric("hdm.accesses_per_cycle", round(rate, 6), "accesses/cycle",
                  {"accesses": n, "events": env.model.counters["events"], "hints": env.model.counters["hints"],
                   "geometry": f"{geom.n_layers}x{geom.n_kv_heads}x{geom.n_positions}",
                   "hint_depth": geom.hint_depth, "outputs_ready": "always"})
    assert env.accepted == n
