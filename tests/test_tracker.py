"""The tracker's golden model (cxlkv.models.tracker) against policy.replay's hw, event for event."""
import pytest

from cxlkv.models import policy as P
from cxlkv.models import tracegen
from cxlkv.models import tracker as T

CASES = [
    ("mixed", 4, {}), ("mixed", 12, {"hw_bucket_bits": 0}), ("mixed", 6, {"hw_pinned": 2}),
    ("dense_early", 4, {}), ("dense_early", 8, {"hw_rank_tau": 4, "hw_bucket_bits": 1}),
    ("dense_early", 6, {"hw_alpha": 0, "hw_tau": 3, "hw_write_sample": 900, "hw_read_credit": 70}),
    ("mixed", 2, {"hw_pinned": 3}),            # C <= pinned: misses with nothing evictable
    ("mixed", 5, {"hw_rank_tau_long": 0}),     # no dense mode
]


@pytest.mark.parametrize("family,budget,over", CASES)
def test_model_victims_equal_policy_replay(family, budget, over):
    trace = tracegen.synth(family, n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=budget)
    params = P.make_params("hw", **over)
    ref = P.replay(trace, "hw", budget, params=params, record_victims=True)
    cfg = T.TrackerConfig.from_params(params, budget)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 1,
                           T.ring_size(T.buckets_needed(cfg)))
    got = [model.event(e).code for e in T.events_from_trace(trace)]
    assert got == ref.victims.tolist()
    assert model.counters["evictions"] == ref.total("evictions")
    assert model.counters["read_hits"] == ref.total("read_hits")
    assert model.counters["no_victim"] == ref.total("no_victim")
    if over.get("hw_pinned", 0) >= budget:
        assert model.counters["no_victim"] > 0
    else:
        assert model.counters["evictions"] > 0


def test_dense_mode_is_exercised():
    trace = tracegen.synth("dense_early", n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=4)
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 4)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 1, 128)
    dense_seen = False
    for e in T.events_from_trace(trace):
        model.event(e)
        dense_seen |= any(q.dense for q in model.queues)
    assert dense_seen


def test_larger_ring_is_equivalent():
    trace = tracegen.synth("mixed", n_layers=1, n_kv_heads=2, prefill=32, steps=64, seed=3)
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 6)
    a = [d.code for d in T.replay_model(trace, cfg)]
    b = [d.code for d in T.replay_model(trace, cfg, n_buckets=1024)]
    assert a == b


def test_victim_request_is_the_next_misses_victim():
    trace = tracegen.synth("mixed", n_layers=1, n_kv_heads=2, prefill=32, steps=32, seed=5)
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 6)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 1, 128)
    events = T.events_from_trace(trace)
    checked = 0
    for e in events:
        ans = model.victim_request(e.queue)
        qs = model.queues[e.queue]
        d = model.event(e)
        # a miss in the same step (no splice) with a full queue evicts exactly the answer
        if d.victim_valid and qs.cur_step == e.step and ans.valid and ans.victim != e.position:
            checked += 1
            assert d.victim == ans.victim
    assert checked > 10
    assert model.victim_request(0, locked=True) == T.VictimAnswer(0, 0, 1, 0)
    assert model.victim_request(1).valid == 1
    empty = T.TrackerModel(cfg, 2, 64, 128)
    assert empty.victim_request(1) == T.VictimAnswer(1, 0, 0, 0)


def test_backward_step_is_clamped_and_counted():
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 2)
    m = T.TrackerModel(cfg, 1, 16, 128)
    m.event(T.Event(0, 1, 0, 100, 10))
    m.event(T.Event(0, 2, 0, 100, 5))
    assert m.counters["step_errors"] == 1
    assert m.meta[(0, 2)][1] == 10


def test_cfg_error_when_ring_too_small():
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_bucket_bits=0), 2)
    assert T.buckets_needed(cfg) == 711
    assert T.TrackerModel(cfg, 1, 16, 512).cfg_error
    assert not T.TrackerModel(cfg, 1, 16, 1024).cfg_error


PREFETCH_CASES = [
    ("mixed", 4, 2, 0, {}), ("mixed", 6, 1, 1, {"hw_pinned": 2}), ("dense_early", 5, 3, 0, {}),
    ("dense_early", 8, 2, 1, {"hw_rank_tau": 4, "hw_bucket_bits": 1}),
    ("mixed", 2, 2, 0, {"hw_pinned": 3}),      # prefetches with nothing evictable
]


