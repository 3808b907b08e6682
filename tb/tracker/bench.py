"""Benchmarks of the tracker.

* ``tracker.events_per_cycle``: cocotb on Verilator (test_throughput): events accepted per clock
  with the decision output always ready and a metadata memory that never stalls and answers in
  the next cycle, on the whole mixed 2 x 2 trace of the bench; ``..._mem_latency_8``: the same
  with read data 8 cycles after the request (what the default 32 events in flight hide).
* ``tracker.records_per_cycle_prefetch_w2``: the same with ``hw``'s prefetch on every read
  (W = 2): each event followed by the rule's prefetch inserts, streamed without waiting for
  decisions; records (events + inserts) accepted per clock, decisions equal to policy.replay.
* ``tracker.victim_topk_agreement``: on the ``mixed`` family, the fraction of the tracker's
  victims that lie within the top 5 % (at least one) of their queue's evictable resident entries
  ranked by the exact ``hw`` order ``(key, tie)`` (docs/policy.md, "Victim rule, as an order"),
  the order recomputed from scratch at every eviction (a full sort, independent of the bucket
  ring). The victims are the golden model's; tests/test_tracker.py and the cocotb bench show
  that they are the RTL's and policy.replay's. Since hw is exact, the figure must be 1.0: it
  checks the ring, not an approximation. Also reported: ``tracker.victim_rank0_fraction``
  (victim = the exact order's first).
* ``tracker.coverage.*``: the functional coverage bins of the random cocotb test (queue full,
  evictions from the expired list and from a bucket, pinned hits, same-entry bursts, dense-mode
  events, victim answered / none / locked, step errors, bad events), from one run of seed
  ``COVERAGE_SEED``.
"""
from __future__ import annotations

import math
import os

from cxlkv.models import policy as P
from cxlkv.models import tracegen
from cxlkv.models import tracker as T

TOPK_FRACTION = 0.05

#: the cocotb seed of the coverage run (tracker.coverage.*)
COVERAGE_SEED = 1


def victim_topk_agreement(trace, budget: int, params: P.PolicyParams) -> dict:
    cfg = T.TrackerConfig.from_params(params, budget)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 1,
                           T.ring_size(T.buckets_needed(cfg)))
    seq = [0] * trace.n_queues
    tie: dict = {}                        # (q, p) -> +seq (normal-mode touch) or -seq (dense)
    key: dict = {}                        # (q, p) -> bucket key of its last touch
    resident: list[set] = [set() for _ in range(trace.n_queues)]
    victims = within = rank0 = 0
    for ev in T.events_from_trace(trace):
        q, p = ev.queue, ev.position
        d = model.event(ev)
        if d.no_victim:
            continue
        seq[q] += 1
        tie[(q, p)] = -seq[q] if model.queues[q].dense else seq[q]
        if d.victim_valid:
            cands = [x for x in resident[q] if x >= cfg.pinned]
            order = sorted(cands, key=lambda x: (key[(q, x)], tie[(q, x)]))
            rank = order.index(d.victim)
            k = max(1, math.ceil(TOPK_FRACTION * len(order)))
            victims += 1
            within += rank < k
            rank0 += rank == 0
            resident[q].discard(d.victim)
        resident[q].add(p)
        key[(q, p)] = model.key_of(q, p)
    return {"victims": victims, "within_topk": within, "rank0": rank0}


