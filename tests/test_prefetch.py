"""The prefetch rule and the cycle-accurate engine model; the policy simulator uses the same rule.

* the rule: trigger, window bounds, candidate order;
* the engine model: invariants under random stimulus (hypothesis): every fetch is a
  candidate of a request, never a duplicate of one in flight, the rate limit holds in
  every aligned period, counters balance, nothing is lost silently;
* one definition: a pure-Python LRU replay built on ``models.prefetch`` equals the
  simulator's ``hw`` (in its exact-LRU configuration) with prefetch, for both triggers;
  and the engine, drained after every access in an ideal environment, issues exactly
  the rule's non-resident candidates, in the rule's order.
"""
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cxlkv.models import policy as P
from cxlkv.models import prefetch as M
from cxlkv.models.tracegen import synth


@pytest.mark.parametrize("pos,window,newest,bounds", [
    (10, 2, 20, (8, 12)),
    (1, 4, 20, (0, 5)),          # clipped at 0
    (10, 4, 12, (6, 12)),        # clipped at the newest position
    (10, 4, 3, (6, 10)),         # newest below pos (a stale newest): never below pos
    (0, 0, 0, (0, 0)),
    (5, 255, 5, (0, 5)),
])
def test_window_bounds(pos, window, newest, bounds):
    assert M.window_bounds(pos, window, newest) == bounds


def test_candidates_skip_the_read_position_in_ascending_order():
    assert M.candidates(10, 2, 20) == [8, 9, 11, 12]
    assert M.candidates(0, 2, 1) == [1]
    assert M.candidates(7, 3, 7) == [4, 5, 6]
    assert M.candidates(4, 0, 9) == []
    lo, hi = M.window_bounds(10, 2, 20)
    seq, c = [], M.first_candidate(lo, 10)
    while c <= hi:
        seq.append(c)
        c = M.next_candidate(c, 10)
    assert seq == M.candidates(10, 2, 20)


@pytest.mark.parametrize("is_read,hit,trigger_all,window,fires", [
    (1, 0, 0, 2, True), (1, 1, 0, 2, False), (1, 1, 1, 2, True), (1, 0, 1, 2, True),
    (0, 0, 1, 2, False), (0, 0, 0, 2, False), (1, 0, 1, 0, False),
])
def test_trigger(is_read, hit, trigger_all, window, fires):
    assert M.triggers(is_read, hit, trigger_all, window) is fires


# ---------------------------------------------------------------------------------------------
# the engine model under random stimulus

def simulate(cfgs, accesses, *, depth, tags, seed, fetch_ready=0.7, ins_ready=0.7, latency=6, resident_p=0.3,
             cycles_after=400, lookups=2, chk_ready=0.8, lookup_latency=3):
    """Drive the model with random environment responses; return (engine, fetch log, per-cycle issue log)."""
    rng = np.random.default_rng(seed)
    eng = M.PrefetchEngine(n_queues=4, pos_width=12, depth=depth, tags=tags, lookups=lookups)
    fetches, issues, mover, pending_cpl = [], [], [], None
    outstanding = {}                      # tag -> (queue, pos): fetched, completion not yet taken
    acc = list(accesses)
    cycle = 0
    asked = []                            # [ready_cycle, (queue, pos)] lookups in request order
    answers = {}
    while acc or cycle < len(accesses) + cycles_after:
        cfg = cfgs[min(cycle // 200, len(cfgs) - 1)]
        a = acc[0] if acc else None
        if pending_cpl is None and mover and mover[0][0] <= cycle:
            pending_cpl = mover.pop(0)[1]
        rsp_valid = bool(asked) and asked[0][0] <= cycle
        res = answers.setdefault(asked[0][1], int(rng.random() < resident_p)) if rsp_valid else 0
        inp = M.Inputs(acc_valid=int(a is not None), acc_queue=a[0] if a else 0, acc_pos=a[1] if a else 0,
                       acc_write=a[2] if a else 0, acc_hit=a[3] if a else 0, chk_ready=int(rng.random() < chk_ready),
                       rsp_valid=int(rsp_valid), rsp_resident=res,
                       fetch_ready=int(rng.random() < fetch_ready), cpl_valid=int(pending_cpl is not None),
                       cpl_tag=pending_cpl or 0, ins_ready=int(rng.random() < ins_ready))
        out = eng.outputs(cfg, inp)
        before = dict(eng.counters)
        s2 = eng.s2
        eng.tick(cfg, inp)
        if out.acc_ready and a is not None:
            acc.pop(0)
        if rsp_valid and out.rsp_ready:
            asked.pop(0)
        if out.chk_valid and inp.chk_ready:
            asked.append((cycle + 1 + int(rng.integers(0, lookup_latency)), (out.chk_queue, out.chk_pos)))
        fired = out.fetch_valid and inp.fetch_ready
        if inp.cpl_valid and out.cpl_ready:
            assert out.ins_valid and (out.ins_queue, out.ins_pos) == outstanding.pop(inp.cpl_tag)
            pending_cpl = None
        if fired:
            assert (out.fetch_queue, out.fetch_pos) == s2
            assert s2 not in outstanding.values(), f"{s2} fetched again while in flight"
            outstanding[out.fetch_tag] = s2
            fetches.append((cycle, out.fetch_queue, out.fetch_pos, out.fetch_tag))
            mover.append((cycle + latency, out.fetch_tag))
        issues.append((cfg, int(fired)))
        assert eng.counters["prefetches"] - before["prefetches"] == int(fired)
        cycle += 1
    return eng, fetches, issues


def accesses_strategy():
    acc = st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 1), st.integers(0, 1))
    return st.lists(acc, min_size=1, max_size=150)


