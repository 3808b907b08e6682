"""Policy simulator: replay a KV access trace through eviction (and prefetch) policies.

Semantics are those of ``../shared/spec/contracts.md`` ("Replay semantics"):

* one queue per (layer, KV head), at most ``C`` resident entries each, queues
  independent; events in file order;
* **write**: resident -> an access (policy state updated); otherwise evict a
  victim if the queue is full, then insert;
* **read**: counted; resident -> ``read_hits`` += 1 and an access; otherwise a
  demand fill: evict a victim if full, insert;
* prefetching policies insert prefetched entries the same way (a prefetch is
  not a read); ``prefetch_hits`` counts reads that hit an entry brought in by
  prefetch and not touched since.

Because queues are independent, the replay groups the events by queue (a stable
counting sort, so file order is kept within a queue) and replays one queue
after the other: every per-queue structure then fits in cache.

Policies (``docs/policy.md`` gives the exact rules and their ties):

``lru``        victim = least recently accessed (read, write or prefetch insert).
``min``        Belady: victim = next access (same queue) farthest in the future,
               never-again farthest, ties to the smallest position, no bypass.
``h2o``        H2O's heavy hitters plus recent window: the ``h2o_recent`` percent of the
               budget nearest the newest position (positions > newest - C*h2o_recent/100)
               are never evicted; among the rest, victim = smallest accumulated attention
               (sum of read scores since the start of the trace, kept across evictions);
               ties LRU. ``h2o_recent=0``: accumulated attention alone.
``tova``       victim = lowest attention from the last query: smallest
               (step of last access, score of that access) with a write counting
               as score 1; ties LRU.
``streaming``  ``sinks`` first positions kept, then the most recent positions:
               victim = smallest non-sink position (if only sinks are resident,
               the smallest sink).
``ema``        the seed's rule as written: EMA of attention (``scoring.ema_update``,
               UQ0.16, α), victim = highest ``scoring`` priority
               ``(1 - ema) x (1 - exp(-age / τ))``; ties LRU. O(C) per eviction
               (every resident's priority changes with time): it is a baseline.
``ema+prefetch`` ``ema`` plus the [P - W, P + W] neighbour prefetch on every read.
``hw``         the policy the tracker RTL implements (``hw_*`` below, and the
               specification in ``docs/policy.md``): per entry an attention EMA that
               decays per step; victim = smallest time-invariant *retention deadline*
               ``D = t_last + τ·ln(ema)`` quantised to 2^g-step buckets, ties LRU within
               a bucket; τ = 0 (exactly LRU) normally, τ = 64 while the queue is *dense*
               (its previous step read more entries than it holds); pinned positions
               never evicted.

The replay also records, per event, whether a read hit and how many prefetches it
issued; ``ReplayResult.step_layer_reads`` and ``step_times`` turn them into the
*modelled time per decode step* (an analytic model of tier latencies and bandwidths,
not a measurement: ``docs/policy.md``, "Modelled time per decode step").

The replay core is compiled with numba (``cache=True``); this module imports
numpy and numba, so the CLI imports it only inside ``run``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from cxlkv.errors import CxlkvError
from cxlkv.models import prefetch as PF
from cxlkv.models import scoring as S
from cxlkv.models.trace import Trace

POLICIES = ("lru", "min", "h2o", "tova", "streaming", "ema", "ema+prefetch", "hw")

# Policy ids of the compiled core.
P_LRU, P_MIN, P_H2O, P_TOVA, P_STREAMING, P_EMA, P_HW = range(7)
_POLICY_ID = {"lru": P_LRU, "min": P_MIN, "h2o": P_H2O, "tova": P_TOVA, "streaming": P_STREAMING,
              "ema": P_EMA, "ema+prefetch": P_EMA, "hw": P_HW}

#: Largest position the simulator accepts (per-position state is a dense array).
MAX_POSITION = (1 << 24) - 1

#: Bytes one (token, KV head) entry occupies in a tier: K and V at head_dim 128 in FP16.
DEFAULT_ENTRY_BYTES = 512

# Per-queue integer counters (columns of ReplayResult.per_queue).
Q_READS, Q_HITS, Q_WRITES, Q_FILLS, Q_EVICTIONS, Q_PREFETCHES, Q_PF_HITS, Q_NO_VICTIM, Q_PF_UNUSED = range(9)
N_QCOUNTS = 9
QCOUNT_NAMES = ("reads", "read_hits", "writes", "fills", "evictions", "prefetches", "prefetch_hits",
                "no_victim", "prefetch_evicted_unused")

# ----------------------------------------------------------------------------------------------
# hw fixed point (the RTL implements these bit for bit; docs/policy.md "hw specification")
# ----------------------------------------------------------------------------------------------

#: log2(1 + m/256) in UQ0.8, rounded to nearest, m = 0..255 (a 256 x 8 ROM; entry 255 is 255).
LOG2_FRAC_Q8 = tuple(min(int(math.floor(math.log2(1 + m / 256) * 256 + 0.5)), 255) for m in range(256))
HW_LOG2_FRAC_BITS = 8
#: width of τ·ln2 in UQ.8 (τ <= 2^20 steps -> < 2^28)
HW_TLN_FRAC_BITS = 8


def hw_log2_q8(ema: int) -> int:
    """floor-ish log2 of a UQ0.16 integer ``ema`` >= 1, as UQ4.8: ``msb*256 + LOG2_FRAC_Q8[next 8 bits]``."""
    if not 1 <= ema <= S.SCORE_MAX:
        raise ValueError(f"ema must be in 1..65535, got {ema}")
    msb = ema.bit_length() - 1
    m = ((ema << 8) >> msb) & 0xFF
    return (msb << HW_LOG2_FRAC_BITS) + LOG2_FRAC_Q8[m]


def hw_tau_ln2_q8(tau: int) -> int:
    """``round(τ · ln 2 · 256)``: the per-configuration constant of the deadline."""
    return int(math.floor(tau * math.log(2) * 256 + 0.5))


def hw_retention(ema: int, tau_ln2_q8: int) -> int:
    """Retention time ``f(ema) = τ · ln(ema)`` in whole steps (0 for ema = 0):
    how long an EMA decaying as exp(-age/τ) stays at or above one LSB."""
    if ema == 0:
        return 0
    return (hw_log2_q8(ema) * tau_ln2_q8) >> (HW_LOG2_FRAC_BITS + HW_TLN_FRAC_BITS)


def hw_decay(ema: int, age: int, rate: S.DecayRate) -> int:
    """``ema · exp(-age/τ)`` in UQ0.16 with the scoring unit's exp2 table: round to nearest."""
    e = S.SCORE_ONE - S.recency_fixed(age, rate)
    return (ema * e + 0x8000) >> 16


def score_to_uq16(score: float) -> int:
    """An attention weight (float32, >= 0) as a UQ0.16 sample: ``min(floor(x·65536 + 0.5), 65535)``."""
    return min(int(math.floor(float(np.float32(score)) * 65536.0 + 0.5)), S.SCORE_MAX)


