"""Benchmarks of the tier mover (cocotb on Verilator, test_throughput): ``tiermover.commands_per_cycle.*``.

Two mixes at fixed latencies (DRAM 2, flash 8, grant 2 cycles; memories and ``done`` always ready;
commands offered back to back), after every frame has been filled once:

* ``hit_heavy``: 90 % hits, the rest misses that evict (30 % of commands are writes);
* ``evict_heavy``: every command a miss that evicts (30 % writes: write misses allocate without a
  fill, and their frames are written back when evicted later).

Both in the bench configuration (``tb/tiermover/__init__.py``: 3 queues x 3 frames, 4 lines per
entry, depth 8, 4-line buffers) and, as ``*_deep``, with 16 frames per queue of 64 positions, a
16-job ring and 16-line buffers (``DEEP``: one more Verilator build, only here). Seed 1 (the stimulus is random). Figures, not goals.

With host line operations (``host_ops``, the bench configuration ``PARAMS_HOST``): the same two mixes
with a host op on every command (30 % writes, any line; ``host_rsp`` and ``host_wdata`` never wait):
``tiermover.host_ops_per_cycle.*`` (one op per command, so also commands per cycle).
"""
from cxlkv.tb.runner import CocotbBench, run
from cxlkv.tb.tiermover import BENCHES, PARAMS, PARAMS_HOST, _make_dut

LATENCIES = {"CXLKV_TM_DRAM_LATENCY": "2", "CXLKV_TM_FLASH_LATENCY": "8", "CXLKV_TM_GRANT_LATENCY": "2"}
DEEP = CocotbBench("tiermover", _make_dut, "cxlkv.tb.tiermover.test_tiermover",
                   {**PARAMS, "n_positions": 64, "frames_per_queue": 16, "depth": 16, "buf_lines": 16})


def measure(commands: int = 2000):
    out = []
    host = next(b for b in BENCHES if b.params == PARAMS_HOST)
    for bench, suffix in ((BENCHES[0], ""), (DEEP, "_deep"), (host, "")):
        for mix in ("hit", "evict"):
            res = run(bench, testcase="test_throughput",
                      env={**LATENCIES, "CXLKV_TM_MIX": mix, "CXLKV_TM_COMMANDS": str(commands),
                           "CXLKV_SEED": "1"})
            if not res.passed:
                raise RuntimeError(f"tier mover throughput test ({mix}, {bench.config_id}) failed; "
                                   f"see {res.build_dir}/sim.log")
            for rec in res.metrics.values():
                out.append({**rec, "name": rec["name"] + suffix})
    return out


if __name__ == "__main__":
    import json
    for rec in measure():
        print(json.dumps(rec))