def measure():
    from cxlkv.tb.runner import run
    from cxlkv.tb.tracker import BENCHES
    out = []
    n = os.environ.get("CXLKV_THROUGHPUT_EVENTS", "20000")
    # one event per clock with next-cycle memory; and with 8-cycle read latency (32 in flight)
    for latency in (1, 8):
        res = run(BENCHES[0], testcase="test_throughput",
                  env={"CXLKV_THROUGHPUT_EVENTS": n, "CXLKV_MEM_LATENCY": str(latency)})
        if not res.passed:
            raise RuntimeError(f"throughput test failed; see {res.build_dir}/sim.log")
        out += list(res.metrics.values())
    # prefetch on every read (W = 2) streamed at full rate: records (events + inserts) per clock
    res = run(BENCHES[0], testcase="test_throughput_prefetch_every_read", env={"CXLKV_THROUGHPUT_EVENTS": n})
    if not res.passed:
        raise RuntimeError(f"prefetch throughput test failed; see {res.build_dir}/sim.log")
    out += list(res.metrics.values())
    # functional coverage bins, from a fixed seed so that two runs of the bench report the same
    # bins (the regression draws a new seed each run)
    cov = run(BENCHES[0], testcase="test_random_defaults", seed=COVERAGE_SEED)
    if not cov.passed:
        raise RuntimeError(f"random test failed; see {cov.build_dir}/sim.log")
    out += list(cov.metrics.values())
    n_layers, n_heads, prefill, steps = 4, 2, 512, 512
    trace = tracegen.synth("mixed", n_layers=n_layers, n_kv_heads=n_heads, prefill=prefill, steps=steps, seed=0)
    params = P.make_params("hw")
    budget = P.entries_from_budget(trace, 10)
    r = victim_topk_agreement(trace, budget, params)
    config = {"family": "mixed", "geometry": f"{n_layers}x{n_heads}", "prefill": prefill, "steps": steps,
              "budget": budget, "budget_pct": 10, "top": TOPK_FRACTION, "victims": r["victims"],
              "order": "exact hw (key, tie), full sort per eviction"}
    out.append({"name": "tracker.victim_topk_agreement", "value": round(r["within_topk"] / r["victims"], 6),
                "unit": "fraction", "config": config})
    out.append({"name": "tracker.victim_rank0_fraction", "value": round(r["rank0"] / r["victims"], 6),
                "unit": "fraction", "config": config})
    return out


def fpga(select="ring"):
    """``fpga.ulx3s_85f.tracker.*``: the tracker alone between registers on the ULX3S 85F
    (``python -m cxlkv.tb.tracker.bench --fpga [--select matrix]``; a place and route of 10 to 50
    minutes, not part of ``make bench``). With ``select`` = "matrix" the figures are named
    ``fpga.ulx3s_85f.tracker_matrix.*``."""
    from cxlkv.hdl.tracker import Tracker
    from cxlkv.tb.fpga.bench import measure_block
    name = "tracker" if select == "ring" else f"tracker_{select}"
    return measure_block(name, lambda: Tracker(2, 2, 64, 128, max_budget=16, select=select),
                         f"Tracker(2, 2, 64, 128, max_budget=16, select={select!r})")


def fpga_board_tracker(board="ulx3s-85f"):
    """``fpga.<board>.tracker_board.*``: the ULX3S board top's own tracker (its geometry, slots and
    selection: hdl/boards/ulx3s.py ``CONTROLLER``) alone between registers on ``board``, built with
    the board top's Yosys script (``python -m cxlkv.tb.tracker.bench --fpga --board-geometry``; one
    place and route of 10 to 30 minutes, not part of ``make bench``). It separates what the tracker
    reaches by itself from what the board top reaches around it (docs/fpga.md, "Figures")."""
    from cxlkv.sw.fpga import YOSYS_AFTER_READ
    from cxlkv.tb.fpga.bench import measure_block
    from cxlkv.tb.fpga.blocks import board_controller
    ctl = board_controller()
    g = ctl.geom
    design = (f"Tracker({g.n_layers}, {g.n_kv_heads}, {g.n_positions}, {g.n_buckets}, max_budget={ctl.max_budget}, "
              f"select={ctl.tracker_select!r}), the ULX3S board top's")
    return measure_block("tracker_board", ctl._new_tracker, design, board=board, script_after_read=YOSYS_AFTER_READ)


if __name__ == "__main__":
    import json
    import sys
    args = sys.argv[1:]
    select = args[args.index("--select") + 1] if "--select" in args else "ring"
    if "--fpga" in args:
        recs = fpga_board_tracker() if "--board-geometry" in args else fpga(select)
    else:
        recs = measure()
    for rec in recs:
        print(json.dumps(rec))