# ----------------------------------------------------------------------------------------------
# Parameters
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PolicyParams:
    """Every policy parameter, validated. Unused ones are ignored by a policy."""

    #: streaming: attention-sink positions kept (positions 0 .. sinks-1)
    sinks: int = 4
    #: ema / ema+prefetch: EMA weight α, UQ0.16 (seed: α -> 0.1 "stable")
    ema_alpha: int = 6554
    #: ema / ema+prefetch: recency time constant τ in steps (the seed's worked example)
    ema_tau: int = 1000
    #: prefetch half-window W: on a read of P, prefetch [P-W, P+W] (0 = off). ema+prefetch and hw.
    window: int = 0
    #: h2o: percent of the budget kept for the most recent positions (H2O's recent window; the
    #: paper splits its budget evenly between heavy hitters and recent tokens); 0 = heavy hitters only
    h2o_recent: int = 50
    #: hw: EMA weight α, UQ0.16
    hw_alpha: int = 16384
    #: hw: decay time constant τ in steps (the EMA decays by exp(-1/τ) per step)
    hw_tau: int = 8
    #: hw: τ of the retention deadline D = t + τ·ln(ema) in normal mode (0: no attention term,
    #: the key is the access step alone, so the order is exactly LRU)
    hw_rank_tau: int = 0
    #: hw: that τ while the queue is *dense* (its previous step read more entries than it holds);
    #: 0 = no dense mode
    hw_rank_tau_long: int = 64
    #: hw: deadline bucket granularity, log2 steps (bucket = deadline >> bucket_bits)
    hw_bucket_bits: int = 3
    #: hw: positions 0 .. pinned-1 are never evicted (attention sinks)
    hw_pinned: int = 0
    #: hw: UQ0.16 sample a write folds into the EMA (credit of a freshly appended token)
    hw_write_sample: int = 0
    #: hw: UQ0.16 credit added (saturating) to a read's attention sample: a read counts even at low weight
    hw_read_credit: int = 0
    #: bytes one entry moves between tiers (bytes-moved figures and the modelled step time only)
    entry_bytes: int = DEFAULT_ENTRY_BYTES
    # The modelled time per decode step (docs/policy.md, "Modelled time per decode step"): reporting
    # only, like entry_bytes. Positive finite numbers, not integers.
    #: fast tier (device DRAM behind the CXL link): load-to-use latency, ns (inside the measured
    #: 140-410 ns CXL load-to-use)
    fast_lat_ns: float = 250.0
    #: fast tier bandwidth, GB/s (10^9 bytes/s): a CXL x16 Gen5 link
    fast_gbytes_s: float = 64.0
    #: slow tier (flash behind the tier mover): read latency, us (an assumption: NAND, tens of us)
    slow_lat_us: float = 50.0
    #: slow tier bandwidth, GB/s (10^9 bytes/s) (an assumption: a PCIe Gen5 x4 SSD's sequential read)
    slow_gbytes_s: float = 14.0

    RANGES = {
        "sinks": (0, MAX_POSITION + 1), "h2o_recent": (0, 99),
        "ema_alpha": (0, S.SCORE_MAX), "ema_tau": (S.TAU_MIN, S.TAU_MAX),
        "window": (0, 4096), "hw_alpha": (0, S.SCORE_MAX), "hw_tau": (S.TAU_MIN, S.TAU_MAX), "hw_rank_tau": (0, S.TAU_MAX),
        "hw_rank_tau_long": (0, S.TAU_MAX),
        "hw_bucket_bits": (0, 24), "hw_pinned": (0, MAX_POSITION + 1), "hw_write_sample": (0, S.SCORE_MAX),
        "hw_read_credit": (0, S.SCORE_MAX), "entry_bytes": (1, 1 << 20),
    }

    def check(self) -> "PolicyParams":
        for name, (lo, hi) in self.RANGES.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise CxlkvError(f"policy parameter '{name}' must be an integer in {lo}..{hi}, got {v!r}")
        for name in TIMING_PARAMS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise CxlkvError(f"parameter '{name}' must be a positive finite number, got {v!r}")
        return self


#: The step-time model's parameters (numbers, not integers; every policy takes them, like entry_bytes).
TIMING_PARAMS = ("fast_lat_ns", "fast_gbytes_s", "slow_lat_us", "slow_gbytes_s")
#: Parameters that size reported figures only (they change no decision): every policy takes them.
REPORTING_PARAMS = ("entry_bytes",) + TIMING_PARAMS


#: Defaults that differ by policy (ema+prefetch prefetches by default).
POLICY_DEFAULTS = {"ema+prefetch": {"window": 4}}
PARAM_NAMES = tuple(PolicyParams.RANGES) + TIMING_PARAMS


def make_params(policy: str, **overrides) -> PolicyParams:
    """The parameters ``policy`` runs with: its defaults, then ``overrides`` (validated)."""
    if policy not in POLICIES:
        raise CxlkvError(f"unknown policy '{policy}'; valid policies: {', '.join(POLICIES)}")
    unknown = sorted(set(overrides) - set(PARAM_NAMES))
    if unknown:
        raise CxlkvError(f"unknown policy parameter(s) {', '.join(unknown)}; valid: {', '.join(PARAM_NAMES)}")
    merged = {**POLICY_DEFAULTS.get(policy, {}), **overrides}
    return check_params(policy, PolicyParams(**merged))


def check_params(policy: str, p: PolicyParams) -> PolicyParams:
    """``p`` validated, and valid for ``policy`` (only ema+prefetch and hw prefetch)."""
    p.check()
    if policy == "min" and p.window:
        raise CxlkvError("policy 'min' does not prefetch (window must be 0)")
    if policy not in ("ema+prefetch", "hw") and p.window:
        raise CxlkvError(f"policy '{policy}' does not prefetch; 'window' applies to ema+prefetch and hw")
    return p


# ----------------------------------------------------------------------------------------------
# Compiled core
# ----------------------------------------------------------------------------------------------

_EXP2 = np.array(S.EXP2_NEG_Q16, dtype=np.int64)
_LOG2F = np.array(LOG2_FRAC_Q8, dtype=np.int64)
_NEVER = np.int64(1) << 62


@njit(cache=True)
def _sift_up(heap, hidx, k1, k2, i):
    s = heap[i]
    while i > 0:
        parent = (i - 1) >> 1
        t = heap[parent]
        if k1[s] < k1[t] or (k1[s] == k1[t] and k2[s] < k2[t]):
            heap[i] = t
            hidx[t] = i
            i = parent
        else:
            break
    heap[i] = s
    hidx[s] = i


