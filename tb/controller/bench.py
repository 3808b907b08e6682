"""Benchmarks of the simulation harness with the tracker in the top.

* ``sim.harness_cycles_per_s``: a free-running clock (no bus traffic, no events).
* ``sim.replay_cycles_per_s`` and ``sim.replay_events_per_s``: a shipped trace driven through
  the event port by the harness's batch operation, measured around the batch alone;
  ``sim.replay_cycles_per_event`` is the cost of the tracker and the tier mover behind it (the
  mover sets the pace: every miss moves an entry, ``done`` in order).
* ``sim.replay_tier_cycles_per_event.lat_<dram>_<flash>``: the direct-port replay again with other
  tier memory latencies (TIER_LAT): the tier mover's pace.
* ``sim.replay_prefetch_cycles_per_event.w<W>_<trigger>``: the direct-port replay with the prefetch
  engine on (PREFETCH.window = W, trigger ``miss`` or ``all`` reads, exact mode: each demand event
  waits until the previous one's candidates are inserted), TIER_LAT at its reset values.
* ``sim.replay_hdm_events_per_s`` and ``sim.replay_hdm_cycles_per_event``: the same trace as the
  host sends it, line 0 of each entry and a hint before each read whose sample is not the
  default, through the HDM decode (harness op ACCESSES).
* ``sim.lines_cycles_per_access``, ``sim.lines_accesses_per_s``: the host data path
  (``host_data=True``, harness op LINES): a synthetic trace's entries as the host sends them, every
  line of each entry with its data (writes quantized in the queue's format, reads dequantized), on
  the small geometry of the data path's tests; the tier mover's pace with one line op per command.

Run: ``.venv/bin/python -m cxlkv.tb.controller.bench`` (or ``make bench``).
"""
import asyncio
import time
from pathlib import Path


from cxlkv.sw.transport import SimTransport, event_records

CONFIG = {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 10}
DESIGN = ("controller top (register block, format table, cold list, tracker with on-chip metadata/link RAMs, "
          "HDM decode, phase detector, tier mover with DRAM/flash models: 2 x 32-bit lines per entry, "
          "TIER_LAT reset values DRAM 2, flash 8)")
TRACE = Path(__file__).resolve().parents[2] / "traces" / "tiny_llama_stdlib_top32.npz"
#: (window, trigger_all) of the sim.replay_prefetch_cycles_per_event figures (exact mode)
PREFETCH_RUNS = ((2, 0), (1, 1))
#: (DRAM, flash) tier memory latencies (TIER_LAT) of the sim.replay_tier_cycles_per_event figures
TIER_LATENCIES = ((0, 0), (8, 64), (20, 200))