cfg_strategy = st.builds(M.PrefetchConfig, window=st.integers(0, 8), trigger_all=st.integers(0, 1),
                         overflow_stall=st.integers(0, 1), rate_issues=st.integers(0, 4),
                         rate_period=st.integers(0, 12), enable=st.integers(0, 1))


@settings(max_examples=60, deadline=None)
@given(accesses=accesses_strategy(), cfgs=st.lists(cfg_strategy, min_size=1, max_size=3),
       depth=st.integers(1, 4), tags=st.integers(1, 4), lookups=st.integers(1, 3), seed=st.integers(0, 1 << 30))
def test_engine_invariants(accesses, cfgs, depth, tags, lookups, seed):
    eng, fetches, issues = simulate(cfgs, accesses, depth=depth, tags=tags, seed=seed, lookups=lookups)
    c = eng.counters
    # drained: every request either finished or was dropped; every lookup ended in exactly one outcome
    assert not eng.slots and eng.c0 is None and not eng.lq and eng.s2 is None
    assert c["lookups"] == c["skip_resident"] + c["skip_inflight"] + c["prefetches"]
    assert c["prefetches"] == len(fetches) == c["inserts"] and all(e is None for e in eng.inflight)
    assert c["drops"] <= c["requests"] and c["bad_completions"] == 0 and c["bad_responses"] == 0
    assert not eng.lq and eng.c0 is None
    # (no position is fetched again while in flight, and every completion inserts what its tag
    # fetched: asserted cycle by cycle in simulate())
    # rate limit: issues within each aligned period never exceed N (checked when one config held)
    if len(cfgs) == 1 and cfgs[0].rate_issues:
        period = max(cfgs[0].rate_period, 1)
        counts = [sum(f for _, f in issues[k:k + period]) for k in range(0, len(issues), period)]
        assert max(counts) <= cfgs[0].rate_issues


def test_stall_mode_never_drops_and_counts_stalled_cycles():
    acc = [(0, 100 + 20 * k, 0, 0) for k in range(12)]
    eng, fetches, _ = simulate([M.PrefetchConfig(window=4, trigger_all=1, overflow_stall=1, rate_issues=1,
                                                 rate_period=8)], acc, depth=2, tags=2, seed=1, resident_p=0.0)
    assert eng.counters["drops"] == 0 and eng.counters["stall_cycles"] > 0
    assert eng.counters["requests"] == 12


