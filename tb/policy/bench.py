"""Benchmarks of the policy simulator: replay throughput of the compiled core.

``policy.replay_events_per_s`` (the contract's name) is the ``hw`` policy;
``policy.<p>.replay_events_per_s`` the others. Measured in-process on one core
(numba runs the core single-threaded) on a synthetic ``mixed`` trace of a few
million events at a 10% budget, after a warm-up replay so that JIT compilation
(or loading numba's on-disk cache) is excluded; the figure is the best of
``CXLKV_POLICY_REPEATS`` (default 3) timed replays, the whole ``replay()`` call
(grouping by queue, replay, counters). ``policy.replay_events_per_cpu_s`` (and the
``lru``/``min`` variants) divide by the process's CPU time instead of wall time: on a
shared, loaded machine that is the better estimate of what one free core does. The
1-minute load average at the time is recorded in the config. Environment knobs:
``CXLKV_POLICY_LAYERS`` (default 16), ``CXLKV_POLICY_STEPS`` (default 512).
"""
import os
import time


def measure():
    from cxlkv.models import policy as P
    from cxlkv.models import tracegen
    layers = int(os.environ.get("CXLKV_POLICY_LAYERS", "16"))
    steps = int(os.environ.get("CXLKV_POLICY_STEPS", "512"))
    repeats = int(os.environ.get("CXLKV_POLICY_REPEATS", "3"))
    trace = tracegen.synth("mixed", n_layers=layers, n_kv_heads=4, prefill=512, steps=steps, seed=1)
    entries = P.entries_from_budget(trace, 10)
    config = {"trace": f"synth mixed {layers}x4 queues, prefill 512, {steps} steps, seed 1",
              "events": len(trace), "entries": entries, "budget": "10%", "threads": 1}
    out = []
    for policy, prefix in (("hw", "policy."), ("lru", "policy.lru."), ("min", "policy.min.")):
        P.replay(trace, policy, entries)          # warm-up: JIT compile or cache load
        best_wall = best_cpu = float("inf")
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            P.replay(trace, policy, entries)
            best_wall = min(best_wall, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        cfg = {**config, "policy": policy, "load_average_1min": round(os.getloadavg()[0], 2)}
        out.append({"name": prefix + "replay_events_per_s", "value": round(len(trace) / best_wall),
                    "unit": "events/s", "config": cfg})
        out.append({"name": prefix + "replay_events_per_cpu_s", "value": round(len(trace) / max(best_cpu, 1e-9)),
                    "unit": "events/CPU-s", "config": cfg})
    return out