def measure():
    from cxlkv.models import policy as P
    from cxlkv.models.trace import load_trace
    from cxlkv.sw.driver import Device

    t = SimTransport(timeout_s=600.0, **CONFIG)
    try:
        t.step(1000)                          # warm up
        cycles = 5_000_000
        start = time.perf_counter()
        t.step(cycles)
        idle_s = time.perf_counter() - start

        trace = load_trace(TRACE)
        entries = P.entries_from_budget(trace, 10)

        async def replay():
            dev = await Device.open(t)
            await dev.write_fields("CONTROL", enable=0)
            await dev.configure(alpha=16384, tau=8, queue_budget=entries, pin_first=0)
            await dev.write_fields("CONTROL", enable=1)
            t.step(10_000)                    # memory sweep and decay-rate divider finish first
            rec = event_records(trace)
            c0 = t.cycles
            s0 = time.perf_counter()
            await t.events(rec)
            out = (time.perf_counter() - s0, t.cycles - c0)

            # again through the HDM decode, from the cleared state
            from cxlkv.models import hdm as MH
            from cxlkv.sw.transport import access_records
            geom = MH.HdmGeometry(CONFIG["n_layers"], CONFIG["n_kv_heads"], 1 << CONFIG["entries_log2"])
            cfg = MH.HdmConfig.packed(geom)
            items = access_records(MH.stimulus_from_trace(trace, geom, cfg, lines="first"))
            await dev.write_fields("CONTROL", enable=0)
            await dev.configure_hdm(cfg)
            await dev.write_fields("CONTROL", enable=1)
            t.step(10_000)
            c0 = t.cycles
            s0 = time.perf_counter()
            dec, _ = await t.accesses(items)
            assert len(dec) == len(trace)
            out = out + (time.perf_counter() - s0, t.cycles - c0, len(items))

            async def direct_run(**fields):
                """The direct-port replay from the cleared state, with ``fields`` (register: field
                values) written while disabled: (cycles of the batch, the counters once settled)."""
                await dev.write_fields("CONTROL", enable=0)
                for reg, values in fields.items():
                    await dev.write_fields(reg, **values)
                await dev.write_fields("CONTROL", enable=1)
                await dev.clear_counters()
                t.step(10_000)
                c0 = t.cycles
                await t.events(rec)
                cycles = t.cycles - c0
                await dev.settle()
                return cycles, await dev.counters()

            # the direct port again with other tier memory latencies (TIER_LAT): the tier mover's pace
            lat = {}
            for dram, flash in TIER_LATENCIES:
                lat[(dram, flash)], c = await direct_run(TIER_LAT={"dram": dram, "flash": flash})
                lat[(dram, flash, "moves")] = {k: c[f"tier_{k}"] for k in ("fills", "writebacks", "clean_drops", "hits")}

            # the prefetch engine in exact mode (TIER_LAT back at its reset values)
            pf = {}
            for window, trigger_all in PREFETCH_RUNS:
                pf[(window, trigger_all)], c = await direct_run(
                    TIER_LAT={"dram": 2, "flash": 8},
                    PREFETCH={"window": window, "trigger": trigger_all, "exact": 1, "overflow_stall": 0,
                              "rate_issues": 0})
                pf[(window, trigger_all, "counts")] = {k: c[k] for k in ("prefetches", "prefetch_hits", "read_hits",
                                                                          "tier_fills")}
            await dev.write_fields("PREFETCH", window=0)
            return out + (lat, pf)
        replay_s, replay_cycles, hdm_s, hdm_cycles, n_items, lat, pf = asyncio.run(replay())
    finally:
        asyncio.run(t.close())
    n = len(trace)
    common = {**CONFIG, "design": DESIGN}
    rcfg = {**common, "trace": TRACE.name, "events": n, "entries": entries,
            "stimulus": "batch event op, decisions drained every cycle (socket transfer included)"}
    hcfg = {**rcfg, "items": n_items, "stimulus": "harness op ACCESSES: line 0 of each entry (512-byte entries, "
            "packed window), a sample hint before each read whose sample is not 0, routes and decisions drained "
            "every cycle (socket transfer included)"}
    return [
        {"name": "sim.harness_cycles_per_s", "value": round(cycles / idle_s), "unit": "cycles/s",
         "config": {**common, "cycles": cycles, "stimulus": "free-running clock, no bus traffic"}},
        {"name": "sim.replay_cycles_per_s", "value": round(replay_cycles / replay_s), "unit": "cycles/s", "config": rcfg},
        {"name": "sim.replay_events_per_s", "value": round(n / replay_s), "unit": "events/s", "config": rcfg},
        {"name": "sim.replay_cycles_per_event", "value": round(replay_cycles / n, 3), "unit": "cycles/event",
         "config": rcfg},
        {"name": "sim.replay_hdm_events_per_s", "value": round(n / hdm_s), "unit": "events/s", "config": hcfg},
        {"name": "sim.replay_hdm_cycles_per_event", "value": round(hdm_cycles / n, 3), "unit": "cycles/event",
         "config": hcfg},
    ] + [
        {"name": f"sim.replay_tier_cycles_per_event.lat_{d}_{f}", "value": round(lat[(d, f)] / n, 3),
         "unit": "cycles/event", "config": {**rcfg, "tier_lat_dram": d, "tier_lat_flash": f,
                                              "tier": lat[(d, f, "moves")]}}
        for d, f in TIER_LATENCIES] + [
        {"name": f"sim.replay_prefetch_cycles_per_event.w{w}_{'all' if a else 'miss'}", "value": round(pf[(w, a)] / n, 3),
         "unit": "cycles/event", "config": {**rcfg, "prefetch_window": w, "prefetch_trigger_all": a, "exact": 1,
                                              "counts": pf[(w, a, "counts")]}}
        for w, a in PREFETCH_RUNS] + measure_lines()


