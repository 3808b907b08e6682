"""Policy simulator: the compiled replay core against deliberately simple, independent
pure-Python implementations of the contract (lru, min) and of every other policy's rule
(hw above all: the tracker RTL will be checked against this model event for event)."""
import math
import random

import numpy as np
import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import policy as P
from cxlkv.models import scoring as S
from cxlkv.models.trace import OP_READ, OP_WRITE, Trace


# ---------------------------------------------------------------------------------------------
# Random conformant traces
# ---------------------------------------------------------------------------------------------

def random_trace(seed, n=400, n_layers=2, n_kv_heads=2, n_pos=24, p_write=0.3, max_step_gap=3, p_step=0.2):
    """Steps non-decreasing; scores dyadic (multiples of 2^-12) so every float sum is exact."""
    rng = random.Random(seed)
    step, layer, head, pos, op, score = [], [], [], [], [], []
    s = rng.randrange(3)
    for _ in range(n):
        if rng.random() < p_step:
            s += rng.randrange(1, max_step_gap + 1)
        w = rng.random() < p_write
        step.append(s)
        layer.append(rng.randrange(n_layers))
        head.append(rng.randrange(n_kv_heads))
        # skewed positions: some hot, some cold, sometimes far beyond
        pos.append(min(int(rng.paretovariate(0.8)) - 1, n_pos - 1) if rng.random() < 0.6 else rng.randrange(n_pos))
        op.append(OP_WRITE if w else OP_READ)
        score.append(0.0 if w else rng.randrange(0, 4097) / 4096 * rng.choice((1, 1, 0.25, 0.01)))
    return Trace(np.array(step, np.int32), np.array(layer, np.uint16), np.array(head, np.uint16),
                 np.array(pos, np.uint32), np.array(op, np.uint8), np.array(score, np.float32),
                 n_layers, n_kv_heads).validate()


def events(trace):
    for i in range(len(trace)):
        yield (i, int(trace.step[i]), int(trace.layer[i]) * trace.n_kv_heads + int(trace.head[i]),
               int(trace.pos[i]), int(trace.op[i]), float(trace.score[i]))


# ---------------------------------------------------------------------------------------------
# Independent implementation of the contract's lru and min (lists, linear scans)
# ---------------------------------------------------------------------------------------------

def contract_replay(trace, policy, C, outcomes=None):
    """lru / min exactly as ../shared/spec/contracts.md words them. Returns (counts, victims); fills
    ``outcomes`` (a dict) with {read event: (hit, prefetches issued)} when given."""
    ev = list(events(trace))
    resident = {}      # queue -> list of positions
    last_use = {}      # (queue, pos) -> event index of last access (lru)
    reads = hits = evictions = 0
    sum_reads = sum_hits = 0.0
    victims = [-1] * len(ev)

    def next_access(q, p, after):
        for (i, _, qq, pp, _, _) in ev[after + 1:]:
            if qq == q and pp == p:
                return i
        return math.inf

    for (i, s, q, p, o, x) in ev:
        res = resident.setdefault(q, [])
        if o == OP_READ:
            reads += 1
            sum_reads += x
        if o == OP_READ and outcomes is not None:
            outcomes[i] = (p in res, 0)
        if p in res:
            if o == OP_READ:
                hits += 1
                sum_hits += x
        else:
            if len(res) == C:
                if policy == "lru":
                    victim = min(res, key=lambda r: last_use[(q, r)])
                else:
                    # farthest next access; never again = infinitely far; ties: smallest position
                    victim = max(res, key=lambda r: (next_access(q, r, i), -r))
                res.remove(victim)
                evictions += 1
                victims[i] = victim
            res.append(p)
        last_use[(q, p)] = i
    return dict(reads=reads, read_hits=hits, evictions=evictions,
                attention_recall=sum_hits / sum_reads if sum_reads else 0.0), victims


@pytest.mark.parametrize("policy", ["lru", "min"])
@pytest.mark.parametrize("seed", range(12))
def test_lru_min_equal_the_contract(policy, seed):
    rng = random.Random(1000 + seed)
    trace = random_trace(seed, n=rng.choice((50, 300, 600)), n_pos=rng.choice((4, 12, 40)),
                         p_write=rng.choice((0.0, 0.3, 0.8)))
    for C in (1, 2, 3, 7):
        want, want_victims = contract_replay(trace, policy, C)
        r = P.replay(trace, policy, C, record_victims=True)
        got = r.summary()
        assert {k: got[k] for k in want} == want, (policy, seed, C)
        assert list(r.victims) == want_victims
        assert got["fills"] == got["reads"] - got["read_hits"]
        assert got["hit_rate"] == (got["read_hits"] / got["reads"] if got["reads"] else 0.0)


