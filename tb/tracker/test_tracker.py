"""cocotb tests of the access tracker: trace replay and random streams checked event for event,
victim requests, prefetch inserts, memory stalls, a scoreboard negative test, and the throughput
measurement.

Every accepted event, prefetch insert and victim request goes, in acceptance order (the engine
accepts one a clock), through cxlkv.models.tracker; decisions and answers are compared in order.
The trace tests also compare the decisions with policy.replay(..., "hw", record_victims=True)
directly (with a prefetch window: the rule's inserts sent after each read's decision).

Environment: CXLKV_EVENTS (random events per random test, default 3000), CXLKV_SEED,
CXLKV_THROUGHPUT_EVENTS (default 2000).
"""
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Event, ReadOnly, RisingEdge, with_timeout

from cxlkv.hdl.tracker import INFLIGHT, Geometry
from cxlkv.models import policy as P
from cxlkv.models import tracegen
from cxlkv.models import tracker as T
from cxlkv.models.trace import load_trace, save_trace
from cxlkv.tb.common import (InOrderScoreboard, Packer, StreamPort, drive_ready, drive_stream, env_int, offer,
                             params, report_metric, test_rng)
from cxlkv.tb.tracker.memory import SplitChannelMemory

#: No handshake on any port for this many cycles while a record or request is offered or a decision
#: or answer is owed: the tracker is stuck, and the test fails with what waits instead of running
#: until pytest's timeout. The waits these benches make on purpose (memory stalls and late read
#: data, output backpressure) are bursts of a few cycles; the reset sweep has its own bound.
STALL_CYCLES = 20_000

#: The reset sweep clears one word per queue per cycle; no geometry of the benches takes this long.
RESET_CYCLES = 200_000


def bench_geometry() -> Geometry:
    """The DUT's geometry, from the bench's parameters: tests that size their stimulus before the
    env exists read it here, as TrackerEnv does."""
    p = params()
    return Geometry(p["n_layers"], p["n_kv_heads"], p["n_positions"], p["n_buckets"], p.get("max_budget"))