@pytest.mark.parametrize("family,budget,window,trigger_all,over", PREFETCH_CASES)
def test_model_with_prefetch_inserts_equals_policy_replay(family, budget, window, trigger_all, over):
    """The rule's prefetch inserts after each demand decision: hw --param window=W, count for count."""
    trace = tracegen.synth(family, n_layers=2, n_kv_heads=2, prefill=32, steps=64, seed=budget + window)
    params = P.make_params("hw", window=window, **over)
    ref = P.replay(trace, "hw", budget, params=params, record_victims=True, prefetch_trigger=trigger_all)
    cfg = T.TrackerConfig.from_params(params, budget)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 1 + window, T.ring_size(T.buckets_needed(cfg)))
    newest = [-1] * trace.n_queues
    codes, pf_decisions = [], []
    for e in T.events_from_trace(trace):
        d = model.event(e)
        codes.append(d.code)
        newest[e.queue] = max(newest[e.queue], e.position)
        pf_decisions += T.prefetch_after(model, e, d, newest[e.queue], window, trigger_all)
    assert codes == ref.victims.tolist()
    c = model.counters
    for name in ("read_hits", "evictions", "prefetches", "prefetch_hits", "no_victim"):
        assert c[name] == ref.total(name), name
    assert c["prefetch_evicted_unused"] == ref.total("prefetch_evicted_unused")
    assert c["prefetches"] > 0 and all(d.prefetch and not d.hit and not d.error for d in pf_decisions)
    assert sum(d.inserted or d.no_victim for d in pf_decisions) == c["prefetches"]
    if over.get("hw_pinned", 0) < budget:
        assert c["prefetch_hits"] > 0 and c["prefetch_evicted_unused"] > 0
    assert [d.code for d in T.replay_model(trace, cfg, window=window, trigger_all=trigger_all)] == codes
    # negative: another window gives other counts
    other = P.replay(trace, "hw", budget, params=P.make_params("hw", window=window + 1, **over),
                     prefetch_trigger=trigger_all)
    assert other.total("prefetches") != c["prefetches"]


def test_prefetch_insert_of_a_resident_or_unstarted_entry_changes_nothing():
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 4)
    model = T.TrackerModel(cfg, 2, 16, 128)
    assert model.prefetch(1, 3) == T.Decision(1, 3, 0, 0, 0, 0, 0, 0, prefetch=1, error=1)
    model.event(T.Event(0, 5, 0, 1000, 10))
    before = (dict(model.meta), {k: vars(v).copy() for k, v in model.slots.items()}, dict(model.counters))
    assert model.prefetch(0, 5) == T.Decision(0, 5, 0, 0, 0, 0, 0, 0, prefetch=1)
    assert (dict(model.meta), {k: vars(v).copy() for k, v in model.slots.items()}, dict(model.counters)) == before
    d = model.prefetch(0, 6)
    assert (d.inserted, d.slot, d.prefetch, model.counters["prefetches"]) == (1, 1, 1, 1)
    assert model.meta[(0, 6)] == (0, 10, 1)        # never seen: EMA 0, t_last = the queue's step
    model.event(T.Event(0, 6, 0, 0, 11))
    assert model.counters["prefetch_hits"] == 1


def test_victims_are_first_in_the_exact_order():
    from cxlkv.tb.tracker.bench import victim_topk_agreement
    trace = tracegen.synth("mixed", n_layers=1, n_kv_heads=2, prefill=64, steps=64, seed=7)
    r = victim_topk_agreement(trace, 8, P.make_params("hw"))
    assert r["victims"] > 100
    assert r["rank0"] == r["within_topk"] == r["victims"]