def test_contract_worked_example():
    """One queue, C = 2: the sequence 1 2 3 1 2 4 1 under lru and min, by hand."""
    seq = [1, 2, 3, 1, 2, 4, 1]
    t = Trace(np.arange(7, dtype=np.int32), np.zeros(7, np.uint16), np.zeros(7, np.uint16),
              np.array(seq, np.uint32), np.zeros(7, np.uint8), np.full(7, 0.5, np.float32), 1, 1)
    lru = P.replay(t, "lru", 2, record_victims=True)
    mn = P.replay(t, "min", 2, record_victims=True)
    # lru: every access misses (cyclic over 3 > 2 entries), victims 1, 2, 3, 1, 2
    assert lru.summary()["read_hits"] == 0
    assert list(lru.victims) == [-1, -1, 1, 2, 3, 1, 2]
    # min: 3 evicts 2 (next use 4, farther than 1's 3)... by hand: hits at 1(i=3), 1(i=6)
    assert list(mn.victims) == [-1, -1, 2, -1, 3, 2, -1]
    assert mn.summary()["read_hits"] == 2


# ---------------------------------------------------------------------------------------------
# Independent implementation of every other policy (dicts, linear scans, scoring's functions)
# ---------------------------------------------------------------------------------------------

def hw_reference_key(meta, p, s, sample, params, rate, tln, prefetch):
    """hw's metadata update for an access (sample folded) or a prefetch insert (nothing folded)."""
    ema, t_last, seen = meta.get(p, (0, 0, False))
    dec = P.hw_decay(ema, S.step_age(t_last, s), rate) if seen else 0
    ema = dec if prefetch else S.ema_update(dec, sample, params.hw_alpha or 1)
    meta[p] = (ema, s, True)
    return (s + P.hw_retention(ema, tln)) >> params.hw_bucket_bits


def reference_replay(trace, policy, C, params, outcomes=None):
    """Every policy by its rule in docs/policy.md, written for clarity, not speed. Fills ``outcomes``
    (a dict) with {read event: (hit, prefetches issued)} when given."""
    ev = list(events(trace))
    qlist = {}
    for e in ev:
        qlist.setdefault(e[2], []).append(e)
    a_ema, t_ema, _ = S.sanitize_config(params.ema_alpha, params.ema_tau)
    a_hw, t_hw, _ = S.sanitize_config(params.hw_alpha, params.hw_tau)
    rate_hw, rate_ema = S.decay_rate(t_hw), S.decay_rate(t_ema)
    tln = P.hw_tau_ln2_q8(P.hw_rank_tau(params))
    tln_dense = P.hw_tau_ln2_q8(P.hw_rank_tau_long(params)) if P.hw_rank_tau_long(params) else None
    params = P.PolicyParams(**{**params.__dict__, "hw_alpha": a_hw, "ema_alpha": a_ema})
    W = params.window
    tot = dict(reads=0, read_hits=0, evictions=0, prefetches=0, prefetch_hits=0, no_victim=0, fills=0)
    sum_reads = sum_hits = 0.0
    victims = [-1] * len(ev)
    for q, qev in qlist.items():
        res = {}          # pos -> (key, prefetched)
        meta = {}         # hw: pos -> (ema, t_last, seen); ema: pos -> (ema, t_last)
        acc = {}
        seq = 0
        newest = -1
        cur_step, step_reads, dense = qev[0][1], 0, False
        for (i, s, _, p, o, x) in qev:
            if s != cur_step:
                # dense mode: the previous step (of this queue) read more entries than the queue holds
                dense = tln_dense is not None and step_reads > C
                cur_step, step_reads = s, 0
            step_reads += o == OP_READ
            newest = max(newest, p)
            if o == OP_READ:
                tot["reads"] += 1
                sum_reads += x
            prefetches_before = tot["prefetches"]
            if o == OP_READ and outcomes is not None:
                outcomes[i] = (p in res, 0)
            todo = [(p, False)]
            if W and o == OP_READ:
                todo += [(pp, True) for pp in range(max(0, p - W), min(newest, p + W) + 1) if pp != p]
            for (pp, is_pf) in todo:
                if is_pf and pp in res:
                    continue
                seq += 1
                sample = min(P.score_to_uq16(x) + params.hw_read_credit, 65535) if o == OP_READ \
                    else params.hw_write_sample
                if policy == "hw":
                    # within a bucket: dense-mode touches first, newest first; then normal ones, oldest first
                    key = (hw_reference_key(meta, pp, s, sample, params, rate_hw, tln_dense if dense else tln,
                                            is_pf), -seq if dense else seq)
                elif policy in ("ema", "ema+prefetch"):
                    e, _ = meta.get(pp, (0, 0))
                    if o == OP_READ and not is_pf:
                        e = S.ema_update(e, P.score_to_uq16(x), params.ema_alpha)
                    meta[pp] = (e, s)
                    key = seq
                elif policy == "h2o":
                    if o == OP_READ and not is_pf:
                        acc[pp] = acc.get(pp, 0.0) + x
                    key = (acc.get(pp, 0.0), seq)
                elif policy == "tova":
                    w = 0.0 if is_pf else (min(x, 1.0) if o == OP_READ else 1.0)
                    key = (s + 0.5 * w, seq)
                elif policy == "streaming":
                    key = ((1 if pp < params.sinks else 0), pp)
                else:
                    raise AssertionError(policy)
                if pp in res:
                    if o == OP_READ and not is_pf:
                        tot["read_hits"] += 1
                        sum_hits += x
                        if res[pp][1]:
                            tot["prefetch_hits"] += 1
                    res[pp] = (key, False)
                    continue
                if not is_pf and o == OP_READ:
                    tot["fills"] += 1
                if is_pf:
                    tot["prefetches"] += 1
                if len(res) == C:
                    if policy in ("ema", "ema+prefetch"):
                        def prio(r):
                            e, tl = meta[r]
                            pr = S.priority_from_recency(e, S.recency_fixed(S.step_age(tl, s), rate_ema))
                            return (-pr, res[r][0])
                        cand = list(res)
                        victim = min(cand, key=prio)
                    else:
                        # hw: pinned positions stay; h2o: its recent window (the h2o_recent percent
                        # of C nearest the newest position) stays
                        recent = C * params.h2o_recent // 100
                        cand = [r for r in res if not (policy == "hw" and r < params.hw_pinned)
                                and not (policy == "h2o" and r > newest - recent)]
                        if not cand:
                            tot["no_victim"] += 1
                            if not is_pf:
                                victims[i] = -2
                            continue
                        victim = min(cand, key=lambda r: res[r][0])
                    del res[victim]
                    tot["evictions"] += 1
                    if not is_pf:
                        victims[i] = victim
                res[pp] = (key, is_pf)
            if o == OP_READ and outcomes is not None:
                outcomes[i] = (outcomes[i][0], tot["prefetches"] - prefetches_before)
    tot["attention_recall"] = sum_hits / sum_reads if sum_reads else 0.0
    return tot, victims


