"""Benchmark of the simulation harness: sim.harness_cycles_per_s."""
import time

from cxlkv.sw.transport import SimTransport

CONFIG = {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 10}


def measure():
    t = SimTransport(**CONFIG)
    try:
        t.step(1000)                          # warm up
        cycles = 20_000_000
        start = time.perf_counter()
        t.step(cycles)
        elapsed = time.perf_counter() - start
    finally:
        import asyncio
        asyncio.run(t.close())
    return [{"name": "sim.harness_cycles_per_s", "value": round(cycles / elapsed), "unit": "cycles/s",
             "config": {**CONFIG, "design": "controller top (register block, format table, cold list)",
                        "cycles": cycles, "stimulus": "free-running clock, no bus traffic"}}]