class TrackerEnv:
    def __init__(self, dut, cfg: T.TrackerConfig, *, corrupt_at=None, vcorrupt_at=None, decode_lock=0):
        self.dut = dut
        p = params()
        self.geom = bench_geometry()
        self.cfg = cfg
        self.model = T.TrackerModel(cfg, self.geom.n_queues, self.geom.n_positions, self.geom.n_buckets,
                                    self.geom.max_budget, select=p.get("select", "ring"),
                                    n_kv_heads=self.geom.n_kv_heads)
        self.decode_lock = decode_lock
        self.ev_port, self.dec_port = StreamPort(dut, "event"), StreamPort(dut, "decision")
        self.vq_port, self.va_port = StreamPort(dut, "victim_req"), StreamPort(dut, "victim_resp")
        self.pf_port = StreamPort(dut, "prefetch")
        self.lk_port = StreamPort(dut, "lookup")
        g = self.geom
        self.ev_pack, self.dec_pack = Packer(g.event_layout()), Packer(g.decision_layout())
        self.pf_pack = Packer(g.pf_layout())
        self.vq_pack, self.va_pack = Packer(g.vreq_layout()), Packer(g.vresp_layout())
        self.sb = InOrderScoreboard("tracker decisions")
        self.vsb = InOrderScoreboard("tracker victim answers")
        self.corrupt_at, self.vcorrupt_at = corrupt_at, vcorrupt_at
        self.accepted = self.emitted = self.vaccepted = self.vemitted = 0
        self.va_spurious = 0               # cycles with victim_resp.valid high and no answer owed
        self.cycles = 0
        self.first_accept = self.last_accept = None
        self.codes = []                    # DUT decisions of events as policy.replay victim codes
        self.decisions = []                # every DUT decision, unpacked
        self.accept_cycles = []            # per event: cycle accepted, cycle decided
        self.latency = {}                  # decision kind -> [sum of cycles, count]
        self.coverage = dict.fromkeys(("queue_full", "evict_from_expired", "evict_from_bucket", "no_victim",
                                       "pinned_hit", "same_entry_burst", "dense_event", "victim_answer",
                                       "victim_none", "victim_locked", "step_error", "event_error",
                                       "pf_insert", "pf_evict", "pf_no_victim", "pf_resident", "pf_error",
                                       "pf_behind_pf", "prefetch_hit", "pf_evicted_unused", "lookup_hit",
                                       "lookup_miss", "lookup_unstarted", "lookup_bad", "lookup_behind_update"), 0)
        self._recent = []                  # (queue, position) of the last accepted events / prefetch inserts
        self._last_ev = None
        self._last_pf = None
        self.stall_limit = STALL_CYCLES
        self.raise_on_stall = True         # False: a test of the watchdog waits on `stalled` instead
        self.stalled = Event()
        self.stall_report = None
        self.idle = 0                      # cycles without a handshake while something waits

    def expected_decision(self, ev):
        q = self.model.queue(ev["layer"], ev["head"])
        if q is not None:
            self._remember((q, ev["position"]))
            qs = self.model.queues[q]
            if qs.started and ev["step"] < qs.cur_step:
                self.coverage["step_error"] += 1
            key = (q, ev["position"])
            if key == self._last_ev:
                self.coverage["same_entry_burst"] += 1
            self._last_ev = key
            from_expired = qs.ehead is not None
        pf_hits = self.model.counters["prefetch_hits"]
        d = self.model.port_event(ev["layer"], ev["head"], ev["position"], ev["write"], ev["sample"], ev["step"])
        if d.error:                    # an out-of-range layer or head on the event port
            self.coverage["event_error"] += 1
        else:
            self.coverage["prefetch_hit"] += self.model.counters["prefetch_hits"] - pf_hits
            if qs.dense:
                self.coverage["dense_event"] += 1
            if d.victim_valid:
                self.coverage["queue_full"] += 1
                self.coverage["evict_from_expired" if from_expired else "evict_from_bucket"] += 1
            if d.no_victim:
                self.coverage["no_victim"] += 1
            if d.hit and ev["position"] < self.cfg.pinned:
                self.coverage["pinned_hit"] += 1
        return self._decision(ev, d)

    @staticmethod
    def _decision(req, d: T.Decision):
        """The decision port's fields (Geometry.decision_layout) of the model's answer to ``req``."""
        return (req["layer"], req["head"], req["position"], d.hit, d.inserted, d.victim_valid, d.no_victim,
                d.error, d.victim, d.slot, d.prefetch, d.lookup)

    def _remember(self, key):
        self._recent = (self._recent + [key])[-8:]

    def expected_lookup(self, lk):
        q = self.model.queue(lk["layer"], lk["head"])
        if q is not None:
            if (q, lk["position"]) in self._recent:
                self.coverage["lookup_behind_update"] += 1      # likely still in flight: forwarded
            if not self.model.queues[q].started:
                self.coverage["lookup_unstarted"] += 1
        d = self.model.port_lookup(lk["layer"], lk["head"], lk["position"])
        if d.error:
            self.coverage["lookup_bad"] += 1
        else:
            self.coverage["lookup_hit" if d.hit else "lookup_miss"] += 1
        return self._decision(lk, d)

    def expected_prefetch(self, pf):
        q = self.model.queue(pf["layer"], pf["head"])
        if q is not None and (q, pf["position"]) == self._last_pf:
            self.coverage["pf_behind_pf"] += 1
        self._last_pf = None if q is None else (q, pf["position"])
        unused = self.model.counters["prefetch_evicted_unused"]
        d = self.model.port_prefetch(pf["layer"], pf["head"], pf["position"])
        if d.error:
            self.coverage["pf_error"] += 1
            return self._decision(pf, d)
        self._remember((q, pf["position"]))
        self.coverage["pf_evicted_unused"] += self.model.counters["prefetch_evicted_unused"] - unused
        kind = ("pf_resident" if not (d.inserted or d.no_victim) else "pf_no_victim" if d.no_victim
                else "pf_evict" if d.victim_valid else "pf_insert")
        self.coverage[kind] += 1
        return self._decision(pf, d)

    def expected_answer(self, vq):
        a = self.model.port_victim_request(vq["layer"], vq["head"], self.decode_lock)
        if not a.error:
            self.coverage["victim_answer" if a.valid else "victim_none"] += 1
            if a.locked:
                self.coverage["victim_locked"] += 1
        return (vq["layer"], vq["head"], a.valid, a.locked, a.error, a.victim)

    async def start(self, **memory):
        """Clock, configuration and reset; the metadata memory (``attach_memory(rng, **memory)``)
        and the monitor start with reset released; returns when the tracker is no longer busy."""
        dut, rng = self.dut, test_rng()
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        cfg = self.cfg
        for name in ("budget", "pinned", "alpha", "rate_mant", "rate_shift", "tln_r", "tln_d", "bucket_bits",
                     "write_sample", "read_credit"):
            getattr(dut, name).value = getattr(cfg, name)
        dut.decode_lock.value = self.decode_lock
        dut.rst.value = 1
        for port in (self.ev_port, self.vq_port, self.pf_port, self.lk_port):
            port.valid.value = 0
        self.dec_port.ready.value = 0
        self.va_port.ready.value = 0
        runners = self.attach_memory(rng, **memory)
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        for run in runners:
            cocotb.start_soon(run)
        cocotb.start_soon(self._monitor())
        for _ in range(RESET_CYCLES):
            if not int(dut.busy.value):
                break
            await RisingEdge(dut.clk)
        else:
            raise AssertionError(f"tracker still busy {RESET_CYCLES} cycles after reset")

    def attach_memory(self, rng, *, meta_ready=1.0, latency=1, jitter=0):
        """The metadata memory on the tracker's split channels; returns the coroutines to start."""
        g, dut = self.geom, self.dut
        self.meta = SplitChannelMemory(dut.clk, StreamPort(dut, "meta_rd"), StreamPort(dut, "meta_rd_data"),
                                       StreamPort(dut, "meta_wr"), Packer(g.meta_rd_layout()),
                                       Packer(g.meta_wr_layout()), rng, ready_prob=meta_ready, latency=latency,
                                       jitter=jitter)
        return [self.meta.run()]

    async def _monitor(self):
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            self.cycles += 1
            moved = False
            if self.ev_port.valid.value and self.ev_port.ready.value:
                moved = True
                ev = self.ev_pack.unpack(int(self.ev_port.payload.value))
                exp = self.expected_decision(ev)
                if self.accepted == self.corrupt_at:
                    exp = exp[:-1] + (exp[-1] ^ 1,)
                self.sb.expect(exp)
                if self.first_accept is None:
                    self.first_accept = self.cycles
                self.last_accept = self.cycles
                self.accept_cycles.append(self.cycles)
                self.accepted += 1
            if self.pf_port.valid.value and self.pf_port.ready.value:
                moved = True
                self.sb.expect(self.expected_prefetch(self.pf_pack.unpack(int(self.pf_port.payload.value))))
                self.last_accept = self.cycles
                self.accept_cycles.append(self.cycles)
                self.accepted += 1
            if self.lk_port.valid.value and self.lk_port.ready.value:
                moved = True
                self.sb.expect(self.expected_lookup(self.pf_pack.unpack(int(self.lk_port.payload.value))))
                self.last_accept = self.cycles
                self.accept_cycles.append(self.cycles)
                self.accepted += 1
            if self.vq_port.valid.value and self.vq_port.ready.value:
                moved = True
                exp = self.expected_answer(self.vq_pack.unpack(int(self.vq_port.payload.value)))
                if self.vaccepted == self.vcorrupt_at:
                    exp = exp[:-1] + (exp[-1] ^ 1,)
                self.vsb.expect(exp)
                self.vaccepted += 1
            if self.dec_port.valid.value and self.dec_port.ready.value:
                moved = True
                o = self.dec_pack.unpack(int(self.dec_port.payload.value))
                self.sb.actual((o["layer"], o["head"], o["position"], o["hit"], o["inserted"], o["victim_valid"],
                                o["no_victim"], o["error"], o["victim"], o["slot"], o["prefetch"], o["lookup"]))
                self.decisions.append(o)
                if not o["prefetch"] and not o["lookup"]:
                    self.codes.append(o["victim"] if o["victim_valid"] else (-2 if o["no_victim"] else -1))
                kind = ("hit" if o["hit"] else "evict" if o["victim_valid"] else "free" if o["inserted"]
                        else "other")
                acc = self.latency.setdefault(kind, [0, 0])
                acc[0] += self.cycles - self.accept_cycles[self.emitted]
                acc[1] += 1
                self.emitted += 1
            if self.va_port.valid.value and self.vemitted >= self.vaccepted:
                self.va_spurious += 1      # an answer nobody asked for (seen even while ready is low)
            if self.va_port.valid.value and self.va_port.ready.value:
                moved = True
                o = self.va_pack.unpack(int(self.va_port.payload.value))
                self.vsb.actual((o["layer"], o["head"], o["valid"], o["locked"], o["error"], o["victim"]))
                self.vemitted += 1
            self._watch(moved)

    def _watch(self, moved):
        """The stall watchdog: counts cycles without a handshake while something waits on the tracker."""
        offered = [name for name, port in (("event", self.ev_port), ("prefetch", self.pf_port),
                                           ("lookup", self.lk_port), ("victim_req", self.vq_port))
                   if port.valid.value]
        owed = self.emitted < self.accepted or self.vemitted < self.vaccepted
        self.idle = 0 if moved or not (offered or owed) else self.idle + 1
        if self.idle == self.stall_limit:
            self.stall_report = (
                f"tracker stalled: no handshake for {self.idle} cycles (cycle {self.cycles}); offered: "
                f"{', '.join(offered) or 'nothing'}; {self.accepted - self.emitted} decision(s) and "
                f"{self.vaccepted - self.vemitted} victim answer(s) owed; decision ready "
                f"{int(self.dec_port.ready.value)}, busy {int(self.dut.busy.value)}")
            self.stalled.set()
            if self.raise_on_stall:
                raise AssertionError(self.stall_report)

    async def drain(self, timeout=20_000):
        for _ in range(timeout):
            if self.emitted == self.accepted and self.vemitted == self.vaccepted:
                break
            await RisingEdge(self.dut.clk)
        for _ in range(16):
            await RisingEdge(self.dut.clk)

    def check_counters(self):
        dut, mc = self.dut, self.model.counters
        for name in T.COUNTER_NAMES:
            got = int(getattr(dut, name).value)
            assert got == mc[name], f"counter {name}: DUT {got}, model {mc[name]}"
        assert int(dut.cfg_error.value) == int(self.model.cfg_error)

    def check_memory(self):
        """Every metadata word the DUT wrote equals the model's {ema, t_last, slot} of its
        position (the EMA is otherwise seen only through the victims it orders)."""
        mem = getattr(self, "meta", None)
        if not isinstance(mem, SplitChannelMemory):
            return
        pb = self.geom.pb
        want = {(q << pb) | p: ema | (t_last << 16) | (slot << 48) for (q, p), (ema, t_last, slot) in self.model.meta.items()}
        bad = [(addr, mem.words.get(addr, 0), w) for addr, w in want.items() if mem.words.get(addr, 0) != w]
        bad += [(addr, w, 0) for addr, w in mem.words.items() if addr not in want and w]
        assert not bad, "metadata words differ from the model (addr, DUT, model): " + \
            ", ".join(f"({a:#x}, {d:#018x}, {w:#018x})" for a, d, w in bad[:5]) + f" ({len(bad)} in all)"

    def check(self):
        self.sb.check()
        if self.vaccepted or self.vemitted:        # a run without victim requests must see no answer
            self.vsb.check()
        assert not self.va_spurious, f"victim_resp.valid high in {self.va_spurious} cycle(s) with no answer owed"
        self.check_counters()
        self.check_memory()


