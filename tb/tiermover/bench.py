"""Benchmarks of the tier mover (cocotb on Verilator, test_throughput): ``tiermover.commands_per_cycle.*``.

Two mixes at fixed latencies (DRAM 2, flash 8, grant 2 cycles; memories and ``done`` always ready;
commands offered back to back), after every frame has been filled once:

* ``hit_heavy``: 90 % hits, the rest misses that evict (30 % of commands are writes);
* ``evict_heavy``: every command a miss that evicts (30 % writes: write misses allocate without a
  fill, and their frames are written back when evicted later).

Seed 1 (the stimulus is random). A figure of the configuration of ``tb/tiermover/__init__.py`` (4 lines per entry), not a goal.
"""
from cxlkv.tb.runner import run
from cxlkv.tb.tiermover import BENCHES

LATENCIES = {"CXLKV_TM_DRAM_LATENCY": "2", "CXLKV_TM_FLASH_LATENCY": "8", "CXLKV_TM_GRANT_LATENCY": "2"}


def measure(commands: int = 2000):
    out = []
    for mix in ("hit", "evict"):
        res = run(BENCHES[0], testcase="test_throughput",
                  env={**LATENCIES, "CXLKV_TM_MIX": mix, "CXLKV_TM_COMMANDS": str(commands), "CXLKV_SEED": "1"})
        if not res.passed:
            raise RuntimeError(f"tier mover throughput test ({mix}) failed; see {res.build_dir}/sim.log")
        out += list(res.metrics.values())
    return out


if __name__ == "__main__":
    import json
    for rec in measure():
        print(json.dumps(rec))