POLICY_CASES = [
    ("h2o", {}), ("h2o", {"h2o_recent": 0}), ("h2o", {"h2o_recent": 99}), ("h2o", {"h2o_recent": 25}),
    ("tova", {}), ("streaming", {"sinks": 2}), ("streaming", {"sinks": 0}),
    ("ema", {}), ("ema", {"ema_alpha": 40000, "ema_tau": 3}),
    ("ema+prefetch", {"window": 2}), ("ema+prefetch", {"window": 1, "ema_tau": 5}),
    ("hw", {}), ("hw", {"hw_tau": 2, "hw_bucket_bits": 0, "hw_pinned": 0}),
    ("hw", {"hw_tau": 300, "hw_alpha": 65535, "hw_bucket_bits": 3, "hw_pinned": 3, "hw_write_sample": 0}),
    ("hw", {"hw_tau": 9, "hw_alpha": 0, "hw_read_credit": 9000, "hw_write_sample": 65535}),
    ("hw", {"window": 2, "hw_pinned": 1, "hw_tau": 20}),
    ("hw", {"hw_tau": 40, "hw_rank_tau": 3}), ("hw", {"hw_rank_tau_long": 0}),
    ("hw", {"hw_rank_tau_long": 5, "hw_rank_tau": 2, "hw_bucket_bits": 0}), ("hw", {"hw_tau": 2, "hw_rank_tau": 100, "hw_bucket_bits": 2}),
]


@pytest.mark.parametrize("policy,overrides", POLICY_CASES)
@pytest.mark.parametrize("seed", range(6))
def test_policy_core_equals_reference(policy, overrides, seed):
    rng = random.Random(seed * 7919 + len(overrides))
    trace = random_trace(seed + 50, n=rng.choice((100, 400)), n_pos=rng.choice((6, 20, 40)),
                         p_write=rng.choice((0.1, 0.4)), max_step_gap=rng.choice((1, 40)),
                         p_step=(0.2, 0.02)[seed % 2])      # 0.02: long steps, so hw's dense mode engages
    params = P.make_params(policy, **overrides)
    for C in (1, 2, 5):
        want, want_victims = reference_replay(trace, policy, C, params)
        r = P.replay(trace, policy, C, params=params, record_victims=True)
        got = r.summary()
        assert {k: got[k] for k in want} == want, (policy, overrides, seed, C)
        assert list(r.victims) == want_victims, (policy, overrides, seed, C)