def trace_events(trace):
    """(tracker input dicts, model events) of a trace in file order."""
    out = []
    for e in T.events_from_trace(trace):
        out.append({"layer": e.queue // trace.n_kv_heads, "head": e.queue % trace.n_kv_heads,
                    "position": e.position, "write": e.write, "sample": e.sample, "step": e.step})
    return out


async def replay_trace(dut, family, budget, overrides, *, stalls=True, seed=1):
    trace = tracegen.synth(family, n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=seed)
    # through a trace file, as a recorded trace would come
    path = Path(os.getcwd()) / f"{family}-{seed}.npz"
    save_trace(path, trace)
    trace = load_trace(path)
    prm = P.make_params("hw", **overrides)
    assert P.hw_bucket_count(prm) <= params()["n_buckets"], "configuration needs a larger ring"
    ref = P.replay(trace, "hw", budget, params=prm, record_victims=True)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(prm, budget))
    rng = test_rng()
    await env.start(meta_ready=0.7 if stalls else 1.0, latency=1, jitter=6 if stalls else 0)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng, ready_prob=0.8 if stalls else 1.0, burst=3))
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, trace_events(trace), rng, idle=0.05 if stalls else 0)
    await env.drain()
    env.check()
    assert env.codes == ref.victims.tolist(), "DUT victims differ from policy.replay's hw"
    assert int(dut.evictions.value) == ref.total("evictions")
    assert int(dut.read_hits.value) == ref.total("read_hits")
    if stalls:
        assert int(dut.mem_wait_cycles.value) > 0
    dut._log.info("%s C=%d %s: %d events equal to policy.replay (%d evictions, %d hits), coverage %s",
                  family, budget, overrides, len(trace), ref.total("evictions"), ref.total("read_hits"),
                  env.coverage)
    return env


@cocotb.test()
async def test_trace_mixed(dut):
    """A synthetic mixed trace (2 x 2 queues, prefill 32, 64 steps, C = 4), memory stalls on."""
    await replay_trace(dut, "mixed", 4, {})


@cocotb.test()
async def test_trace_dense_pinned(dut):
    """dense_early, C = 6, two attention sinks pinned, an attention term in normal mode (τr = 4)."""
    env = await replay_trace(dut, "dense_early", 6, {"hw_pinned": 2, "hw_rank_tau": 4}, seed=2)
    assert env.coverage["dense_event"] and env.coverage["pinned_hit"]