@njit(cache=True)
def _sift_down(heap, hidx, k1, k2, i, n):
    s = heap[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n:
            a = heap[c]
            b = heap[c + 1]
            if k1[b] < k1[a] or (k1[b] == k1[a] and k2[b] < k2[a]):
                c += 1
        t = heap[c]
        if k1[t] < k1[s] or (k1[t] == k1[s] and k2[t] < k2[s]):
            heap[i] = t
            hidx[t] = i
            i = c
        else:
            break
    heap[i] = s
    hidx[s] = i


@njit(cache=True)
def _recency(age, mant, shift, exp2):
    """scoring.recency_fixed: 1 - exp(-age/τ) in UQ1.16 (age already saturated)."""
    y = (age * mant) >> shift
    yi = y >> 10
    if yi < 17:
        e = exp2[y & 1023] >> yi
    else:
        e = 0
    return 65536 - e


@njit(cache=True)
def _step_age(last, cur):
    a = (cur - last) % 4294967296
    if a > 16777215:
        a = 16777215
    return a


@njit(cache=True)
def _ema_update(ema, sample, alpha):
    return ema + (((sample - ema) * alpha + 0x8000) >> 16)


@njit(cache=True)
def _to_uq16(x):
    v = np.int64(np.floor(np.float64(x) * 65536.0 + 0.5))
    return 65535 if v > 65535 else v


# The per-event helpers the replay cores share are inlined by numba (inline='always'): called
# as separate functions, the hw bucket core ran at 0.65x its speed (tb/policy/bench.py's
# configuration); the list helpers below are faster left to LLVM.

@njit(cache=True, inline='always')
def _hw_touch(ema_of, tlast_of, seen, p, s, demand, is_read, x, alpha, mant, shift, rcredit, wsample, exp2):
    """hw metadata of position ``p`` accessed at step ``s``; returns its new EMA. The EMA decays
    over the steps since the last access (0 for a position never seen); a demand access then
    folds its sample in (a read: its attention plus the read credit, saturating; a write: the
    write sample), a prefetch insert (``demand`` false) folds nothing. t_last becomes ``s``."""
    if seen[p]:
        e = 65536 - _recency(_step_age(tlast_of[p], s), mant, shift, exp2)
        ema = (ema_of[p] * e + 0x8000) >> 16
    else:
        ema = 0
    if demand:
        if is_read:
            smp = _to_uq16(x) + rcredit
            if smp > 65535:
                smp = 65535
        else:
            smp = wsample
        ema = _ema_update(ema, smp, alpha)
    ema_of[p] = ema
    seen[p] = 1
    tlast_of[p] = s
    return ema


@njit(cache=True, inline='always')
def _hw_dense(s, is_read, cur_s, step_reads, dense, has_dense, C):
    """hw dense mode, per event of a queue: (cur_s, step_reads, dense) after an event at step
    ``s``. At each new step the queue is dense if its previous step read more entries than it
    holds (``C``); never without a dense-mode table (``has_dense`` false)."""
    if s != cur_s:
        dense = has_dense and step_reads > C
        step_reads = 0
        cur_s = s
    if is_read:
        step_reads += 1
    return cur_s, step_reads, dense


@njit(cache=True, inline='always')
def _store_counts(qcounts, qscores, q, reads, hits, writes, fills, evictions, prefetches, pf_hits, no_victim,
                  pf_unused, sum_reads, sum_hits):
    """One queue's counters into row ``q`` of ReplayResult.per_queue / per_queue_score."""
    qcounts[q, Q_READS] = reads
    qcounts[q, Q_HITS] = hits
    qcounts[q, Q_WRITES] = writes
    qcounts[q, Q_FILLS] = fills
    qcounts[q, Q_EVICTIONS] = evictions
    qcounts[q, Q_PREFETCHES] = prefetches
    qcounts[q, Q_PF_HITS] = pf_hits
    qcounts[q, Q_NO_VICTIM] = no_victim
    qcounts[q, Q_PF_UNUSED] = pf_unused
    qscores[q, 0] = sum_reads
    qscores[q, 1] = sum_hits


@njit(cache=True, inline='always')
def _evict(slot_of, slot_pos, sl, record, victims, i):
    """Slot ``sl``'s position leaves the queue; recorded as event ``i``'s victim if ``record``."""
    vp = slot_pos[sl]
    slot_of[vp] = -1
    if record:
        victims[i] = vp


@njit(cache=True)
def _position_state(npos):
    """Per-position metadata (kept across evictions inside a queue: the tracker's DRAM
    metadata): slot (-1: not resident), hw/ema EMA, step of the last access, seen flag."""
    return (np.full(npos, -1, np.int64), np.zeros(npos, np.int64), np.zeros(npos, np.int64),
            np.zeros(npos, np.uint8))


@njit(cache=True)
def _hw_iparams(iparams):
    """The hw entries of the cores' iparams: alpha, mant, shift, bucket bits, pinned, write sample,
    read credit."""
    return iparams[5], iparams[6], iparams[7], iparams[9], iparams[10], iparams[11], iparams[12]


# Doubly-linked lists of slots (prv/nxt arrays, -1 = none) given by their (head, tail);
# each returns the list's new (head, tail), _pop_front the slot first.

@njit(cache=True)
def _unlink(prv, nxt, sl, head, tail):
    a = prv[sl]
    b = nxt[sl]
    if a >= 0:
        nxt[a] = b
    else:
        head = b
    if b >= 0:
        prv[b] = a
    else:
        tail = a
    return head, tail


@njit(cache=True)
def _push_back(prv, nxt, sl, head, tail):
    prv[sl] = tail
    nxt[sl] = -1
    if tail >= 0:
        nxt[tail] = sl
    else:
        head = sl
    return head, sl


@njit(cache=True)
def _push_front(prv, nxt, sl, head, tail):
    nxt[sl] = head
    prv[sl] = -1
    if head >= 0:
        prv[head] = sl
    else:
        tail = sl
    return sl, tail


@njit(cache=True)
def _pop_front(prv, nxt, head, tail):
    sl = head
    head = nxt[sl]
    if head >= 0:
        prv[head] = -1
    else:
        tail = -1
    return sl, head, tail


def hw_retention_table(tau_ln2_q8: int) -> np.ndarray:
    """``hw_retention(ema)`` for every ema in 0..65535 (what the RTL's log2 ROM + multiplier give)."""
    ema = np.arange(1 << 16, dtype=np.int64)
    msb = np.zeros_like(ema)
    for b in range(1, 16):
        msb[ema >= (1 << b)] = b
    m = ((ema << 8) >> msb) & 0xFF
    f = (((msb << 8) + _LOG2F[m]) * tau_ln2_q8) >> 16
    f[0] = 0
    return f


@njit(cache=True)
def _hw_retention(ema, tln, log2f):
    if ema == 0:
        return 0
    msb = 0
    t = ema
    while t > 1:
        t >>= 1
        msb += 1
    m = ((ema << 8) >> msb) & 0xFF
    return (((msb << 8) + log2f[m]) * tln) >> 16


@njit(cache=True)
def _group_by_queue(layer, head, n_kv_heads, nq):
    """Stable counting sort of event indices by queue (layer * n_kv_heads + head): (order, start)
    with queue q's events order[start[q]:start[q+1]] in file order. No per-event queue array:
    the index is recomputed, to keep memory at 8 bytes per event on traces of 10^8 events."""
    n = layer.shape[0]
    start = np.zeros(nq + 1, np.int64)
    for i in range(n):
        start[np.int64(layer[i]) * n_kv_heads + head[i] + 1] += 1
    for q in range(nq):
        start[q + 1] += start[q]
    fill = start[:-1].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        q = np.int64(layer[i]) * n_kv_heads + head[i]
        order[fill[q]] = i
        fill[q] += 1
    return order, start


# the prefetch rule of the engine's golden model, compiled for the replay core (one definition)
_pf_triggers = njit(cache=True)(PF.triggers)
_pf_window_bounds = njit(cache=True)(PF.window_bounds)
_pf_first_candidate = njit(cache=True)(PF.first_candidate)
_pf_next_candidate = njit(cache=True)(PF.next_candidate)


@njit(cache=True)
def _replay_core(layer, head, n_kv_heads, nq, step, pos, op, score, npos, policy, C, iparams, hw_ftab,
                 hw_ftab_long, record, victims, read_hit, event_prefetches, qcounts, qscores):
    """Replay every queue. iparams: [sinks, ema_alpha, ema_mant, ema_shift, window,
    hw_alpha, hw_mant, hw_shift, hw_tln, hw_bucket_bits, hw_pinned, hw_write_sample,
    hw_read_credit, prefetch_trigger_all, h2o_recent (percent of C)]. Per event i, read_hit[i] = 1
    for a read hit and, with a window, event_prefetches[i] = the prefetches it issued (the inputs
    of the step-time model)."""
    sinks = iparams[0]
    ema_alpha = iparams[1]
    ema_mant = iparams[2]
    ema_shift = iparams[3]
    window = iparams[4]
    hw_alpha, hw_mant, hw_shift, hw_g, pinned, hw_wsample, hw_rcredit = _hw_iparams(iparams)
    pf_trigger_all = iparams[13]
    # h2o: the most recent h2o_r positions (> newest - h2o_r) are kept (key +inf); h2o_r < C, so
    # a full queue always holds an entry outside the window
    h2o_r = C * iparams[14] // 100 if policy == 2 else 0
    exp2 = _EXP2
    log2f = _LOG2F
    NEVER = _NEVER

    n = step.shape[0]
    order, start = _group_by_queue(layer, head, n_kv_heads, nq)

    # per position (persist across evictions inside a queue: the tracker's DRAM metadata)
    slot_of, ema_of, tlast_of, seen = _position_state(npos)
    acc_of = np.zeros(npos, np.float64)
    # per slot (resident entries)
    slot_pos = np.zeros(C, np.int64)
    k1 = np.zeros(C, np.float64)
    k2 = np.zeros(C, np.int64)
    pf = np.zeros(C, np.uint8)
    heap = np.zeros(C, np.int64)
    hidx = np.full(C, -1, np.int64)
    # MIN: next access (index within the queue's event list) of each event
    nxt = np.zeros(1, np.int64)
    last_idx = np.zeros(1, np.int64)
    if policy == 1:
        longest = 0
        for q in range(nq):
            if start[q + 1] - start[q] > longest:
                longest = start[q + 1] - start[q]
        nxt = np.empty(longest, np.int64)
        last_idx = np.full(npos, NEVER, np.int64)
    # prefetch scratch
    pf_list = np.empty(2 * window + 1, np.int64)

    for q in range(nq):
        lo = start[q]
        hi = start[q + 1]
        if lo == hi:
            continue
        nres = 0
        hn = 0
        seq = np.int64(0)
        newest = np.int64(-1)
        pmin = np.int64(npos)
        if policy == 1:
            for j in range(hi - 1, lo - 1, -1):
                p = pos[order[j]]
                nxt[j - lo] = last_idx[p]
                last_idx[p] = j
            for j in range(lo, hi):
                last_idx[pos[order[j]]] = NEVER
        reads = 0
        hits = 0
        writes = 0
        fills = 0
        evictions = 0
        prefetches = 0
        pf_hits = 0
        no_victim = 0
        pf_unused = 0
        sum_reads = 0.0
        sum_hits = 0.0

        # hw dense mode: the queue's previous step read more entries than the queue holds
        cur_s = np.int64(step[order[lo]])
        step_reads = 0
        dense = False
        for j in range(lo, hi):
            i = order[j]
            p = np.int64(pos[i])
            s = np.int64(step[i])
            is_read = op[i] == 0
            x = score[i]
            cur_s, step_reads, dense = _hw_dense(s, is_read, cur_s, step_reads, dense, hw_ftab_long.shape[0] > 0, C)
            if p > newest:
                if h2o_r > 0:
                    # positions leaving h2o's recent window become evictable by accumulated attention
                    lo_w = max(newest - h2o_r + 1, 0)
                    hi_w = min(p - h2o_r, newest)
                    for pw in range(lo_w, hi_w + 1):
                        sw = slot_of[pw]
                        if sw >= 0 and hidx[sw] >= 0:
                            k1[sw] = acc_of[pw]
                            _sift_up(heap, hidx, k1, k2, hidx[sw])
                newest = p
            if p < pmin:
                pmin = p
            if is_read:
                reads += 1
                sum_reads += x
            else:
                writes += 1
            # npf: number of positions to handle this event: the demand one, then prefetches.
            # The rule (trigger, window, order) is models/prefetch.py's, compiled here.
            npf = 0
            if _pf_triggers(is_read, slot_of[p] >= 0, pf_trigger_all, window):
                a, b = _pf_window_bounds(p, window, newest)
                pp = _pf_first_candidate(a, p)
                while pp <= b:
                    pf_list[npf] = pp
                    npf += 1
                    pp = _pf_next_candidate(pp, p)
            pf_before = prefetches
            for t in range(npf + 1):
                if t == 0:
                    pp = p
                    is_pf = False
                else:
                    pp = pf_list[t - 1]
                    is_pf = True
                    if slot_of[pp] >= 0:
                        continue
                seq += 1
                # ---- policy state update for an access (or a prefetch insert) ----
                if policy == 6:
                    # a prefetch insert refreshes t_last and decays the EMA, folds nothing
                    ema = _hw_touch(ema_of, tlast_of, seen, pp, s, not is_pf, is_read, x, hw_alpha, hw_mant,
                                    hw_shift, hw_rcredit, hw_wsample, exp2)
                    # ties within a bucket: normal-mode accesses oldest first (seq), dense-mode
                    # accesses newest first (-seq) and before them (a stack that shields the
                    # established set from a dense step's stream of new arrivals)
                    if dense:
                        key1 = np.float64((s + hw_ftab_long[ema]) >> hw_g)
                        key2 = -seq
                    else:
                        key1 = np.float64((s + hw_ftab[ema]) >> hw_g)
                        key2 = seq
                elif policy == 5:
                    if not is_pf:
                        if is_read:
                            ema_of[pp] = _ema_update(ema_of[pp], _to_uq16(x), ema_alpha)
                    tlast_of[pp] = s
                    key1 = 0.0
                    key2 = seq
                elif policy == 0:
                    key1 = np.float64(seq)
                    key2 = 0
                elif policy == 1:
                    key1 = -np.float64(nxt[j - lo])
                    key2 = pp
                elif policy == 2:
                    if is_read and not is_pf:
                        acc_of[pp] += x
                    key1 = acc_of[pp] if pp <= newest - h2o_r else np.inf
                    key2 = seq
                elif policy == 3:
                    if is_pf:
                        key1 = np.float64(s)
                    elif is_read:
                        xx = np.float64(x)
                        if xx > 1.0:
                            xx = 1.0
                        key1 = np.float64(s) + 0.5 * xx
                    else:
                        key1 = np.float64(s) + 0.5
                    key2 = seq
                else:
                    key1 = 1.0 if pp < sinks else 0.0
                    key2 = pp
                evictable = not (policy == 6 and pp < pinned)

                sl = slot_of[pp]
                if sl >= 0:
                    # resident: an access
                    if is_read and t == 0:
                        hits += 1
                        sum_hits += x
                        read_hit[i] = 1
                        if pf[sl]:
                            pf_hits += 1
                    pf[sl] = 0
                    k1[sl] = key1
                    k2[sl] = key2
                    if hidx[sl] >= 0:
                        hi_ = hidx[sl]
                        _sift_up(heap, hidx, k1, k2, hi_)
                        _sift_down(heap, hidx, k1, k2, hidx[sl], hn)
                    continue
                # not resident: demand fill, write insert or prefetch insert
                if t == 0:
                    if is_read:
                        fills += 1
                else:
                    prefetches += 1
                if nres < C:
                    sl = nres
                    nres += 1
                else:
                    # choose a victim
                    if policy == 5:
                        best = -1
                        bestp = np.int64(-1)
                        bestk = np.int64(0)
                        for c in range(C):
                            pc = slot_pos[c]
                            age = _step_age(tlast_of[pc], s)
                            r = _recency(age, ema_mant, ema_shift, exp2)
                            pr = ((65536 - ema_of[pc]) * r + 0x8000) >> 16
                            if pr > 65535:
                                pr = 65535
                            if pr > bestp or (pr == bestp and k2[c] < bestk):
                                best = c
                                bestp = pr
                                bestk = k2[c]
                        sl = best
                    else:
                        if hn == 0:
                            # nothing evictable (every resident entry pinned): bypass
                            no_victim += 1
                            if record and t == 0:
                                victims[i] = -2
                            continue
                        sl = heap[0]
                        hn -= 1
                        if hn > 0:
                            heap[0] = heap[hn]
                            hidx[heap[0]] = 0
                            _sift_down(heap, hidx, k1, k2, 0, hn)
                        hidx[sl] = -1
                    _evict(slot_of, slot_pos, sl, record and t == 0, victims, i)
                    evictions += 1
                    if pf[sl]:
                        pf_unused += 1
                slot_of[pp] = sl
                slot_pos[sl] = pp
                pf[sl] = 1 if is_pf else 0
                k1[sl] = key1
                k2[sl] = key2
                if policy != 5 and evictable:
                    heap[hn] = sl
                    hidx[sl] = hn
                    hn += 1
                    _sift_up(heap, hidx, k1, k2, hn - 1)
                else:
                    hidx[sl] = -1
            if npf:
                event_prefetches[i] = prefetches - pf_before

        _store_counts(qcounts, qscores, q, reads, hits, writes, fills, evictions, prefetches, pf_hits, no_victim,
                      pf_unused, sum_reads, sum_hits)
        # reset the per-position state this queue touched (positions pmin-W .. newest+W)
        a = pmin - window
        if a < 0:
            a = 0
        b = newest + window + 1
        if b > npos:
            b = npos
        slot_of[a:b] = -1
        ema_of[a:b] = 0
        tlast_of[a:b] = 0
        seen[a:b] = 0
        acc_of[a:b] = 0.0
        for c in range(C):
            hidx[c] = -1
            pf[c] = 0


def _flush_core_if_the_prefetch_rule_changed():
    """numba's on-disk cache checks only the cached function's own file: after an edit of the
    prefetch rule in models/prefetch.py, a cached ``_replay_core`` would still run the old rule.
    Keep a digest of the rule's code beside the cache and flush the core's cache when it differs."""
    import hashlib
    import os
    digest = hashlib.sha256()
    for fn in (PF.triggers, PF.window_bounds, PF.first_candidate, PF.next_candidate):
        digest.update(fn.__code__.co_code + repr(fn.__code__.co_consts).encode())
    digest = digest.hexdigest()
    cache = getattr(_replay_core, "_cache", None)
    path = getattr(cache, "cache_path", None)
    if not path or not hasattr(cache, "flush"):
        return
    stamp = os.path.join(path, "policy._replay_core.prefetch_rule")
    try:
        with open(stamp) as f:
            if f.read() == digest:
                return
    except OSError:
        pass
    cache.flush()
    try:
        with open(stamp, "w") as f:
            f.write(digest)
    except OSError:
        pass        # a read-only checkout compiles afresh each time: slower, never stale


_flush_core_if_the_prefetch_rule_changed()


@njit(cache=True)
def _replay_lru(layer, head, n_kv_heads, nq, step, pos, op, score, npos, C, record, victims, read_hit, qcounts,
                qscores):
    """lru with an O(1) doubly-linked recency list (same results as the heap core's lru)."""
    n = step.shape[0]
    order, start = _group_by_queue(layer, head, n_kv_heads, nq)
    slot_of = np.full(npos, -1, np.int64)
    slot_pos = np.zeros(C, np.int64)
    prv = np.zeros(C, np.int64)
    nxt = np.zeros(C, np.int64)
    for q in range(nq):
        lo = start[q]
        hi = start[q + 1]
        if lo == hi:
            continue
        nres = 0
        first = -1      # least recently used
        last = -1       # most recently used
        reads = 0
        hits = 0
        writes = 0
        fills = 0
        evictions = 0
        sum_reads = 0.0
        sum_hits = 0.0
        for j in range(lo, hi):
            i = order[j]
            p = pos[i]
            is_read = op[i] == 0
            if is_read:
                reads += 1
                sum_reads += score[i]
            else:
                writes += 1
            sl = slot_of[p]
            if sl >= 0:
                if is_read:
                    hits += 1
                    sum_hits += score[i]
                    read_hit[i] = 1
                if sl != last:
                    # unlink, append at the MRU end
                    first, last = _unlink(prv, nxt, sl, first, last)
                    first, last = _push_back(prv, nxt, sl, first, last)
                continue
            if is_read:
                fills += 1
            if nres < C:
                sl = nres
                nres += 1
            else:
                sl, first, last = _pop_front(prv, nxt, first, last)
                _evict(slot_of, slot_pos, sl, record, victims, i)
                evictions += 1
            slot_of[p] = sl
            slot_pos[sl] = p
            first, last = _push_back(prv, nxt, sl, first, last)
        _store_counts(qcounts, qscores, q, reads, hits, writes, fills, evictions, 0, 0, 0, 0, sum_reads, sum_hits)
        for c in range(nres):
            slot_of[slot_pos[c]] = -1


def hw_bucket_count(params: PolicyParams) -> int:
    """Deadline buckets a queue needs so that live keys never alias: ``(f(65535) >> g) + 2``."""
    longest = max(hw_rank_tau(params), hw_rank_tau_long(params))
    return (hw_retention(S.SCORE_MAX, hw_tau_ln2_q8(longest)) >> params.hw_bucket_bits) + 2


def hw_rank_tau_long(params: PolicyParams) -> int:
    """The deadline's τ in dense mode (0: no dense mode)."""
    if not params.hw_rank_tau_long:
        return 0
    return S.sanitize_config(1, params.hw_rank_tau_long)[1]


def hw_tables(params: PolicyParams) -> tuple[np.ndarray, np.ndarray]:
    """Retention tables (normal, dense mode); the dense one is empty when there is no dense mode."""
    tl = hw_rank_tau_long(params)
    return (hw_retention_table(hw_tau_ln2_q8(hw_rank_tau(params))),
            hw_retention_table(hw_tau_ln2_q8(tl)) if tl else np.zeros(0, np.int64))


def hw_rank_tau(params: PolicyParams) -> int:
    """The τ of the deadline in normal mode; 0 = no attention term (the key is recency alone)."""
    return params.hw_rank_tau


@njit(cache=True)
def _replay_hw_buckets(layer, head, n_kv_heads, nq, step, pos, op, score, npos, C, iparams, hw_ftab,
                       hw_ftab_long, NB, record, victims, read_hit, qcounts, qscores):
    """hw (no prefetch) with the tracker's own structure: per queue, a ring of NB deadline
    buckets, each a FIFO list, plus one list of expired entries that whole buckets are spliced
    onto, in deadline order, as the step passes them. O(1) per event; equals the heap core
    (victim = min (bucket key, sequence)) because a bucket holds one key and is appended in
    sequence order, and the expired list is the buckets concatenated in key order."""
    hw_alpha, hw_mant, hw_shift, hw_g, pinned, hw_wsample, hw_rcredit = _hw_iparams(iparams)
    exp2 = _EXP2
    n = step.shape[0]
    order, start = _group_by_queue(layer, head, n_kv_heads, nq)
    slot_of, ema_of, tlast_of, seen = _position_state(npos)
    slot_pos = np.zeros(C, np.int64)
    slot_key = np.zeros(C, np.int64)
    in_list = np.zeros(C, np.uint8)
    prv = np.zeros(C, np.int64)
    nxt = np.zeros(C, np.int64)
    bhead = np.full(NB, -1, np.int64)
    btail = np.full(NB, -1, np.int64)
    for q in range(nq):
        lo = start[q]
        hi = start[q + 1]
        if lo == hi:
            continue
        nres = 0
        ehead = -1
        etail = -1
        kc = np.int64(step[order[lo]]) >> hw_g     # keys below kc are expired
        hint = kc
        reads = 0
        hits = 0
        writes = 0
        fills = 0
        evictions = 0
        no_victim = 0
        sum_reads = 0.0
        sum_hits = 0.0
        pmin = np.int64(npos)
        pmax = np.int64(-1)
        cur_s = np.int64(step[order[lo]])
        step_reads = 0
        dense = False
        for j in range(lo, hi):
            i = order[j]
            p = np.int64(pos[i])
            s = np.int64(step[i])
            is_read = op[i] == 0
            x = score[i]
            cur_s, step_reads, dense = _hw_dense(s, is_read, cur_s, step_reads, dense, hw_ftab_long.shape[0] > 0, C)
            if p < pmin:
                pmin = p
            if p > pmax:
                pmax = p
            # the step passed some buckets: splice them, in key order, onto the expired list
            kn = s >> hw_g
            if kn > kc:
                cnt = kn - kc
                if cnt > NB:
                    cnt = NB
                for d in range(kc, kc + cnt):
                    b = d % NB
                    h = bhead[b]
                    if h >= 0:
                        if etail >= 0:
                            nxt[etail] = h
                            prv[h] = etail
                        else:
                            ehead = h
                        etail = btail[b]
                        bhead[b] = -1
                        btail[b] = -1
                kc = kn
            if is_read:
                reads += 1
                sum_reads += x
            else:
                writes += 1
            # metadata update (the heap core's hw)
            ema = _hw_touch(ema_of, tlast_of, seen, p, s, True, is_read, x, hw_alpha, hw_mant, hw_shift, hw_rcredit,
                            hw_wsample, exp2)
            if dense:
                key = (s + hw_ftab_long[ema]) >> hw_g
            else:
                key = (s + hw_ftab[ema]) >> hw_g
            sl = slot_of[p]
            if sl >= 0:
                if is_read:
                    hits += 1
                    sum_hits += x
                    read_hit[i] = 1
                if not in_list[sl]:
                    slot_key[sl] = key
                    continue
                # unlink from its list (expired if its key is below the cursor)
                if slot_key[sl] < kc:
                    ehead, etail = _unlink(prv, nxt, sl, ehead, etail)
                else:
                    bk = slot_key[sl] % NB
                    bhead[bk], btail[bk] = _unlink(prv, nxt, sl, bhead[bk], btail[bk])
            else:
                if is_read:
                    fills += 1
                if nres < C:
                    sl = nres
                    nres += 1
                else:
                    if ehead >= 0:
                        sl, ehead, etail = _pop_front(prv, nxt, ehead, etail)
                    else:
                        # lowest non-empty bucket; every non-empty bucket's key is >= hint
                        sl = -1
                        d = hint if hint > kc else kc
                        while d < kc + NB:
                            b = d % NB
                            if bhead[b] >= 0:
                                sl, bhead[b], btail[b] = _pop_front(prv, nxt, bhead[b], btail[b])
                                break
                            d += 1
                        hint = d
                        if sl < 0:
                            no_victim += 1
                            if record:
                                victims[i] = -2
                            continue
                    _evict(slot_of, slot_pos, sl, record, victims, i)
                    evictions += 1
                slot_of[p] = sl
                slot_pos[sl] = p
            slot_key[sl] = key
            if p < pinned:
                in_list[sl] = 0
                continue
            in_list[sl] = 1
            if key < hint:
                hint = key
            bk = key % NB
            if dense:
                # push at the front: a bucket is [dense-mode entries, newest first] then
                # [normal-mode entries, oldest first], the order of (key, +-seq)
                bhead[bk], btail[bk] = _push_front(prv, nxt, sl, bhead[bk], btail[bk])
            else:
                bhead[bk], btail[bk] = _push_back(prv, nxt, sl, bhead[bk], btail[bk])
        _store_counts(qcounts, qscores, q, reads, hits, writes, fills, evictions, 0, 0, no_victim, 0, sum_reads,
                      sum_hits)
        slot_of[pmin:pmax + 1] = -1
        ema_of[pmin:pmax + 1] = 0
        tlast_of[pmin:pmax + 1] = 0
        seen[pmin:pmax + 1] = 0
        bhead[:] = -1
        btail[:] = -1
        in_list[:] = 0


# ----------------------------------------------------------------------------------------------
# Modelled time per decode step (docs/policy.md, "Modelled time per decode step")
# ----------------------------------------------------------------------------------------------

@njit(cache=True)
def _count_step_layer_reads(step, layer, op, read_hit, event_prefetches, n_layers):
    """Per (step, layer) that has reads, in file order (steps non-decreasing): the cell's step and
    layer, its reads served by the fast tier, its read misses and the prefetches those reads
    issued. ``event_prefetches`` is per event, or of length 1 when the replay did not prefetch.
    Two passes (count the cells, then fill them), so nothing per event is allocated."""
    n = step.shape[0]
    with_prefetch = event_prefetches.shape[0] == n
    # pass 1: a layer opens a cell at its first read of each step
    cell_of = np.full(n_layers, -1, np.int64)
    ncell = 0
    first = 0           # first cell of the current step
    for i in range(n):
        if i > 0 and step[i] != step[i - 1]:
            first = ncell
        if op[i] == 0:
            l = layer[i]
            if cell_of[l] < first:
                cell_of[l] = ncell
                ncell += 1
    cell_step = np.zeros(ncell, np.int64)
    cell_layer = np.zeros(ncell, np.int64)
    fast_reads = np.zeros(ncell, np.int64)
    read_misses = np.zeros(ncell, np.int64)
    prefetches = np.zeros(ncell, np.int64)
    # pass 2: the same cells, filled
    cell_of[:] = -1
    ncell = 0
    first = 0
    for i in range(n):
        if i > 0 and step[i] != step[i - 1]:
            first = ncell
        if op[i] == 0:
            l = layer[i]
            c = cell_of[l]
            if c < first:
                c = ncell
                ncell += 1
                cell_of[l] = c
                cell_step[c] = step[i]
                cell_layer[c] = l
            if read_hit[i]:
                fast_reads[c] += 1
            else:
                read_misses[c] += 1
            if with_prefetch:
                prefetches[c] += event_prefetches[i]
    return cell_step, cell_layer, fast_reads, read_misses, prefetches


@dataclass(frozen=True)
class StepLayerReads:
    """What each (step, layer) with reads asked of the tiers, one element per such cell, cells in
    step order: reads served by the fast tier (H), read misses fetched from the slow tier, bypasses
    (no_victim) included (M), prefetches those reads issued, from the slow tier (P)."""
    step: np.ndarray
    layer: np.ndarray
    fast_reads: np.ndarray
    read_misses: np.ndarray
    prefetches: np.ndarray


def layer_time_ns(fast_entries, slow_entries, params: PolicyParams) -> np.ndarray:
    """The model's time of one layer of one step, ns: the two tiers work in parallel, each pays its
    latency once (a layer's reads issue together) if it serves anything, plus bytes / bandwidth;
    GB/s = 10^9 bytes/s is bytes per ns."""
    fast_entries = np.asarray(fast_entries, np.float64)
    slow_entries = np.asarray(slow_entries, np.float64)
    b = params.entry_bytes
    fast = np.where(fast_entries > 0, params.fast_lat_ns, 0.0) + fast_entries * b / params.fast_gbytes_s
    slow = np.where(slow_entries > 0, params.slow_lat_us * 1e3, 0.0) + slow_entries * b / params.slow_gbytes_s
    return np.maximum(fast, slow)


@dataclass(frozen=True)
class StepTimes:
    """Modelled time of every step with reads (layers in sequence: the sum of its layers' times),
    µs: as replayed, and the two references with every read served by the fast tier or every read
    by the slow tier (no prefetch)."""
    step: np.ndarray
    us: np.ndarray
    us_all_fast: np.ndarray
    us_all_slow: np.ndarray


def modelled_step_times(cells: StepLayerReads, params: PolicyParams) -> StepTimes:
    """Sum the layers of each step (the cells of a step are contiguous)."""
    reads = cells.fast_reads + cells.read_misses
    if not reads.size:
        empty = np.zeros(0, np.float64)
        return StepTimes(np.zeros(0, np.int64), empty, empty, empty)
    starts = np.flatnonzero(np.r_[True, cells.step[1:] != cells.step[:-1]])

    def per_step(fast, slow):
        return np.add.reduceat(layer_time_ns(fast, slow, params), starts) / 1e3
    none = np.zeros_like(reads)
    return StepTimes(cells.step[starts], per_step(cells.fast_reads, cells.read_misses + cells.prefetches),
                     per_step(reads, none), per_step(none, reads))


# ----------------------------------------------------------------------------------------------
# Python API
# ----------------------------------------------------------------------------------------------

@dataclass
class ReplayResult:
    policy: str
    entries: int
    params: PolicyParams
    n_layers: int
    n_kv_heads: int
    events: int
    per_queue: np.ndarray          # int64 [n_queues, N_QCOUNTS]
    per_queue_score: np.ndarray    # float64 [n_queues, 2]: sum of read scores, sum of hit scores
    victims: np.ndarray | None = field(default=None, repr=False)
    #: the replayed trace, and per event 1 for a read hit and the prefetches it issued (length 1
    #: when the replay did not prefetch): what step_layer_reads counts
    trace: Trace | None = field(default=None, repr=False)
    read_hit: np.ndarray | None = field(default=None, repr=False)
    event_prefetches: np.ndarray | None = field(default=None, repr=False)

    def total(self, name: str) -> int:
        return int(self.per_queue[:, QCOUNT_NAMES.index(name)].sum())

    def step_layer_reads(self) -> StepLayerReads:
        """H, M and P of every (step, layer) with reads, exactly as replayed."""
        t = self.trace
        return StepLayerReads(*_count_step_layer_reads(t.step, t.layer, t.op, self.read_hit, self.event_prefetches,
                                                       np.int64(t.n_layers)))

    def step_times(self) -> StepTimes:
        """The modelled time of every step with reads, with this replay's parameters."""
        return modelled_step_times(self.step_layer_reads(), self.params)

    def step_time_summary(self) -> dict:
        """The modelled time per decode step: its parameters, the number of steps it averages over
        (those with reads) and the means, µs (0 without reads)."""
        out = {name: float(getattr(self.params, name)) for name in TIMING_PARAMS}
        times = self.step_times()
        out["modelled_steps"] = int(times.step.size)
        for key, v in (("modelled_step_us", times.us), ("modelled_step_us_all_fast", times.us_all_fast),
                       ("modelled_step_us_all_slow", times.us_all_slow)):
            out[key] = float(v.mean()) if v.size else 0.0
        return out

    def summary(self, per_queue: bool = False) -> dict:
        """The contract's JSON object (plus prefetch accuracy, bytes moved and a per-queue digest)."""
        t = {name: self.total(name) for name in QCOUNT_NAMES}
        sr, sh = (float(v) for v in self.per_queue_score.sum(axis=0))
        reads, hits = t["reads"], t["read_hits"]
        eb = self.params.entry_bytes
        demand_bytes = t["fills"] * eb
        prefetch_bytes = t["prefetches"] * eb
        out = {
            "policy": self.policy,
            "entries": self.entries,
            "events": self.events,
            "reads": reads,
            "read_hits": hits,
            "hit_rate": hits / reads if reads else 0.0,
            "writes": t["writes"],
            "fills": t["fills"],
            "evictions": t["evictions"],
            "prefetches": t["prefetches"],
            "prefetch_hits": t["prefetch_hits"],
            "attention_recall": sh / sr if sr > 0 else 0.0,
            "prefetch_accuracy": t["prefetch_hits"] / t["prefetches"] if t["prefetches"] else 0.0,
            "prefetch_evicted_unused": t["prefetch_evicted_unused"],
            "no_victim": t["no_victim"],
            "entry_bytes": eb,
            "demand_bytes": demand_bytes,
            "prefetch_bytes": prefetch_bytes,
            "bytes_moved": demand_bytes + prefetch_bytes,
            "n_queues": self.n_layers * self.n_kv_heads,
            **self.step_time_summary(),
            "params": policy_param_dict(self.policy, self.params),
        }
        pq = self.per_queue
        r = pq[:, Q_READS]
        with np.errstate(invalid="ignore", divide="ignore"):
            qhr = np.where(r > 0, pq[:, Q_HITS] / np.maximum(r, 1), np.nan)
        have = qhr[~np.isnan(qhr)]
        if have.size:
            out["queue_hit_rate"] = {"min": float(have.min()), "median": float(np.median(have)),
                                     "max": float(have.max())}
        if per_queue:
            rows = []
            for q in range(pq.shape[0]):
                row = {"layer": q // self.n_kv_heads, "head": q % self.n_kv_heads}
                row.update({name: int(pq[q, k]) for k, name in enumerate(QCOUNT_NAMES)})
                row["hit_rate"] = float(pq[q, Q_HITS] / pq[q, Q_READS]) if pq[q, Q_READS] else 0.0
                srq, shq = self.per_queue_score[q]
                row["attention_recall"] = float(shq / srq) if srq > 0 else 0.0
                rows.append(row)
            out["per_queue"] = rows
        return out


#: The parameters each policy runs with; the rest of PolicyParams leaves its decisions unchanged.
POLICY_PARAMS = {
    "lru": (), "min": (), "h2o": ("h2o_recent",), "tova": (), "streaming": ("sinks",),
    "ema": ("ema_alpha", "ema_tau"), "ema+prefetch": ("ema_alpha", "ema_tau", "window"),
    "hw": ("hw_alpha", "hw_tau", "hw_rank_tau", "hw_rank_tau_long", "hw_bucket_bits", "hw_pinned",
           "hw_write_sample", "hw_read_credit", "window"),
}


def policy_param_dict(policy: str, p: PolicyParams) -> dict:
    """The parameters that matter to ``policy`` (for reports)."""
    return {k: getattr(p, k) for k in POLICY_PARAMS[policy]}


def accepted_params(policy: str, *, reporting: bool = True, trigger: bool = True) -> tuple[str, ...]:
    """The NAME=VALUE names a replay of ``policy`` takes: its own (POLICY_PARAMS); REPORTING_PARAMS
    (``entry_bytes`` and the step-time model's: they size every policy's bytes-moved and step-time
    figures) unless the caller reports neither; and, for a prefetching policy,
    ``prefetch_trigger_all`` (not a policy parameter: ``prefetch.pop_trigger``) unless the caller
    has no trigger to set."""
    names = list(POLICY_PARAMS[policy])
    if reporting:
        names += REPORTING_PARAMS
    if trigger and "window" in names:
        names.append("prefetch_trigger_all")
    return tuple(names)


def refuse_foreign_params(policy: str, names, accepted, error=CxlkvError, subject: str | None = None):
    """Raise ``error`` if any of ``names`` is not in ``accepted`` (see accepted_params): a parameter
    of another policy would be ignored, so say so rather than replay without it."""
    foreign = sorted(set(names) - set(accepted))
    if foreign:
        raise error(f"{', '.join(foreign)}: not a parameter of {subject or f'policy {policy!r}'} "
                    f"(its parameters: {', '.join(accepted) or 'none'})")


def context_length(trace: Trace) -> int:
    """The context a percentage budget refers to: ``max(pos) + 1`` over the trace."""
    return int(trace.pos.max()) + 1 if len(trace) else 0


def entries_from_budget(trace: Trace, percent: float) -> int:
    """``ceil(percent / 100 x context_length)``, at least 1."""
    if not (percent > 0 and percent <= 100):
        raise CxlkvError(f"a percentage budget must be in (0, 100], got {percent}")
    return max(1, math.ceil(percent * context_length(trace) / 100 - 1e-9))


def _iparams(p: PolicyParams, prefetch_trigger: int = PF.TRIGGER_READ) -> np.ndarray:
    ea, et, _ = S.sanitize_config(p.ema_alpha, p.ema_tau)
    ha, ht, _ = S.sanitize_config(p.hw_alpha, p.hw_tau)
    er, hr = S.decay_rate(et), S.decay_rate(ht)
    return np.array([p.sinks, ea, er.mant, er.shift, p.window, ha, hr.mant, hr.shift,
                     hw_tau_ln2_q8(hw_rank_tau(p)), p.hw_bucket_bits, p.hw_pinned, p.hw_write_sample, p.hw_read_credit,
                     prefetch_trigger, p.h2o_recent], dtype=np.int64)


def replay(trace: Trace, policy: str, entries: int, *, params: PolicyParams | None = None,
           record_victims: bool = False, prefetch_trigger: int = PF.TRIGGER_READ,
           **overrides) -> ReplayResult:
    """Replay ``trace`` through ``policy`` with ``entries`` resident entries per queue.

    ``prefetch_trigger`` (prefetching policies with ``window`` > 0): which reads start a
    prefetch, ``models.prefetch.TRIGGER_READ`` (every read, the default) or
    ``TRIGGER_MISS`` (demand misses only, the engine's reset configuration).

    ``record_victims``: also return, per event, the position the demand insert of
    that event evicted (-1: none, -2: no evictable entry, the miss bypassed the
    fast tier). Prefetch inserts' victims are not recorded.

    Per-event read hits and prefetch counts are always recorded (1 byte per event, and 4
    with a prefetch window) for the modelled step time, which needs the steps in order: a
    trace whose step decreases is refused, as ``load_trace`` refuses it.
    """
    if policy not in POLICIES:
        raise CxlkvError(f"unknown policy '{policy}'; valid policies: {', '.join(POLICIES)}")
    if params is None:
        params = make_params(policy, **overrides)
    elif overrides:
        raise TypeError("give either params or keyword overrides")
    else:
        check_params(policy, params)
    if isinstance(entries, bool) or not isinstance(entries, (int, np.integer)) or entries < 1:
        raise CxlkvError(f"entries must be a positive integer, got {entries!r}")
    entries = int(entries)
    if prefetch_trigger not in (PF.TRIGGER_MISS, PF.TRIGGER_READ):
        raise CxlkvError(f"prefetch_trigger must be {PF.TRIGGER_MISS} (misses) or {PF.TRIGGER_READ} (every read), "
                         f"got {prefetch_trigger!r}")
    if entries > MAX_POSITION + 1:
        raise CxlkvError(f"entries must be at most {MAX_POSITION + 1}, got {entries}")
    n = len(trace)
    maxpos = int(trace.pos.max()) if n else 0
    if maxpos > MAX_POSITION:
        i = int(np.flatnonzero(trace.pos > MAX_POSITION)[0])
        raise CxlkvError(f"key 'pos', event {i}: position {int(trace.pos[i])} is beyond the simulator's limit "
                         f"{MAX_POSITION}")
    trace.check_queue_state("the policy simulator")
    nq = trace.n_queues
    qcounts = np.zeros((nq, N_QCOUNTS), np.int64)
    qscores = np.zeros((nq, 2), np.float64)
    victims = np.full(n if record_victims else 1, -1, np.int64)
    # per event, for the step-time model (1 byte per event; prefetch counts only with a window)
    read_hit = np.zeros(n, np.uint8)
    event_prefetches = np.zeros(n if params.window else 1, np.int32)
    if n and np.any(trace.step[1:] < trace.step[:-1]):
        # the step-time model groups a step's events by adjacency (the contract's order)
        i = int(np.flatnonzero(trace.step[1:] < trace.step[:-1])[0]) + 1
        raise CxlkvError(f"key 'step', event {i}: step decreases ({int(trace.step[i - 1])} -> {int(trace.step[i])})")
    if n and policy == "lru":
        _replay_lru(trace.layer, trace.head, np.int64(trace.n_kv_heads), np.int64(nq), trace.step, trace.pos,
                    trace.op, trace.score, np.int64(maxpos + 1), np.int64(entries), record_victims, victims,
                    read_hit, qcounts, qscores)
    elif n and policy == "hw" and params.window == 0:
        ftab, ftab_long = hw_tables(params)
        _replay_hw_buckets(trace.layer, trace.head, np.int64(trace.n_kv_heads), np.int64(nq), trace.step,
                           trace.pos, trace.op, trace.score, np.int64(maxpos + 1), np.int64(entries),
                           _iparams(params), ftab, ftab_long, np.int64(hw_bucket_count(params)), record_victims,
                           victims, read_hit, qcounts, qscores)
    elif n:
        _replay_core(trace.layer, trace.head, np.int64(trace.n_kv_heads), np.int64(nq),
                     trace.step, trace.pos, trace.op, trace.score,
                     np.int64(maxpos + 1 + params.window), np.int64(_POLICY_ID[policy]), np.int64(entries),
                     _iparams(params, prefetch_trigger), *hw_tables(params), record_victims, victims, read_hit,
                     event_prefetches, qcounts, qscores)
    return ReplayResult(policy, entries, params, trace.n_layers, trace.n_kv_heads, n, qcounts, qscores,
                        victims if record_victims else None, trace, read_hit, event_prefetches)