def test_hw_pinned_full_queue_bypasses_and_counts():
    """C <= pinned: nothing is evictable; the miss is served without insertion, counted."""
    t = Trace(np.zeros(4, np.int32), np.zeros(4, np.uint16), np.zeros(4, np.uint16),
              np.array([0, 1, 2, 0], np.uint32), np.array([1, 1, 0, 0], np.uint8),
              np.array([0, 0, 0.5, 0.5], np.float32), 1, 1)
    r = P.replay(t, "hw", 2, hw_pinned=4, record_victims=True)
    s = r.summary()
    assert s["no_victim"] == 1 and s["evictions"] == 0 and s["read_hits"] == 1
    assert list(r.victims) == [-1, -1, -2, -1]


# ---------------------------------------------------------------------------------------------
# Modelled time per decode step (docs/policy.md): H, M, P per (step, layer) exactly as replayed
# ---------------------------------------------------------------------------------------------

def naive_step_layer_reads(trace, outcomes):
    """{(step, layer): [H, M, P]} from a reference replay's per-read outcomes (hit, prefetches)."""
    cells = {}
    for (i, s, q, _, o, _) in events(trace):
        if o == OP_READ:
            hit, prefetches = outcomes[i]
            c = cells.setdefault((s, q // trace.n_kv_heads), [0, 0, 0])
            c[0 if hit else 1] += 1
            c[2] += prefetches
    return cells


def naive_step_time_means(cells, p):
    """The docs' formula, term by term: (modelled, every read fast, every read slow), µs."""
    def layer_ns(fast, slow):
        fast_part = (p.fast_lat_ns if fast > 0 else 0) + fast * p.entry_bytes / (p.fast_gbytes_s * 1e9) * 1e9
        slow_part = (p.slow_lat_us * 1e3 if slow > 0 else 0) + slow * p.entry_bytes / (p.slow_gbytes_s * 1e9) * 1e9
        return max(fast_part, slow_part)
    steps = sorted({s for s, _ in cells})
    if not steps:
        return 0.0, 0.0, 0.0
    sums = [0.0, 0.0, 0.0]
    for s in steps:
        for (cs, _), (h, m, pf) in cells.items():
            if cs == s:
                sums[0] += layer_ns(h, m + pf) / 1e3
                sums[1] += layer_ns(h + m, 0) / 1e3
                sums[2] += layer_ns(0, h + m) / 1e3
    return tuple(v / len(steps) for v in sums)


def _random_timing(rng):
    return dict(fast_lat_ns=rng.choice((250, 1.5, 400.25)), fast_gbytes_s=rng.choice((64, 0.75, 3)),
                slow_lat_us=rng.choice((50, 0.001, 2.5)), slow_gbytes_s=rng.choice((14, 0.125, 100)),
                entry_bytes=rng.choice((512, 64, 4096)))


STEP_TIME_CASES = [("lru", {}), ("min", {})] + POLICY_CASES + [
    ("hw", {"window": 2, "hw_pinned": 3}), ("hw", {"window": 1, "hw_pinned": 6})]   # bypassed misses and prefetches


@pytest.mark.parametrize("policy,overrides", STEP_TIME_CASES)
@pytest.mark.parametrize("seed", range(3))
def test_step_layer_reads_and_step_time_equal_a_naive_replay(policy, overrides, seed):
    """H (fast-tier reads), M (misses, bypasses included) and P (prefetches) of every (step, layer)
    equal those of the independent replays above, and the step-time means equal the formula
    evaluated term by term on them."""
    rng = random.Random(seed * 31 + len(overrides))
    trace = random_trace(seed + 300, n=rng.choice((150, 400)), n_layers=rng.choice((1, 3)),
                         n_pos=rng.choice((6, 20)), p_write=rng.choice((0.1, 0.4)), max_step_gap=rng.choice((1, 9)),
                         p_step=(0.2, 0.03)[seed % 2])
    params = P.make_params(policy, **overrides, **_random_timing(rng))
    for C in (1, 2, 5):
        outcomes = {}
        if policy in ("lru", "min"):
            contract_replay(trace, policy, C, outcomes)
        else:
            reference_replay(trace, policy, C, params, outcomes)
        want = naive_step_layer_reads(trace, outcomes)
        r = P.replay(trace, policy, C, params=params)
        cells = r.step_layer_reads()
        got = {(int(s), int(la)): [int(h), int(m), int(pf)] for s, la, h, m, pf in
               zip(cells.step, cells.layer, cells.fast_reads, cells.read_misses, cells.prefetches)}
        assert got == want and len(got) == len(cells.step), (policy, overrides, seed, C)
        assert (np.diff(cells.step) >= 0).all()
        s = r.summary()
        assert s["modelled_steps"] == len({k[0] for k in want})
        for key, v in zip(("modelled_step_us", "modelled_step_us_all_fast", "modelled_step_us_all_slow"),
                          naive_step_time_means(want, params)):
            assert math.isclose(s[key], v, rel_tol=1e-12, abs_tol=1e-12), (key, policy, overrides, seed, C)


@pytest.mark.parametrize("policy", P.POLICIES)
@pytest.mark.parametrize("trigger", [0, 1])
def test_step_layer_reads_add_up_to_the_counters(policy, trigger):
    """Every read is H or M of its cell; M + P over the cells is every entry fetched from the slow
    tier (fills + prefetches: bytes_moved / entry_bytes), with either prefetch trigger."""
    trace = random_trace(77, n=900, n_layers=3, n_kv_heads=2, n_pos=30, p_step=0.05)
    for C in (1, 4):
        extra = {"hw_pinned": 2} if policy == "hw" and C == 1 else {}
        window = {"window": 2} if policy == "hw" else {}
        r = P.replay(trace, policy, C, prefetch_trigger=trigger, **window, **extra)
        s, c = r.summary(), r.step_layer_reads()
        assert c.fast_reads.sum() == s["read_hits"] and c.read_misses.sum() == s["fills"]
        assert c.prefetches.sum() == s["prefetches"]
        assert (c.read_misses.sum() + c.prefetches.sum()) * s["entry_bytes"] == s["bytes_moved"]


def test_step_time_worked_example():
    """docs/policy.md's example, by hand: step 0 writes only (not averaged), step 1 reads."""
    rows = [(0, 0, 0, 1, 0.0), (0, 1, 0, 1, 0.0),               # (step, layer, pos, op, score)
            (1, 0, 0, 0, 0.5), (1, 0, 5, 0, 0.5), (1, 1, 0, 0, 1.0)]
    a = np.array(rows, dtype=object)
    t = Trace(a[:, 0].astype(np.int32), a[:, 1].astype(np.uint16), np.zeros(5, np.uint16),
              a[:, 2].astype(np.uint32), a[:, 3].astype(np.uint8), a[:, 4].astype(np.float32), 2, 1).validate()
    s = P.replay(t, "lru", 4, entry_bytes=100, fast_lat_ns=100, fast_gbytes_s=1, slow_lat_us=1, slow_gbytes_s=0.5).summary()
    # layer 0: H = 1, M = 1 -> max(100 + 100, 1000 + 200) = 1200 ns; layer 1: H = 1 -> 200 ns
    assert s["modelled_steps"] == 1
    assert math.isclose(s["modelled_step_us"], 1.4)
    assert math.isclose(s["modelled_step_us_all_fast"], 0.3 + 0.2)       # 100 + 2 x 100; 100 + 100
    assert math.isclose(s["modelled_step_us_all_slow"], 1.4 + 1.2)       # 1000 + 2 x 200; 1000 + 200
    empty = P.replay(Trace(*(np.zeros(0, d) for d in (np.int32, np.uint16, np.uint16, np.uint32, np.uint8,
                                                     np.float32)), 1, 1), "lru", 1).summary()
    assert empty["modelled_steps"] == 0 and empty["modelled_step_us"] == 0.0


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan, True, "5"])
@pytest.mark.parametrize("name", P.TIMING_PARAMS)
def test_timing_parameters_must_be_positive_finite_numbers(name, value):
    with pytest.raises(CxlkvError, match=f"'{name}' must be a positive finite number"):
        P.make_params("lru", **{name: value})