async def replay_trace_with_prefetch(dut, family, budget, window, trigger_all, overrides, *, seed=1):
    """The host side of hw's prefetch: each event, then (once its decision is out) the rule's
    prefetch inserts; the decisions equal policy.replay(..., window=W)."""
    from cxlkv.models import prefetch as PF
    trace = tracegen.synth(family, n_layers=2, n_kv_heads=2, prefill=16, steps=24, seed=seed)
    prm = P.make_params("hw", window=window, **overrides)
    ref = P.replay(trace, "hw", budget, params=prm, record_victims=True, prefetch_trigger=trigger_all)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(prm, budget))
    rng = test_rng()
    await env.start(meta_ready=0.8, latency=1, jitter=3)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng, ready_prob=0.8, burst=2))
    newest = {}
    for ev in trace_events(trace):
        await drive_stream(dut.clk, env.ev_port, env.ev_pack, [ev], rng)
        while env.emitted < env.accepted:
            await RisingEdge(dut.clk)
        d = env.decisions[-1]
        q = (ev["layer"], ev["head"])
        newest[q] = max(newest.get(q, -1), ev["position"])
        if PF.triggers(not ev["write"], d["hit"], trigger_all, window):
            lo, hi = PF.window_bounds(ev["position"], window, newest[q])
            cands = [{"layer": ev["layer"], "head": ev["head"], "position": p}
                     for p in PF.candidates(ev["position"], window, newest[q])]
            assert all(lo <= c["position"] <= hi for c in cands)
            await drive_stream(dut.clk, env.pf_port, env.pf_pack, cands, rng)
    await env.drain()
    env.check()
    assert env.codes == ref.victims.tolist(), "DUT victims differ from policy.replay's hw with prefetch"
    for name in ("prefetches", "prefetch_hits", "evictions", "read_hits", "no_victim"):
        assert int(getattr(dut, name).value) == ref.total(name), name
    assert ref.total("prefetches") > 0 and ref.total("prefetch_hits") > 0
    dut._log.info("%s C=%d W=%d trigger_all=%d: %d events, %d prefetches, %d prefetch hits equal to policy.replay",
                  family, budget, window, trigger_all, len(trace), ref.total("prefetches"), ref.total("prefetch_hits"))


@cocotb.test()
async def test_trace_prefetch_on_miss(dut):
    """mixed, C = 6, W = 2, prefetch on read misses: equal to policy replay --param window=2."""
    await replay_trace_with_prefetch(dut, "mixed", 6, 2, 0, {})


@cocotb.test()
async def test_trace_prefetch_every_read(dut):
    """dense_early, C = 5, W = 1, prefetch on every read, a sink pinned."""
    await replay_trace_with_prefetch(dut, "dense_early", 5, 1, 1, {"hw_pinned": 1}, seed=2)


def random_events(rng, geom, n, *, npos):
    """Random stream: random queues, non-decreasing steps (some going backwards), same-entry bursts,
    and out-of-range layers."""
    step = rng.randrange(0, 1000)
    out = []
    while len(out) < n:
        r = rng.random()
        if r < 0.08:
            step += rng.randrange(1, 40)
        elif r < 0.10:
            step += rng.choice((100, 500, 3000))
        layer = rng.randrange(geom.n_layers)
        if rng.random() < 0.005:
            layer = (1 << geom.lb) - 1 if (1 << geom.lb) > geom.n_layers else layer
        head = rng.randrange(geom.n_kv_heads)
        pos = rng.randrange(npos) if rng.random() < 0.9 else rng.randrange(geom.n_positions)
        s = step - rng.randrange(1, 5) if rng.random() < 0.01 and step > 8 else step
        burst = rng.randrange(2, 6) if rng.random() < 0.05 else 1
        for _ in range(burst):
            sample = rng.choice((0, 1, 0x8000, 0xFFFF)) if rng.random() < 0.2 else rng.getrandbits(16)
            out.append({"layer": layer, "head": head, "position": pos, "write": int(rng.random() < 0.15),
                        "sample": sample, "step": s})
    out = out[:n]
    if n > 10 and (1 << geom.lb) > geom.n_layers:     # at least one out-of-range layer, however short the run
        out[n // 2] = {**out[n // 2], "layer": (1 << geom.lb) - 1}
    return out


def random_prefetches(rng, geom, n, *, npos):
    """Random prefetch inserts: mostly the events' positions (resident ones, entries in flight,
    back to back on one entry), some to other positions, to an unstarted queue and a bad layer."""
    out = []
    while len(out) < n:
        layer = rng.randrange(geom.n_layers)
        if rng.random() < 0.01:
            layer = (1 << geom.lb) - 1 if (1 << geom.lb) > geom.n_layers else layer
        pos = rng.randrange(npos) if rng.random() < 0.8 else rng.randrange(geom.n_positions)
        for _ in range(rng.randrange(2, 4) if rng.random() < 0.05 else 1):
            out.append({"layer": layer, "head": rng.randrange(geom.n_kv_heads), "position": pos})
    return out[:n]


async def random_run(dut, cfg, *, n, npos, decode_lock, vreq_prob, ready=0.6, seed_shift=0, pf_prob=0.0,
                     lk_prob=0.0):
    env = TrackerEnv(dut, cfg, decode_lock=decode_lock)
    rng = test_rng()
    for _ in range(seed_shift):
        rng.random()
    await env.start(meta_ready=ready, latency=1, jitter=8)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng, ready_prob=0.75, burst=3))
    cocotb.start_soon(drive_ready(dut.clk, env.va_port, rng, ready_prob=0.6, burst=2))
    g = env.geom
    reqs = [{"layer": rng.randrange(1 << g.lb), "head": rng.randrange(g.n_kv_heads)}
            for _ in range(int(n * vreq_prob))]

    async def victim_requests():
        # from the 32nd event on: prefetch inserts and lookups go before events at accept, so with
        # few events in flight (4) the events can wait long enough for every request to meet only
        # unstarted queues (seen: no answered request at all)
        while env.model.counters["events"] < 32:
            await RisingEdge(dut.clk)
        await drive_stream(dut.clk, env.vq_port, env.vq_pack, reqs, rng, idle=0.9)

    cocotb.start_soon(victim_requests())
    pfs = random_prefetches(rng, g, int(n * pf_prob), npos=npos)
    if pfs:
        # the first inserts go to queue 0 before any event: refused (no step yet); the rest from
        # the 32nd event on, for the reason above (they go before events at accept too)
        pfs[:2] = [{"layer": 0, "head": 0, "position": 1}, {"layer": 0, "head": 0, "position": 1}]

        async def prefetches():
            await drive_stream(dut.clk, env.pf_port, env.pf_pack, pfs[:2], rng, idle=0.0)
            while env.model.counters["events"] < 32:
                await RisingEdge(dut.clk)
            await drive_stream(dut.clk, env.pf_port, env.pf_pack, pfs[2:], rng, idle=0.5)

        cocotb.start_soon(prefetches())
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
    lks = random_prefetches(rng, g, int(n * lk_prob), npos=npos)     # the same mix of entries
    if lks:
        # the first lookup goes to queue 2 before any event of it: offered at once (lookups go
        # before events at accept), so no seed lets an event of queue 2 in first
        lks[:1] = [{"layer": 1, "head": 0, "position": 3}]

        async def lookups():
            await drive_stream(dut.clk, env.lk_port, env.pf_pack, lks[:1], rng, idle=0.0)
            await drive_stream(dut.clk, env.lk_port, env.pf_pack, lks[1:], rng, idle=0.6)

        cocotb.start_soon(lookups())
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, random_events(rng, g, n, npos=npos), rng, idle=0.1)
    while env.vaccepted < len(reqs) or env.accepted < n + len(pfs) + len(lks):
        await RisingEdge(dut.clk)
    await env.drain()
    env.check()
    assert env.sb.compared == n + len(pfs) + len(lks) and env.vsb.compared == len(reqs)
    dut._log.info("random: %d events, %d victim requests checked; %d memory wait cycles; coverage %s",
                  n, len(reqs), int(dut.mem_wait_cycles.value), env.coverage)
    return env