def test_drop_mode_counts_dropped_requests_and_positions():
    acc = [(0, 100 + 20 * k, 0, 0) for k in range(12)]
    eng, fetches, _ = simulate([M.PrefetchConfig(window=4, trigger_all=1, rate_issues=1, rate_period=8)], acc,
                               depth=2, tags=2, seed=1, resident_p=0.0)
    c = eng.counters
    assert c["drops"] > 0 and c["stall_cycles"] == 4       # only the sweep after reset (4 queues)
    # newest tracks the accesses: every window is [P-4, P] here (P is the newest), 4 candidates each
    assert c["lookups"] + c["drop_positions"] == 4 * c["requests"]


def test_after_reset_the_newest_table_is_swept_and_the_input_waits():
    eng = M.PrefetchEngine(n_queues=4)
    eng.newest = [9, 9, 9, 9]
    cfg = M.PrefetchConfig(window=2)
    for k in range(4):
        assert eng.outputs(cfg, M.Inputs(acc_valid=1)).acc_ready == 0
        eng.tick(cfg, M.Inputs(acc_valid=1))
    assert eng.newest == [0, 0, 0, 0] and eng.counters["stall_cycles"] == 4
    assert eng.outputs(cfg, M.Inputs(acc_valid=1)).acc_ready == 1


def test_completion_of_an_idle_tag_is_counted_and_inserts_nothing():
    eng = M.PrefetchEngine(n_queues=4, tags=2)
    cfg = M.PrefetchConfig()
    for _ in range(4):
        eng.tick(cfg, M.Inputs())
    out = eng.outputs(cfg, M.Inputs(cpl_valid=1, cpl_tag=1))
    assert out.cpl_ready == 1 and out.ins_valid == 0
    eng.tick(cfg, M.Inputs(cpl_valid=1, cpl_tag=1))
    assert eng.counters["bad_completions"] == 1 and eng.counters["inserts"] == 0


# ---------------------------------------------------------------------------------------------
# one definition: the simulator, a reference built on the rule, and the engine agree

def lru_prefetch_reference(trace, capacity, window, trigger_all):
    """LRU + prefetch with models.prefetch's rule, prefetches inserted at once (the simulator's limit)."""
    tot = dict(reads=0, read_hits=0, evictions=0, prefetches=0, prefetch_hits=0)
    queues = {}
    for q, p, op in zip(trace.queue.tolist(), trace.pos.tolist(), trace.op.tolist()):
        res, newest = queues.setdefault(q, [OrderedDict(), -1])
        newest = max(newest, p)
        queues[q][1] = newest
        hit = p in res

        def insert(pp, prefetched):
            if len(res) >= capacity:
                res.popitem(last=False)
                tot["evictions"] += 1
            res[pp] = prefetched

        if op == 0:
            tot["reads"] += 1
            if hit:
                tot["read_hits"] += 1
                tot["prefetch_hits"] += res[p]
        if hit:
            res[p] = False
            res.move_to_end(p)
        else:
            insert(p, False)
        if M.triggers(op == 0, hit, trigger_all, window):
            for pp in M.candidates(p, window, newest):
                if pp not in res:
                    insert(pp, True)
                    tot["prefetches"] += 1
    return tot


EXACT_LRU = dict(hw_rank_tau=0, hw_rank_tau_long=0, hw_pinned=0)


@pytest.mark.parametrize("family,capacity,window", [("recent", 16, 2), ("needle", 24, 4), ("mixed", 8, 1),
                                                    ("heads", 12, 8)])
@pytest.mark.parametrize("trigger", [M.TRIGGER_READ, M.TRIGGER_MISS])
def test_simulator_uses_the_rule(family, capacity, window, trigger):
    t = synth(family, n_layers=1, n_kv_heads=2, prefill=48, steps=24, seed=4)
    ref = lru_prefetch_reference(t, capacity, window, trigger)
    s = P.replay(t, "hw", capacity, prefetch_trigger=trigger, window=window, **EXACT_LRU).summary()
    assert {k: s[k] for k in ref} == ref
    assert ref["prefetches"] > 0


def test_simulator_refuses_an_unknown_trigger():
    from cxlkv.errors import CxlkvError
    t = synth("recent", n_layers=1, n_kv_heads=1, prefill=8, steps=2)
    with pytest.raises(CxlkvError, match="prefetch_trigger"):
        P.replay(t, "hw", 4, prefetch_trigger=2, window=1)