# ---------------------------------------------------------------------------------------------
# Fixed-point pieces: the numba mirrors equal the Python definitions (and scoring's)
# ---------------------------------------------------------------------------------------------

def test_numba_mirrors_equal_python_definitions():
    rng = random.Random(7)
    for tau in (1, 2, 17, 64, 1000, 65535, 1 << 20):
        rate = S.decay_rate(tau)
        for _ in range(300):
            age = rng.choice((0, 1, rng.randrange(64), rng.randrange(1 << 24)))
            assert P._recency(age, rate.mant, rate.shift, P._EXP2) == S.recency_fixed(age, rate)
            last, cur = rng.randrange(1 << 31), rng.randrange(1 << 31)
            assert P._step_age(last, cur) == S.step_age(last, cur)
    for _ in range(3000):
        ema, smp, a = rng.randrange(65536), rng.randrange(65536), rng.randrange(65536)
        assert P._ema_update(ema, smp, a) == S.ema_update(ema, smp, a)
    for tau in (1, 3, 64, 999, 1 << 20):
        tln = P.hw_tau_ln2_q8(tau)
        for ema in [0, 1, 2, 255, 256, 257, 65535] + [rng.randrange(65536) for _ in range(500)]:
            assert P._hw_retention(ema, tln, P._LOG2F) == P.hw_retention(ema, tln)
    for x in [0.0, 1.0, 2.5, 1e-9, 0.5 / 65536, 1.5 / 65536, 0.99999] + [rng.random() for _ in range(500)]:
        assert P._to_uq16(np.float32(x)) == P.score_to_uq16(np.float32(x))