@cocotb.test()
async def test_random_defaults(dut):
    """Random events and victim requests, defaults (g = 3, dense mode), C = 6, 2 pinned, one queue locked."""
    n = env_int("CXLKV_EVENTS", 3000)
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_pinned=2), 6)
    env = await random_run(dut, cfg, n=n, npos=14, decode_lock=0b000100, vreq_prob=0.1, pf_prob=0.3, lk_prob=0.3)
    cov = env.coverage
    for b in ("queue_full", "evict_from_expired", "evict_from_bucket", "pinned_hit", "same_entry_burst",
              "dense_event", "victim_answer", "victim_none", "victim_locked", "step_error", "event_error",
              "pf_insert", "pf_evict", "pf_resident", "pf_error", "pf_behind_pf", "prefetch_hit",
              "pf_evicted_unused", "lookup_hit", "lookup_miss", "lookup_unstarted", "lookup_bad",
              "lookup_behind_update"):
        assert cov[b] > 0, f"coverage bin {b} not hit: {cov}"
    for name, v in cov.items():
        report_metric(f"tracker.coverage.{name}", v, "count", {"test": "test_random_defaults", "events": n})


@cocotb.test()
async def test_random_fine_buckets(dut):
    """g = 0 (NB = 90 with τd = 8), an attention term in both modes, write sample and read credit,
    α = 0 (applied as 1)."""
    n = env_int("CXLKV_EVENTS", 3000) // 2
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_bucket_bits=0, hw_rank_tau=2, hw_rank_tau_long=8,
                                                    hw_alpha=0, hw_tau=3, hw_write_sample=5000,
                                                    hw_read_credit=300), 5)
    assert T.buckets_needed(cfg) <= params()["n_buckets"]
    await random_run(dut, cfg, n=n, npos=12, decode_lock=0, vreq_prob=0.05, seed_shift=1, pf_prob=0.2,
                     lk_prob=0.2)


@cocotb.test()
async def test_random_all_slots(dut):
    """C = every slot of the DUT's queues, up to 16 (the board's): the budgets above (2 to 6)
    leave the upper slots of a 16-slot order empty, so their selection logic (the matrix's rows
    and columns 6 to 15) would go unchecked; here queues fill to C with mixed keys and evict."""
    g = bench_geometry()
    budget = min(16, g.max_budget)
    n = env_int("CXLKV_EVENTS", 3000) // 2
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_pinned=1), budget)
    env = await random_run(dut, cfg, n=n, npos=3 * budget, decode_lock=0, vreq_prob=0.05, seed_shift=2,
                           pf_prob=0.1, lk_prob=0.1)
    assert env.coverage["queue_full"] > 0 and env.coverage["evict_from_bucket"] > 0, env.coverage