#: the host data path figure: the geometry of tests/test_datapath.py (its harness build is shared)
LINES_CONFIG = {"n_layers": 2, "n_kv_heads": 2, "entries_log2": 6, "max_budget": 4, "host_data": True}
#: queue -> storage format of the LINES run (fp16, fp8, int8, int4)
LINES_FORMATS = (0, 1, 2, 3)
LINES_BUDGET = 3


def measure_lines():
    """``sim.lines_cycles_per_access``: every line of every entry of a synthetic ``mixed`` trace through
    the host data path (writes with data, reads back), QUEUE_BUDGET 3 of 4 frames, TIER_LAT at reset."""
    import numpy as np

    from cxlkv.models import hdm as MH
    from cxlkv.models.tracegen import synth
    from cxlkv.sw.driver import Device
    from cxlkv.sw.transport import access_records

    c = LINES_CONFIG
    trace = synth("mixed", n_layers=c["n_layers"], n_kv_heads=c["n_kv_heads"], prefill=16, steps=48, seed=1)
    geom = MH.HdmGeometry(c["n_layers"], c["n_kv_heads"], 1 << c["entries_log2"])
    cfg = MH.HdmConfig.packed(geom)
    items = MH.stimulus_from_trace(trace, geom, cfg, lines="all")
    rec = access_records(items)
    rng = np.random.default_rng(1)
    data = (rng.standard_normal((len(rec), 32)) * 0.5).astype(np.float16).view(np.uint16)
    t = SimTransport(timeout_s=600.0, **c)
    try:
        async def run():
            dev = await Device.open(t)
            await dev.write_fields("CONTROL", enable=0)
            await dev.configure(queue_budget=LINES_BUDGET, pin_first=0)
            await dev.configure_hdm(cfg)
            for q, f in enumerate(LINES_FORMATS):
                await dev.set_format(q, f)
            await dev.write_fields("CONTROL", enable=1)
            t.step(10_000)
            c0 = t.cycles
            s0 = time.perf_counter()
            _, _, rsp = await t.lines(rec, data)
            out = (t.cycles - c0, time.perf_counter() - s0, len(rsp))
            await dev.settle()
            counts = await dev.counters()
            return out + ({k: counts[k] for k in ("tier_fills", "tier_writebacks", "tier_bypasses", "evictions")},)
        cycles, secs, n_acc, moves = asyncio.run(run())
    finally:
        asyncio.run(t.close())
    conf = {**c, "trace": "tracegen mixed, 2 x 2, prefill 16, steps 48, seed 1", "events": len(trace),
            "accesses": n_acc, "queue_budget": LINES_BUDGET, "pin_first": 0, "formats": "queue 0..3: fp16, fp8, int8, int4",
            "stimulus": "harness op LINES, every line of each entry (line 0 first), responses drained every cycle",
            "tier_lat": "reset (DRAM 2, flash 8)", "moves": moves}
    return [{"name": "sim.lines_cycles_per_access", "value": round(cycles / n_acc, 3), "unit": "cycles/access",
             "config": conf},
            {"name": "sim.lines_accesses_per_s", "value": round(n_acc / secs), "unit": "accesses/s", "config": conf}]



if __name__ == "__main__":
    for metric in measure():
        print(f"{metric['name']:32s} {metric['value']:>14,} {metric['unit']}")