def test_hw_log2_and_retention_against_floats():
    for ema in range(1, 65536):
        l = P.hw_log2_q8(ema) / 256
        # truncated mantissa (log2(1 + 2^-8)) plus the ROM's rounding (2^-9)
        assert abs(l - math.log2(ema)) <= math.log2(1 + 2 ** -8) + 2 ** -9
    # tau*ln(ema) in whole steps: truncation (1 step) + the log's error + tau*ln2's rounding
    for tau in (1, 64, 1000):
        tln = P.hw_tau_ln2_q8(tau)
        for ema in range(1, 65536, 37):
            f = P.hw_retention(ema, tln)
            assert abs(f - tau * math.log(ema)) <= 1 + tau * math.log(2) * 0.0077 + 0.05
    assert P.LOG2_FRAC_Q8[0] == 0 and P.LOG2_FRAC_Q8[255] == 255 and len(P.LOG2_FRAC_Q8) == 256
    rate = S.decay_rate(64)
    assert P.hw_decay(1000, 0, rate) == 1000 and P.hw_decay(65535, 64 * 30, rate) == 0


def test_hw_deadline_orders_like_the_decayed_ema():
    """The point of the key: ranking by D = t + τ·ln(ema) is ranking by ema·exp(-(now - t)/τ),
    at any later time, with no rescoring (up to the fixed point's rounding)."""
    tau = 50
    tln = P.hw_tau_ln2_q8(tau)
    rng = random.Random(3)
    agree = total = 0
    for _ in range(2000):
        (e1, t1), (e2, t2) = [(rng.randrange(1, 65536), rng.randrange(0, 400)) for _ in range(2)]
        now = 400 + rng.randrange(100)
        d1, d2 = t1 + P.hw_retention(e1, tln), t2 + P.hw_retention(e2, tln)
        v1, v2 = e1 * math.exp(-(now - t1) / tau), e2 * math.exp(-(now - t2) / tau)
        if abs(math.log(v1 / v2)) * tau > 3:     # clearly different: must agree
            total += 1
            agree += (d1 < d2) == (v1 < v2)
    assert agree == total > 1000


# ---------------------------------------------------------------------------------------------
# Parameters, budgets, errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy,overrides,match", [
    ("fifo", {}, "unknown policy"),
    ("hw", {"hw_taux": 3}, "unknown policy parameter"),
    ("hw", {"hw_tau": 0}, "hw_tau"),
    ("min", {"window": 2}, "does not prefetch"),
    ("lru", {"window": 2}, "does not prefetch"),
])
def test_bad_parameters_are_refused(policy, overrides, match):
    with pytest.raises(CxlkvError, match=match):
        P.make_params(policy, **overrides)


@pytest.mark.parametrize("policy,entries,kw,match", [
    ("lru", 0, {}, "entries"),
    ("lru", 2, {"params": P.PolicyParams(window=1)}, "does not prefetch"),
    ("fifo", 2, {}, "unknown policy"),
])
def test_bad_replay_arguments_are_refused(policy, entries, kw, match):
    with pytest.raises(CxlkvError, match=match):
        P.replay(random_trace(1, n=20), policy, entries, **kw)


def test_ema_prefetch_prefetches_by_default():
    assert P.make_params("ema+prefetch").window == 4


def test_percentage_budget():
    t = random_trace(2, n=200, n_pos=40)
    ctx = int(t.pos.max()) + 1
    assert P.entries_from_budget(t, 100) == ctx
    assert P.entries_from_budget(t, 10) == math.ceil(ctx / 10)
    with pytest.raises(CxlkvError):
        P.entries_from_budget(t, 0)
    with pytest.raises(CxlkvError):
        P.entries_from_budget(t, 101)


def test_position_limit_and_empty_trace():
    t = random_trace(3, n=10)
    t.pos[4] = P.MAX_POSITION + 1
    with pytest.raises(CxlkvError, match="event 4"):
        P.replay(t, "lru", 4)
    e = Trace(*(np.zeros(0, d) for d in (np.int32, np.uint16, np.uint16, np.uint32, np.uint8, np.float32)), 1, 1)
    s = P.replay(e, "hw", 4).summary()
    assert s["events"] == 0 and s["hit_rate"] == 0.0