def fill_then_evict(cfg, geom, select, *, rng, step=40, hot_reads=6):
    """Per queue, back to back: fill every slot at one step, then misses. All but one of the first
    C - 1 positions are read ``hot_reads`` times (their EMA, and so their keys, rise above the
    step); then the last free slot is filled with a fresh position, whose key is the step. Where
    it goes in the order is the case the queue's pattern sets:
      "second": one of the first C - 1 positions (at slot ``cold``) is read once; the fresh
      position goes after it and before every hot one, so exactly one slot of the order fails its
      "goes first" (the AND over the order, one term false, at a slot the pattern chooses);
      "first": every other position is hot: the fresh one goes first;
      "last": none is hot: it goes after all of them (normal mode: behind equal keys).
    The misses right behind evict by that order (the victim the fill's change made). The patterns
    are checked on the model here, so the stimulus cannot lose its case silently. Returns the
    events (layer, head, position, write, sample, step) and the patterns used."""
    C = cfg.budget
    odd = [j for j in range(1, C - 1, 2)]
    colds = [1, C - 2, rng.choice(odd), rng.randrange(C - 1)]
    patterns = [("second", c) for c in colds] + [("first", None), ("last", None)]
    model = T.TrackerModel(cfg, geom.n_queues, geom.n_positions, geom.n_buckets, geom.max_budget, select=select)
    events = []
    for q in range(geom.n_queues):
        kind, cold = patterns[q % len(patterns)]
        layer, head = divmod(q, geom.n_kv_heads)
        qev = []

        def ev(pos, sample=0xFFFF):
            qev.append({"layer": layer, "head": head, "position": pos, "write": 0, "sample": sample, "step": step})
        hot = [j for j in range(C - 1) if kind == "first" or (kind == "second" and j != cold)]
        for j in range(C - 1):
            ev(j, sample=0x0100 if j not in hot else 0xFFFF)
        for _ in range(hot_reads - 1):
            for j in hot:
                ev(j)
        fresh = C - 1
        ev(fresh, sample=0x0100)
        for k in range(3):                     # misses: the first evicts by the fill's order
            ev(C + k, sample=0x0100)
        decisions = [model.event(T.Event(q, e["position"], 0, e["sample"], e["step"])) for e in qev]
        first_victim = decisions[-3].code
        expect = {"second": cold, "first": fresh}.get(kind)
        if expect is not None:
            assert first_victim == expect, (kind, cold, [d.code for d in decisions[-3:]])
        else:
            assert first_victim not in (fresh, -1, -2), (kind, [d.code for d in decisions[-3:]])
        if kind == "second":
            assert decisions[-2].code == fresh, (kind, cold, [d.code for d in decisions[-3:]])
        events += qev
    return events, patterns


@cocotb.test()
async def test_free_slot_fill_then_evict(dut):
    """The list stage's next victim in the free slot's case, back to back: per queue, the last
    free slot is filled with a fresh position that goes second in the order (one slot before it,
    at slots 1, C - 2 and ones drawn), first, or last, and misses follow at once, so the victim of
    the first miss is the one the fill's change made (fill_then_evict). C = every slot, up to 16."""
    g = bench_geometry()
    # g = 0 so that hot reads move a key by steps (in 8-step buckets they stay in the fresh key's)
    prm = P.make_params("hw", hw_bucket_bits=0, hw_rank_tau=2, hw_rank_tau_long=8, hw_alpha=0, hw_tau=3,
                        hw_write_sample=5000, hw_read_credit=300)
    cfg = T.TrackerConfig.from_params(prm, min(16, g.max_budget))
    rng = test_rng()
    events, patterns = fill_then_evict(cfg, g, params().get("select", "ring"), rng=rng)
    env = TrackerEnv(dut, cfg)
    await env.start(latency=1)
    env.dec_port.ready.value = 1
    await drive_records(dut, env, [("event", e) for e in events])
    await env.drain()
    env.check()
    assert env.sb.compared == len(events)
    dut._log.info("fill then evict: %d events, patterns %s", len(events), patterns)


@cocotb.test()
async def test_all_pinned_no_victim(dut):
    """C = 2 with positions 0..2 pinned: a full queue of sinks answers no_victim and none."""
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_pinned=3), 2)
    env = TrackerEnv(dut, cfg)
    rng = test_rng()
    await env.start(meta_ready=0.5, latency=2, jitter=2)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng))
    cocotb.start_soon(drive_ready(dut.clk, env.va_port, rng))
    evs = [{"layer": 0, "head": 1, "position": p, "write": 0, "sample": 1000, "step": s}
           for s, p in ((0, 0), (0, 1), (1, 5), (1, 2), (2, 0), (3, 7))]
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, evs, rng)
    await drive_stream(dut.clk, env.vq_port, env.vq_pack, [{"layer": 0, "head": 1}, {"layer": 0, "head": 0}], rng)
    await drive_stream(dut.clk, env.pf_port, env.pf_pack, [{"layer": 0, "head": 1, "position": 9}], rng)
    await env.drain()
    env.check()
    assert env.codes == [-1, -1, -2, -2, -1, -2]
    assert env.decisions[-1]["prefetch"] and env.decisions[-1]["no_victim"]      # a prefetch with nowhere to go
    assert int(dut.no_victim.value) == 4 and int(dut.victim_none.value) == 2 and int(dut.prefetches.value) == 1
    # a configuration the ring cannot hold (g = 0 with τd = 64 needs 711 buckets) raises cfg_error
    assert int(dut.cfg_error.value) == 0
    dut.bucket_bits.value = 0
    for _ in range(4):                   # the check is registered over three steps (static configuration)
        await RisingEdge(dut.clk)
    assert int(dut.cfg_error.value) == 1


@cocotb.test()
async def test_pinned_eviction_empties_the_order(dut):
    """C = 2 with positions 0..2 pinned, back to back on one queue: a sink and a non-pinned
    position fill the queue, a pinned miss evicts the only slot in the order, and the misses right
    behind it find the order empty (no_victim) while the list stage's change is still in flight
    (the "order is not empty" flag the list stage registers ahead of the RAM write)."""
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw", hw_pinned=3), 2))
    await env.start(latency=1)
    env.dec_port.ready.value = 1

    def ev(pos, step):
        return ("event", {"layer": 0, "head": 1, "position": pos, "write": 0, "sample": 0x4000, "step": step})

    await drive_records(dut, env, [ev(0, 0), ev(5, 0), ev(1, 1), ev(6, 1), ev(7, 1), ev(2, 2), ev(8, 2)])
    await env.drain()
    env.check()
    # 0 and 5 take the free slots, 1 evicts 5 (the only position in the order), 6, 7, 2 and 8
    # find only sinks
    assert env.codes == [-1, -1, 5, -2, -2, -2, -2]
    assert int(dut.no_victim.value) == 4


async def drive_records(dut, env, records):
    """Offer (port name, item) records one per clock, in order (the next is offered in the cycle
    after the previous one is taken)."""
    ports = {"event": (env.ev_port, env.ev_pack), "prefetch": (env.pf_port, env.pf_pack),
             "lookup": (env.lk_port, env.pf_pack)}
    for kind, item in records:
        await offer(dut.clk, *ports[kind], item)