def _random_trace(seed, n=3000, n_pos=40, max_step_gap=60):
    """A conformant random trace: steps non-decreasing with jumps up to max_step_gap, skewed positions."""
    import random

    import numpy as np

    from cxlkv.models.trace import Trace
    rng = random.Random(seed)
    cols = ([], [], [], [], [], [])
    s = rng.randrange(5)
    for _ in range(n):
        if rng.random() < 0.15:
            s += rng.randrange(1, max_step_gap + 1)
        w = rng.random() < 0.2
        p = min(int(rng.paretovariate(0.7)) - 1, n_pos - 1) if rng.random() < 0.6 else rng.randrange(n_pos)
        for col, v in zip(cols, (s, rng.randrange(2), rng.randrange(2), p, int(w),
                                 0.0 if w else rng.random() * rng.choice((1, 0.1, 0.01)))):
            col.append(v)
    return Trace(np.array(cols[0], np.int32), np.array(cols[1], np.uint16), np.array(cols[2], np.uint16),
                 np.array(cols[3], np.uint32), np.array(cols[4], np.uint8), np.array(cols[5], np.float32),
                 2, 2).validate()


@pytest.mark.parametrize("g", [0, 1, 3, 6, 24])
@pytest.mark.parametrize("seed", [1, 2])
def test_model_equals_policy_replay_on_random_traces(g, seed):
    trace = _random_trace(seed * 31 + g)
    for budget, over in ((3, {}), (7, {"hw_pinned": 2, "hw_rank_tau": 3}), (12, {"hw_rank_tau_long": 4})):
        params = P.make_params("hw", hw_bucket_bits=g, **over)
        ref = P.replay(trace, "hw", budget, params=params, record_victims=True).victims.tolist()
        got = [d.code for d in T.replay_model(trace, T.TrackerConfig.from_params(params, budget))]
        assert got == ref, (budget, over, next(i for i in range(len(ref)) if got[i] != ref[i]))


@pytest.mark.parametrize("g,ring_mult", [(0, 1), (3, 1), (3, 4), (6, 1), (6, 8)])
def test_lazy_splicing_is_exact_for_every_ring_size(g, ring_mult):
    """Rings from the smallest power of two >= NB (little room below the cursor: many splices) up."""
    trace = _random_trace(77 + g, n=2500, max_step_gap=200)
    params = P.make_params("hw", hw_bucket_bits=g, hw_rank_tau=2)
    ref = P.replay(trace, "hw", 6, params=params, record_victims=True).victims.tolist()
    cfg = T.TrackerConfig.from_params(params, 6)
    model = T.TrackerModel(cfg, trace.n_queues, 64, T.ring_size(T.buckets_needed(cfg)) * ring_mult)
    got = [model.event(e).code for e in T.events_from_trace(trace)]
    assert got == ref
    if ring_mult == 1:
        assert model.counters["splices"] > 0


@pytest.mark.parametrize("g", [0, 3])
def test_matrix_selection_model_counts_no_splices(g):
    """select="matrix": the same decisions as the ring (and hw), no splices, and a ring given
    smaller than NB is still flagged (cfg_error) but does not alias (the matrix has no ring)."""
    trace = _random_trace(91 + g, n=2500, max_step_gap=200)
    params = P.make_params("hw", hw_bucket_bits=g, hw_rank_tau=2)
    ref = P.replay(trace, "hw", 6, params=params, record_victims=True).victims.tolist()
    cfg = T.TrackerConfig.from_params(params, 6)
    nbr = T.ring_size(T.buckets_needed(cfg))
    ring = T.TrackerModel(cfg, trace.n_queues, 64, nbr)
    matrix = T.TrackerModel(cfg, trace.n_queues, 64, nbr, select="matrix")
    small = T.TrackerModel(cfg, trace.n_queues, 64, nbr // 2, select="matrix")
    events = T.events_from_trace(trace)
    assert [ring.event(e).code for e in events] == ref
    assert [matrix.event(e).code for e in events] == ref
    assert [small.event(e).code for e in events] == ref
    assert ring.counters["splices"] > 0 and matrix.counters["splices"] == 0
    assert {k: v for k, v in ring.counters.items() if k != "splices"} == \
        {k: v for k, v in matrix.counters.items() if k != "splices"}
    assert small.cfg_error and not matrix.cfg_error
    with pytest.raises(ValueError, match="select"):
        T.TrackerModel(cfg, 1, 64, nbr, select="heap")


def test_slots_are_reused_by_the_evicting_entry():
    trace = tracegen.synth("mixed", n_layers=1, n_kv_heads=2, prefill=32, steps=32, seed=9)
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_pinned=1), 5)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 1, 128)
    owner = {}                                   # (queue, slot) -> position, kept independently
    for e in T.events_from_trace(trace):
        d = model.event(e)
        if d.victim_valid:
            assert owner[(e.queue, d.slot)] == d.victim
        if d.hit:
            assert owner[(e.queue, d.slot)] == e.position
        if not d.no_victim:
            owner[(e.queue, d.slot)] = e.position
            assert d.slot < cfg.budget
        assert model.resident_slot(e.queue, e.position) == (None if d.no_victim else d.slot)
    assert sorted({s for (_, s) in owner}) == list(range(cfg.budget))