def test_prefetch_counts_and_bytes():
    """One queue, no evictions: writes 0 and 10; a read of 5 (a fill) with W = 2 prefetches 3, 4, 6, 7;
    a read of 4 hits a prefetched entry and prefetches 2; a read of 7 hits one and prefetches 8, 9."""
    pos = [0, 10, 5, 4, 7]
    n = len(pos)
    t = Trace(np.zeros(n, np.int32), np.zeros(n, np.uint16), np.zeros(n, np.uint16), np.array(pos, np.uint32),
              np.array([1, 1, 0, 0, 0], np.uint8), np.array([0, 0, 0.5, 0.25, 0.25], np.float32), 1, 1)
    for policy in ("ema+prefetch", "hw"):
        s = P.replay(t, policy, 20, window=2).summary()
        assert (s["fills"], s["read_hits"], s["prefetches"], s["prefetch_hits"]) == (1, 2, 7, 2)
        assert s["prefetch_accuracy"] == 2 / 7
        assert s["bytes_moved"] == 8 * P.DEFAULT_ENTRY_BYTES
        assert s["demand_bytes"] == P.DEFAULT_ENTRY_BYTES


def test_per_queue_figures_sum_to_the_totals():
    t = random_trace(4, n=500, n_layers=3, n_kv_heads=2)
    s = P.replay(t, "hw", 3).summary(per_queue=True)
    assert len(s["per_queue"]) == 6
    for k in ("reads", "read_hits", "evictions", "writes", "fills"):
        assert sum(row[k] for row in s["per_queue"]) == s[k]


def _core(trace, policy_id, C, params):
    """Run the general heap core directly (the public replay() routes some policies to fast paths)."""
    n, nq = len(trace), trace.n_queues
    qc, qs, vic = np.zeros((nq, P.N_QCOUNTS), np.int64), np.zeros((nq, 2)), np.full(n, -1, np.int64)
    ip = P._iparams(params)
    P._replay_core(trace.layer, trace.head, np.int64(trace.n_kv_heads), np.int64(nq), trace.step, trace.pos,
                   trace.op, trace.score, np.int64(int(trace.pos.max()) + 1 + params.window), np.int64(policy_id),
                   np.int64(C), ip, *P.hw_tables(params), True, vic, np.zeros(n, np.uint8),
                   np.zeros(n if params.window else 1, np.int32), qc, qs)
    return qc, qs, vic


@pytest.mark.parametrize("seed", range(4))
def test_fast_lru_path_equals_the_heap_core(seed):
    trace = random_trace(seed + 90, n=800, n_pos=30, n_layers=3)
    for C in (1, 4, 9):
        r = P.replay(trace, "lru", C, record_victims=True)
        qc, qs, vic = _core(trace, P.P_LRU, C, P.make_params("lru"))
        assert (r.per_queue == qc).all() and (r.victims == vic).all()
        np.testing.assert_array_equal(r.per_queue_score, qs)


@pytest.mark.parametrize("overrides", [{}, {"hw_tau": 1, "hw_bucket_bits": 0}, {"hw_tau": 50, "hw_bucket_bits": 3},
                                       {"hw_tau": 7, "hw_pinned": 3, "hw_bucket_bits": 1, "hw_write_sample": 30000},
                                       {"hw_tau": 1 << 20, "hw_bucket_bits": 24},
                                       {"hw_tau": 30, "hw_rank_tau": 2, "hw_rank_tau_long": 0},
                                       {"hw_rank_tau_long": 300, "hw_bucket_bits": 0}])
@pytest.mark.parametrize("seed", range(4))
def test_hw_bucket_structure_equals_the_heap_core(overrides, seed):
    """The tracker's structure (deadline-bucket ring + expired list, O(1) per event) makes exactly
    the heap core's decisions: min (bucket key, sequence)."""
    trace = random_trace(seed + 200, n=900, n_pos=40, n_layers=2, max_step_gap=(1, 5, 60, 3)[seed],
                         p_step=(0.2, 0.01)[seed % 2])
    params = P.make_params("hw", **overrides)
    for C in (1, 3, 8, 20):
        r = P.replay(trace, "hw", C, params=params, record_victims=True)
        qc, qs, vic = _core(trace, P.P_HW, C, params)
        assert (r.per_queue == qc).all() and (r.victims == vic).all(), (overrides, seed, C)
        np.testing.assert_array_equal(r.per_queue_score, qs)


def test_hw_dense_mode_changes_decisions():
    """The dense mode is not dead code: on long steps (many reads per step) it changes victims."""
    trace = random_trace(11, n=2000, n_pos=40, n_layers=1, n_kv_heads=1, p_step=0.01, p_write=0.1)
    on = P.replay(trace, "hw", 4, record_victims=True)
    off = P.replay(trace, "hw", 4, hw_rank_tau_long=0, record_victims=True)
    assert (on.victims != off.victims).any()