def test_engine_drained_after_each_access_fetches_the_rules_candidates():
    """In an ideal environment (one access at a time, drained, lookups answered the next clock, every
    fetch completing and inserting at once) the engine issues, for each access, exactly the rule's
    candidates that were not resident when their answers came, in the rule's order."""
    t = synth("mixed", n_layers=1, n_kv_heads=2, prefill=40, steps=12, seed=7)
    for trigger, window in ((M.TRIGGER_READ, 3), (M.TRIGGER_MISS, 6)):
        cfg = M.PrefetchConfig(window=window, trigger_all=trigger)
        eng = M.PrefetchEngine(n_queues=2, pos_width=12, depth=4, tags=4)
        for _ in range(2):
            eng.tick(cfg, M.Inputs())
        resident = {0: OrderedDict(), 1: OrderedDict()}
        newest = {0: -1, 1: -1}
        capacity = 10

        def touch(q, p):
            r = resident[q]
            if p in r:
                r.move_to_end(p)
                return
            if len(r) >= capacity:
                r.popitem(last=False)
            r[p] = True

        total = 0
        for q, p, op in zip(t.queue.tolist(), t.pos.tolist(), t.op.tolist()):
            hit = int(p in resident[q])
            newest[q] = max(newest[q], p)
            inp = M.Inputs(acc_valid=1, acc_queue=q, acc_pos=p, acc_write=op, acc_hit=hit)
            assert eng.outputs(cfg, inp).acc_ready
            eng.tick(cfg, inp)
            touch(q, p)
            looked, fetched, asked, cpl = [], [], [], None
            for _ in range(4 * window + 16):
                head = asked[0] if asked else None
                inp = M.Inputs(chk_ready=1, rsp_valid=int(head is not None),
                               rsp_resident=int(head is not None and head[1] in resident[head[0]]), fetch_ready=1,
                               ins_ready=1, cpl_valid=int(cpl is not None), cpl_tag=cpl or 0)
                out = eng.outputs(cfg, inp)
                eng.tick(cfg, inp)
                if inp.cpl_valid and out.ins_valid:
                    touch(out.ins_queue, out.ins_pos)
                if head is not None and out.rsp_ready:
                    looked.append((head[1], bool(inp.rsp_resident)))
                    asked.pop(0)
                if out.chk_valid:
                    asked.append((out.chk_queue, out.chk_pos))
                cpl = out.fetch_tag if out.fetch_valid else None
                if out.fetch_valid:
                    fetched.append(out.fetch_pos)
            want = M.candidates(p, window, newest[q]) if M.triggers(op == 0, hit, trigger, window) else []
            assert [c for c, _ in looked] == want
            assert fetched == [c for c, was_resident in looked if not was_resident]
            total += len(fetched)
        assert total > 0


def test_policy_figures_tables_agree_with_direct_replays():
    """The docs/policy.md prefetch tables come from tb/prefetch/policy_figures.py: its figures are
    the replay's own (checked on a tiny trace), and every cell of the table is present."""
    from cxlkv.tb.prefetch import policy_figures as F
    t = synth("dense_early", n_layers=2, n_kv_heads=1, prefill=64, steps=16, seed=1)
    rows = F.measure([1, 2], [20], ["read", "miss"], log=lambda *_: None, traces=[("tiny", lambda: t)])
    assert len(rows) == 4
    c = P.entries_from_budget(t, 20)
    base = P.replay(t, "hw", c).summary()
    for r in rows:
        s = P.replay(t, "hw", c, window=r["window"],
                     prefetch_trigger=M.TRIGGER_READ if r["trigger"] == "read" else M.TRIGGER_MISS).summary()
        assert r["hit"] == s["hit_rate"] and r["gain"] == s["hit_rate"] - base["hit_rate"]
        assert r["acc"] == s["prefetch_accuracy"] and r["bytes_x"] == s["bytes_moved"] / base["bytes_moved"]
    md = F.markdown(rows, [20], ["read", "miss"])
    assert md.count("| tiny | 1 |") == 2 and md.count("| tiny | 2 |") == 2