def test_cfg_error_when_budget_exceeds_max_budget():
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 33)
    assert T.TrackerModel(cfg, 1, 64, 128, max_budget=32).cfg_error
    assert not T.TrackerModel(cfg, 1, 64, 128, max_budget=64).cfg_error


def test_lookup_answers_residency_and_changes_nothing():
    """A lookup after every event of a trace, of the event's position and of a neighbour: its
    answer is the residency an independent owner map gives, and the decisions are unchanged."""
    trace = tracegen.synth("mixed", n_layers=1, n_kv_heads=2, prefill=32, steps=32, seed=5)
    cfg = T.TrackerConfig.from_params(P.make_params("hw", hw_pinned=1), 6)
    model = T.TrackerModel(cfg, trace.n_queues, int(trace.pos.max()) + 2, 128)
    ref = T.replay_model(trace, cfg, 128)
    assert model.lookup(1, 3) == T.Decision(1, 3, 0, 0, 0, 0, 0, 0, lookup=1)     # no event yet
    owner, hits = {}, 0
    for e, want in zip(T.events_from_trace(trace), ref):
        d = model.event(e)
        assert d == want
        if not d.no_victim:
            owner[(e.queue, d.slot)] = e.position
        for p in (e.position, e.position + 1):
            a = model.lookup(e.queue, p)
            resident = [s for (q, s), pos in owner.items() if q == e.queue and pos == p]
            assert (a.hit, a.slot, a.lookup) == ((1, resident[0], 1) if resident else (0, 0, 1))
            hits += a.hit
    assert 0 < hits < 2 * len(trace) and model.counters["lookups"] == 2 * len(trace) + 1


def test_ports_refuse_layer_or_head_beyond_the_geometry():
    """The ports' (layer, head) addresses: beyond the geometry a request is refused (error) and
    counted as the RTL counts it; a prefetch into a queue without an event yet too; nothing else
    changes."""
    cfg = T.TrackerConfig.from_params(P.make_params("hw"), 2)
    m = T.TrackerModel(cfg, 6, 16, 128, n_kv_heads=2)            # 3 layers x 2 heads
    assert (m.n_layers, m.n_kv_heads) == (3, 2)
    assert m.queue(2, 1) == 5 and m.queue(3, 0) is None and m.queue(0, 2) is None
    d = m.port_event(3, 0, 4, 0, 100, 10)
    assert d == T.Decision(T.NO_QUEUE, 4, 0, 0, 0, 0, 0, 0, error=1)
    assert m.port_prefetch(0, 2, 4) == T.Decision(T.NO_QUEUE, 4, 0, 0, 0, 0, 0, 0, prefetch=1, error=1)
    assert m.port_lookup(1, 5, 4) == T.Decision(T.NO_QUEUE, 4, 0, 0, 0, 0, 0, 0, lookup=1, error=1)
    assert m.port_prefetch(1, 1, 4) == T.Decision(3, 4, 0, 0, 0, 0, 0, 0, prefetch=1, error=1)   # unstarted
    assert m.port_victim_request(7, 0) == T.VictimAnswer(T.NO_QUEUE, 0, 0, 0, error=1)
    c = m.counters
    assert (c["events"], c["bad_events"], c["lookups"], c["prefetches"]) == (1, 4, 0, 0)
    assert (c["victim_requests"], c["victim_none"], c["reads"]) == (1, 1, 0)
    assert not m.meta and not any(q.started for q in m.queues)
    d = m.port_event(2, 1, 4, 0, 100, 10)                          # in range: queue 5
    assert d.queue == 5 and d.inserted and not d.error
    assert m.port_lookup(2, 1, 4).hit and m.port_victim_request(2, 1, decode_lock=1 << 5).locked
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        T.TrackerModel(cfg, 5, 16, 128, n_kv_heads=2)