@pytest.mark.parametrize("seed", range(3))
def test_hw_normal_mode_without_attention_term_is_exactly_lru(seed):
    """hw_rank_tau = 0: the key is (step >> g, seq), which orders like seq alone: LRU, victim for victim.
    With the default dense mode, queues whose steps fit the budget still behave exactly like LRU."""
    trace = random_trace(seed + 300, n=700, n_pos=30, p_step=0.5)
    for C in (2, 6):
        lru = P.replay(trace, "lru", C, record_victims=True)
        hw = P.replay(trace, "hw", C, hw_rank_tau_long=0, hw_bucket_bits=seed, record_victims=True)
        assert (lru.victims == hw.victims).all()
    dense_free = random_trace(seed + 400, n=300, n_pos=30, p_step=0.9, max_step_gap=1)  # <= 1 read per step
    assert (P.replay(dense_free, "hw", 2, record_victims=True).victims
            == P.replay(dense_free, "lru", 2, record_victims=True).victims).all()


@pytest.mark.parametrize("recent", (0, 30, 50, 99))
@pytest.mark.parametrize("seed", range(4))
def test_h2o_recent_window_equals_reference_at_larger_budgets(recent, seed):
    """h2o's recent window (the C * h2o_recent // 100 positions nearest the newest are kept) against
    the reference's linear scan, at budgets where the window holds several entries."""
    trace = random_trace(seed + 300, n=600, n_pos=60, p_write=0.3, max_step_gap=2)
    params = P.make_params("h2o", h2o_recent=recent)
    for C in (4, 9, 16):
        want, want_victims = reference_replay(trace, "h2o", C, params)
        r = P.replay(trace, "h2o", C, params=params, record_victims=True)
        assert {k: r.summary()[k] for k in want} == want, (recent, seed, C)
        assert list(r.victims) == want_victims


def test_h2o_keeps_a_fresh_write_by_default():
    """Accumulated attention alone evicts the newest (never read) position first; H2O's recent
    window keeps it. One queue, C = 4 (h2o_recent 50: the 2 positions nearest the newest kept):
    0, 1, 2 written and read (weights 1, 0.5, 0.25), 3 and 4 written, then 3 read."""
    pos = [0, 0, 1, 1, 2, 2, 3, 4, 3]
    op = [1, 0, 1, 0, 1, 0, 1, 1, 0]
    score = [0, 1, 0, 0.5, 0, 0.25, 0, 0, 0.125]
    t = Trace(np.arange(9, dtype=np.int32), np.zeros(9, np.uint16), np.zeros(9, np.uint16),
              np.array(pos, np.uint32), np.array(op, np.uint8), np.array(score, np.float32), 1, 1)
    r = P.replay(t, "h2o", 4, record_victims=True)
    assert list(r.victims) == [-1] * 7 + [2, -1] and r.summary()["read_hits"] == 4
    r = P.replay(t, "h2o", 4, h2o_recent=0, record_victims=True)
    assert list(r.victims) == [-1] * 7 + [3, 4] and r.summary()["read_hits"] == 3


def _best_read_hits(events, C):
    """Most read hits any demand-only policy can get on one queue (every miss inserts, as the
    contract's replay): exhaustive over victim choices."""
    import functools

    @functools.lru_cache(None)
    def go(i, res):
        if i == len(events):
            return 0
        p, is_read = events[i]
        if p in res:
            return int(is_read) + go(i + 1, res)
        if len(res) < C:
            return go(i + 1, res | {p})
        return max(go(i + 1, (res - {v}) | {p}) for v in res)
    return go(0, frozenset())


def test_min_bounds_read_hits_only_when_writes_are_first_accesses():
    """MIN counts writes as next uses, but write hits are not counted: on a trace that writes a
    position after it was accessed it can keep that position for its writes and lose a read hit
    (docs/policy.md). One queue, C = 2: R4 R3 R4 R3 R0 R3 R4 W0 W0 R3 gives MIN 3 read hits, the
    best choice 4. When each position's only write is its first access (an append: tracegen's
    traces and the dumps) MIN is optimal: random such traces, against an exhaustive search."""
    def one_queue(evs):
        n = len(evs)
        return Trace(np.arange(n, dtype=np.int32), np.zeros(n, np.uint16), np.zeros(n, np.uint16),
                     np.array([p for p, _ in evs], np.uint32), np.array([0 if r else 1 for _, r in evs], np.uint8),
                     np.array([0.5 if r else 0.0 for _, r in evs], np.float32), 1, 1)
    rewrite = [(4, 1), (3, 1), (4, 1), (3, 1), (0, 1), (3, 1), (4, 1), (0, 0), (0, 0), (3, 1)]
    assert P.replay(one_queue(rewrite), "min", 2).summary()["read_hits"] == 3
    assert _best_read_hits(rewrite, 2) == 4
    rng = random.Random(5)
    for _ in range(300):
        n, C = rng.randint(2, 11), rng.randint(1, 3)
        evs, seen = [], set()
        for _ in range(n):
            p = rng.randrange(5)
            evs.append((p, p in seen or rng.random() < 0.5))   # a write only as a first access
            seen.add(p)
        assert P.replay(one_queue(evs), "min", C).summary()["read_hits"] == _best_read_hits(evs, C), (evs, C)