@cocotb.test()
async def test_forwarding_back_to_back(dut):
    """Events of one entry back to back, at the same step and at later steps, between events of
    other entries: each waits in the back end until its source's new EMA is in the in-flight
    buffer (fwd_wait_cycles counts the waits), then starts from it. Decisions, counters and every
    metadata word (the EMA each event wrote) through the model."""
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 3))
    await env.start(latency=1)
    env.dec_port.ready.value = 1

    def ev(pos, step, sample=0x4000, write=0):
        return ("event", {"layer": 1, "head": 0, "position": pos, "write": write, "sample": sample, "step": step})

    await drive_records(dut, env, [ev(3, 5), ev(3, 5, 0xF000), ev(3, 5, 0x0100), ev(4, 5)])       # same step
    await env.drain()
    same_step = int(dut.fwd_wait_cycles.value)
    assert same_step > 0
    await drive_records(dut, env, [ev(3, 6, 0x8000), ev(3, 7, 0x2000), ev(3, 9, 0xFFFF), ev(4, 9),
                                   ev(4, 12, 0x10), ev(3, 12), ev(3, 13, write=1), ev(5, 13), ev(6, 13)])
    await env.drain()
    env.check()
    assert int(dut.fwd_wait_cycles.value) > same_step


@cocotb.test()
async def test_forwarding_after_gaps(dut):
    """Events of one entry with 1 to 7 idle cycles between them: each reaches B0 while B0's head
    is empty, so the head is refilled with it (not loaded behind an older record), with its
    source one to four stages ahead or already past the window. Each waits exactly while its
    source's new EMA is not yet in the in-flight buffer (a refilled record that never waits starts
    from a stale EMA: the metadata words differ). Decisions, counters and every metadata word
    through the model."""
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 3))
    await env.start(latency=1)
    env.dec_port.ready.value = 1

    def ev(pos, step, sample):
        return ("event", {"layer": 1, "head": 0, "position": pos, "write": 0, "sample": sample, "step": step})

    samples = [0xF000, 0x0100, 0x8000, 0x2000, 0xFFFF, 0x0010]
    step, n = 5, 0
    for gap in range(1, 8):
        for same_step in (True, False):
            for k in range(3):
                await drive_records(dut, env, [ev(3, step, samples[n % len(samples)])])
                n += 1
                if not same_step:
                    step += 1
                for _ in range(gap):
                    await RisingEdge(dut.clk)
    await env.drain()
    env.check()
    assert int(dut.fwd_wait_cycles.value) > 0


@cocotb.test()
async def test_step_errors_back_to_back(dut):
    """Events of one queue back to back around a step error: the item behind an event that steps
    back compares its step with the queue's step, which the error left unchanged, not with the
    error's own step (accept takes cand's state as it leaves it). Each later event is again
    backwards, at the queue's step or a new step; counters (step_errors, the read counts) and
    every metadata word (t_last) through the model."""
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 3))
    await env.start(latency=1)
    env.dec_port.ready.value = 1

    def ev(pos, step, head=0, write=0):
        return ("event", {"layer": 1, "head": head, "position": pos, "write": write, "sample": 0x4000, "step": step})

    await drive_records(dut, env, [ev(1, 100), ev(2, 100)])
    await env.drain()
    await drive_records(dut, env, [ev(3, 90), ev(4, 90), ev(5, 100), ev(1, 95), ev(2, 95, head=1), ev(6, 95),
                                   ev(7, 101), ev(3, 99), ev(4, 101), ev(5, 102)])
    await env.drain()
    env.check()
    assert int(dut.step_errors.value) == 5


@cocotb.test()
async def test_prefetch_forwarding_rule(dut):
    """Back to back on one queue: a read behind a prefetch insert of its entry at the same step
    forwards from it (no wait), at the next step it waits until the insert has retired; a
    prefetch insert behind a prefetch insert of the same entry; both outcomes of the insert
    (inserted, resident no-op). Every decision through the model; pf_wait_cycles counts only
    the next-step case."""
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 3))
    await env.start(latency=1)
    env.dec_port.ready.value = 1

    def ev(pos, step, write=0):
        return ("event", {"layer": 0, "head": 1, "position": pos, "write": write, "sample": 0x4000, "step": step})

    def pf(pos):
        return ("prefetch", {"layer": 0, "head": 1, "position": pos})

    await drive_records(dut, env, [ev(1, 10), pf(5), ev(5, 10), pf(1), ev(1, 10)])     # same step: forward
    await env.drain()
    assert int(dut.pf_wait_cycles.value) == 0
    await drive_records(dut, env, [pf(6), pf(6), ev(6, 11), pf(2), ev(2, 12, write=1)])  # next step: wait
    await env.drain()
    assert int(dut.pf_wait_cycles.value) > 0
    # the queue's step advances by another entry's event between the insert and the record,
    # which itself starts no step: it waits too
    waits = int(dut.pf_wait_cycles.value)
    await drive_records(dut, env, [ev(9, 19), ev(8, 19)])
    await env.drain()
    await drive_records(dut, env, [pf(9), ev(8, 20), ev(9, 20), pf(8), ev(7, 21), pf(8)])
    await env.drain()
    env.check()
    assert int(dut.pf_wait_cycles.value) > waits
    kinds = [(d["prefetch"], d["hit"], d["inserted"]) for d in env.decisions]
    assert (1, 0, 1) in kinds and (1, 0, 0) in kinds          # an insert and a resident no-op


@cocotb.test()
async def test_scoreboard_catches_corruption(dut):
    """Negative test: one flipped bit in the model's 200th prediction must be reported, exactly it."""
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=16, seed=3)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 4), corrupt_at=200)
    rng = test_rng()
    await env.start(meta_ready=0.8)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng))
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, trace_events(trace)[:400], rng)
    await env.drain()
    env.sb.assert_caught_one(index=200, log=dut._log)


@cocotb.test()
async def test_victim_scoreboard_catches_corruption(dut):
    """Negative test of the victim answers' scoreboard: one flipped bit in the model's 3rd answer
    must be reported, exactly it."""
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=16, seed=3)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 4), vcorrupt_at=2)
    rng = test_rng()
    await env.start(meta_ready=0.8)
    cocotb.start_soon(drive_ready(dut.clk, env.dec_port, rng))
    cocotb.start_soon(drive_ready(dut.clk, env.va_port, rng, ready_prob=0.6, burst=2))
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, trace_events(trace)[:200], rng)
    reqs = [{"layer": q // 2, "head": q % 2} for q in (0, 1, 2, 3, 0, 3)]
    await drive_stream(dut.clk, env.vq_port, env.vq_pack, reqs, rng, idle=0.3)
    await env.drain()
    env.vsb.assert_caught_one(index=2, log=dut._log)


@cocotb.test()
async def test_watchdog_catches_a_stall(dut):
    """Negative test of the stall watchdog: with the decision output never ready the tracker fills
    and stops taking events; the watchdog must report it, naming what waits."""
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=16, seed=3)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 4))
    env.stall_limit, env.raise_on_stall = 300, False
    await env.start()
    env.dec_port.ready.value = 0
    cocotb.start_soon(drive_stream(dut.clk, env.ev_port, env.ev_pack, trace_events(trace)[:200], test_rng()))
    await with_timeout(env.stalled.wait(), 20_000, "ns")
    assert "offered: event" in env.stall_report and "decision ready 0" in env.stall_report, env.stall_report
    assert env.accepted > env.emitted == 0
    dut._log.info("watchdog: %s", env.stall_report)


@cocotb.test()
async def test_throughput(dut):
    """Input always valid, output always ready, memories never stall and answer in the next cycle:
    events accepted per clock (tracker.events_per_cycle) on the mixed trace at C = 4."""
    n = env_int("CXLKV_THROUGHPUT_EVENTS", 2000)
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=1)
    latency = env_int("CXLKV_MEM_LATENCY", 1)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(P.make_params("hw"), 4))
    rng = test_rng()
    await env.start(latency=latency)
    env.dec_port.ready.value = 1
    events = trace_events(trace)[:n]
    await drive_stream(dut.clk, env.ev_port, env.ev_pack, events, rng)
    await env.drain()
    env.check()
    span = env.last_accept - env.first_accept + 1
    rate = len(events) / span
    dut._log.info("throughput: %d events in %d cycles = %.4f events/cycle", len(events), span, rate)
    p = params()
    config = {"events": len(events), "trace": "mixed 2x2, prefill 32, steps 64", "budget": 4,
              "output_ready": "always", "memory": f"no stalls, read data {latency} cycle(s) after the request",
              "inflight": p.get("inflight", INFLIGHT), "cycles": span, "splices": int(dut.splices.value)}
    suffix = "" if latency == 1 else f"_mem_latency_{latency}"
    report_metric(f"tracker.events_per_cycle{suffix}", round(rate, 6), "events/cycle", config)
    for kind, (total, count) in sorted(env.latency.items()):
        dut._log.info("latency %s: %.2f cycles (accept to decision) over %d events", kind, total / count, count)
        report_metric(f"tracker.latency_cycles{suffix}.{kind}", round(total / count, 3), "cycles",
                      dict(config, events_of_kind=count))


@cocotb.test()
async def test_throughput_prefetch_every_read(dut):
    """Prefetch on every read (W = 2) streamed at full rate: with trigger_all the rule's candidates
    do not depend on the read's decision, so the host sends each read followed by its candidates
    without waiting. Records (events + prefetch inserts) accepted per clock
    (tracker.records_per_cycle_prefetch_w2); the decisions still equal policy.replay(..., window=2).
    The rate shows what the rule "a prefetch insert in flight is not a forwarding source" costs:
    a read of a position prefetched a few records earlier waits for that insert to retire."""
    from cxlkv.models import prefetch as PF
    window = 2
    n = env_int("CXLKV_THROUGHPUT_EVENTS", 2000)
    trace = tracegen.synth("mixed", n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=1)
    events = trace_events(trace)[:n]
    prm = P.make_params("hw", window=window)
    env = TrackerEnv(dut, T.TrackerConfig.from_params(prm, 4))
    await env.start()
    env.dec_port.ready.value = 1
    newest, stream = {}, []
    for ev in events:
        stream.append(("event", ev))
        q = (ev["layer"], ev["head"])
        newest[q] = max(newest.get(q, -1), ev["position"])
        if PF.triggers(not ev["write"], 0, 1, window):
            stream += [("prefetch", {"layer": ev["layer"], "head": ev["head"], "position": p})
                       for p in PF.candidates(ev["position"], window, newest[q])]
    await drive_records(dut, env, stream)
    await env.drain()
    env.check()
    ref = P.replay(_prefix(trace, len(events)), "hw", 4, params=prm, record_victims=True, prefetch_trigger=1)
    assert env.codes == ref.victims.tolist()
    assert int(dut.prefetches.value) == ref.total("prefetches")
    span = env.last_accept - env.first_accept + 1
    rate = len(stream) / span
    waits = int(dut.pf_wait_cycles.value)
    dut._log.info("prefetch every read, W=%d: %d records (%d events) in %d cycles = %.4f records/cycle; "
                  "%d cycles waiting behind a prefetch insert of the same entry", window, len(stream), len(events),
                  span, rate, waits)
    report_metric("tracker.records_per_cycle_prefetch_w2", round(rate, 6), "records/cycle",
                  {"events": len(events), "prefetch_inserts": len(stream) - len(events), "window": window,
                   "trigger": "every read", "trace": "mixed 2x2, prefill 32, steps 64", "budget": 4,
                   "output_ready": "always", "memory": "no stalls, read data 1 cycle after the request",
                   "inflight": params().get("inflight", INFLIGHT), "pf_wait_cycles": waits, "cycles": span})


def _prefix(trace, n):
    """The first n events of a trace, as a trace."""
    from cxlkv.models.trace import Trace
    return Trace(trace.step[:n], trace.layer[:n], trace.head[:n], trace.pos[:n], trace.op[:n], trace.score[:n],
                 trace.n_layers, trace.n_kv_heads).validate()
