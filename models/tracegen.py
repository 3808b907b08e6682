"""Synthetic KV access traces: deterministic decode-trace families with explicit parameters.

Every family is one generative model of attention with different component
strengths (:class:`SynthParams`, presets in :data:`FAMILY_PRESETS`). For each
decode step and each (layer, KV head) queue, the generator forms the full
attention row of the new token over every resident position, as a softmax of
additive logits:

* **sinks**: the first 1..``n_sinks`` positions (how many varies per head; the
  first token always) get ``+sink_logit`` (StreamingLLM's attention sinks);
* **recency**: ``+recent_logit * exp(-distance / recent_tau)``, distance from the
  newest position (local attention around the token being decoded);
* **heavy hitters**: a static per-(queue, position) importance ``heavy_scale * E``
  with ``E ~ Exp(1)``, drawn when the position is written, so its weight factor
  ``exp(heavy_scale * E)`` is Pareto with tail index ``1 / heavy_scale``
  (H2O's power-law accumulated attention; persistent by construction);
* **query content**: Gaussian logit noise of std ``noise``, an AR(1) process
  across steps with correlation ``rho`` (consecutive queries are similar:
  Scissorhands' persistence);
* **needles**: with probability ``needle_rate`` per (step, queue), a retrieval
  episode starts: a passage of ``needle_span`` positions, chosen among *cold*
  positions (heavy importance below the queue's median, at least
  ``needle_min_age`` positions old), gets ``+needle_logit`` for ``needle_len``
  steps. These are the query-dependent late reads that history-only policies
  miss (Quest: 1% vs 99% on passkey retrieval);
* **retrieval heads**: a fraction ``retrieval_frac`` of queues use
  ``retrieval_noise``, ``retrieval_rho`` and ``retrieval_needle_rate`` instead:
  less persistent, more needles (CateKV's ~40% adaptive heads);
* **dense early layers**: layers ``< dense_layers`` multiply all logits by
  ``dense_flatten`` (flatter rows) and read ``dense_frac`` of the resident
  positions instead of ``k``.

The reads recorded are the row's top-``k`` positions (what a sparse attention
kernel would touch), in ascending position order, with the row's weights
renormalised to sum to 1 over them (float32). The share of the full row the
top-k captured is recorded in ``meta["topk_mass_mean"]``.

Event order (``../shared/spec/contracts.md`` trace format): step 0 is prefill,
with writes of positions ``0..prefill-1`` for every queue (layer-major, then
head, then position). Decode step ``s`` (1..steps) appends position
``P = prefill + s - 1``: for each queue in layer-major order, one write of ``P``,
then the reads (which may include ``P`` itself).

Generation is vectorised with numpy and deterministic: the same family,
geometry, seed and parameters give the same trace, bit for bit.
"""
from __future__ import annotations

import dataclasses
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cxlkv.errors import CxlkvError
from cxlkv.models.trace import OP_READ, OP_WRITE, Trace

GENERATOR = "cxlkv.models.tracegen"
VERSION = 1


@dataclass(frozen=True)
class SynthParams:
    """All knobs of the generator (logits are natural-log units). Defaults are all components off."""

    #: reads per (step, queue) in sparse layers: the top-k of the attention row
    k: int = 64
    #: std of the query-dependent logit noise (stable heads)
    noise: float = 1.0
    #: step-to-step correlation of that noise, 0 <= rho < 1 (stable heads)
    rho: float = 0.5
    #: up to this many sink positions (each queue draws 1..n_sinks; position 0 is always one)
    n_sinks: int = 0
    #: logit bonus of a sink position
    sink_logit: float = 0.0
    #: logit bonus of the newest position, decaying as exp(-distance / recent_tau)
    recent_logit: float = 0.0
    #: recency decay length in positions
    recent_tau: float = 16.0
    #: power-law importance: weight factor Pareto with tail index 1 / heavy_scale (0 = off)
    heavy_scale: float = 0.0
    #: probability per (step, queue) that a needle episode starts (stable heads)
    needle_rate: float = 0.0
    #: steps a needle episode lasts
    needle_len: int = 4
    #: contiguous positions a needle covers (a passage)
    needle_span: int = 8
    #: logit bonus of needle positions during the episode
    needle_logit: float = 8.0
    #: a needle starts at least this many positions before the newest one
    needle_min_age: int = 128
    #: fraction of queues that are retrieval heads
    retrieval_frac: float = 0.0
    #: logit-noise std in retrieval heads
    retrieval_noise: float = 1.5
    #: noise correlation across steps in retrieval heads
    retrieval_rho: float = 0.2
    #: needle-episode start probability per step in retrieval heads
    retrieval_needle_rate: float = 0.05
    #: layers 0 .. dense_layers-1 read densely
    dense_layers: int = 0
    #: fraction of resident positions a dense layer reads per step
    dense_frac: float = 0.5
    #: factor applied to every logit in dense layers (< 1 flattens the row)
    dense_flatten: float = 0.3
    #: log-normal sigma of per-queue multipliers of sink, recency and heavy strengths
    head_jitter: float = 0.25

    def check(self):
        """Raise CxlkvError naming the first out-of-range parameter."""
        rules = (
            ("k", self.k >= 1, ">= 1"),
            ("noise", self.noise >= 0, ">= 0"),
            ("rho", 0 <= self.rho < 1, "in [0, 1)"),
            ("n_sinks", 0 <= self.n_sinks <= 64, "in 0..64"),
            ("sink_logit", self.sink_logit >= 0, ">= 0"),
            ("recent_logit", self.recent_logit >= 0, ">= 0"),
            ("recent_tau", self.recent_tau > 0, "> 0"),
            ("heavy_scale", 0 <= self.heavy_scale <= 4, "in [0, 4]"),
            ("needle_rate", 0 <= self.needle_rate <= 1, "in [0, 1]"),
            ("needle_len", self.needle_len >= 1, ">= 1"),
            ("needle_span", self.needle_span >= 1, ">= 1"),
            ("needle_logit", self.needle_logit >= 0, ">= 0"),
            ("needle_min_age", self.needle_min_age >= 0, ">= 0"),
            ("retrieval_frac", 0 <= self.retrieval_frac <= 1, "in [0, 1]"),
            ("retrieval_noise", self.retrieval_noise >= 0, ">= 0"),
            ("retrieval_rho", 0 <= self.retrieval_rho < 1, "in [0, 1)"),
            ("retrieval_needle_rate", 0 <= self.retrieval_needle_rate <= 1, "in [0, 1]"),
            ("dense_layers", self.dense_layers >= 0, ">= 0"),
            ("dense_frac", 0 < self.dense_frac <= 1, "in (0, 1]"),
            ("dense_flatten", 0 <= self.dense_flatten <= 1, "in [0, 1]"),
            ("head_jitter", 0 <= self.head_jitter <= 2, "in [0, 2]"),
        )
        for name, ok, what in rules:
            value = getattr(self, name)
            if not (ok and math.isfinite(value)):
                raise CxlkvError(f"synth parameter '{name}' must be {what}, got {value!r}")
        return self


PARAM_NAMES = tuple(f.name for f in dataclasses.fields(SynthParams))
_PARAM_TYPES = {f.name: type(f.default) for f in dataclasses.fields(SynthParams)}

#: Each family's overrides of the (all-off) SynthParams defaults. docs/tracegen.md gives the reasons.
FAMILY_PRESETS: dict[str, dict] = {
    # StreamingLLM: 1-4 sinks holding most of the mass, the rest query-dependent.
    "sinks": dict(n_sinks=4, sink_logit=6.0, noise=1.0, rho=0.5),
    # A local window around the newest position (sliding-window-like heads).
    "recent": dict(recent_logit=7.0, recent_tau=24.0, noise=1.0, rho=0.5),
    # H2O heavy hitters: power-law importance, persistent across steps.
    "heavy": dict(heavy_scale=1.5, noise=0.6, rho=0.8),
    # History that looks learnable (heavy hitters, a window), plus query-dependent reads of cold passages.
    "needle": dict(heavy_scale=1.2, noise=0.5, rho=0.8, recent_logit=4.0, recent_tau=16.0,
                   needle_rate=0.08, needle_len=2, needle_span=16, needle_logit=9.0),
    # 40% retrieval heads (noisy, needle-rich) among stable heavy/sink/window heads.
    "heads": dict(n_sinks=2, sink_logit=4.0, heavy_scale=1.2, noise=0.5, rho=0.8,
                  recent_logit=4.0, recent_tau=16.0, retrieval_frac=0.4,
                  retrieval_noise=1.5, retrieval_rho=0.2, retrieval_needle_rate=0.05),
    # Layers 0-1 read half the context with flat rows; later layers sparse (heavy + window).
    "dense_early": dict(dense_layers=2, dense_frac=0.5, dense_flatten=0.3,
                        heavy_scale=1.2, noise=0.7, rho=0.7, recent_logit=4.0, recent_tau=16.0),
    # Everything at once, in the proportions docs/tracegen.md justifies.
    "mixed": dict(n_sinks=4, sink_logit=6.0, head_jitter=0.5, recent_logit=4.0, recent_tau=16.0,
                  heavy_scale=1.2, noise=0.6, rho=0.8,
                  needle_rate=0.005, needle_len=4, needle_span=8, needle_logit=9.0,
                  retrieval_frac=0.4, retrieval_noise=1.5, retrieval_rho=0.3, retrieval_needle_rate=0.03,
                  dense_layers=1, dense_frac=0.5, dense_flatten=0.3),
}
FAMILIES: tuple[str, ...] = tuple(FAMILY_PRESETS)

# Work in chunks of decode steps holding at most this many (step, queue, position) cells.
_CHUNK_CELLS = 1 << 21
_MAX_POSITIONS = 1 << 24
# The generator holds a few float64 arrays of n_queues x positions; beyond this it refuses.
_MAX_STATIC_CELLS = 1 << 25


def family_params(family: str, **params) -> SynthParams:
    """The family's preset with ``params`` overriding it, validated."""
    if family not in FAMILY_PRESETS:
        raise CxlkvError(f"unknown trace family '{family}'; valid families: {', '.join(FAMILIES)}")
    unknown = sorted(set(params) - set(PARAM_NAMES))
    if unknown:
        raise CxlkvError(f"unknown synth parameter(s) {', '.join(unknown)}; valid parameters: "
                         f"{', '.join(PARAM_NAMES)}")
    merged = {**FAMILY_PRESETS[family], **params}
    return SynthParams(**{name: _coerce(name, value) for name, value in merged.items()}).check()


def _coerce(name, value):
    want = _PARAM_TYPES[name]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CxlkvError(f"synth parameter '{name}' must be a number, got {value!r}")
    if want is int:
        if float(value) != int(value):
            raise CxlkvError(f"synth parameter '{name}' must be an integer, got {value!r}")
        return int(value)
    return float(value)


def load_params(path) -> dict:
    """Parameter overrides from a JSON object file (keys starting with '_' are comments/provenance).

    Returns ``{name: value}`` for :func:`synth`; unknown names or non-numbers raise CxlkvError.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CxlkvError(f"{path}: no such parameter file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CxlkvError(f"{path}: cannot read parameter file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CxlkvError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CxlkvError(f"{path}: must hold a JSON object of parameter names to values")
    params = {k: v for k, v in data.items() if not k.startswith("_")}
    unknown = sorted(set(params) - set(PARAM_NAMES))
    if unknown:
        raise CxlkvError(f"{path}: unknown synth parameter(s) {', '.join(unknown)}; valid parameters: "
                         f"{', '.join(PARAM_NAMES)}")
    for name, value in params.items():
        try:
            _coerce(name, value)
        except CxlkvError as exc:
            raise CxlkvError(f"{path}: {exc}") from None
    return params


def _check_geometry(n_layers, n_kv_heads, prefill, steps, seed):
    for name, value, lo, hi in (("n_layers", n_layers, 1, 65536), ("n_kv_heads", n_kv_heads, 1, 65536),
                                ("prefill", prefill, 1, _MAX_POSITIONS), ("steps", steps, 1, _MAX_POSITIONS)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
            raise CxlkvError(f"synth {name} must be an integer in {lo}..{hi}, got {value!r}")
    if prefill + steps > _MAX_POSITIONS:
        raise CxlkvError(f"synth prefill + steps must be at most {_MAX_POSITIONS}, got {prefill + steps}")
    if n_layers * n_kv_heads * (prefill + steps) > _MAX_STATIC_CELLS:
        raise CxlkvError(f"synth geometry too large: queues x positions = {n_layers * n_kv_heads} x "
                         f"{prefill + steps} exceeds {_MAX_STATIC_CELLS:,} (generate fewer queues or steps)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CxlkvError(f"synth seed must be a non-negative integer, got {seed!r}")


def synth(family: str, *, n_layers=4, n_kv_heads=2, prefill=512, steps=512, seed=0, **params) -> Trace:
    """A deterministic synthetic decode trace of ``family`` (see the module docstring), validated."""
    p = family_params(family, **params)
    _check_geometry(n_layers, n_kv_heads, prefill, steps, seed)
    n_layers, n_kv_heads, prefill, steps, seed = map(int, (n_layers, n_kv_heads, prefill, steps, seed))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(family.encode())])))
    nq = n_layers * n_kv_heads
    npos = prefill + steps
    q_layer = np.arange(nq) // n_kv_heads

    # Per-queue roles and strengths.
    retrieval = np.zeros(nq, bool)
    retrieval[rng.permutation(nq)[:int(round(p.retrieval_frac * nq))]] = True
    dense = q_layer < p.dense_layers
    jitter = np.exp(p.head_jitter * rng.standard_normal((3, nq)))
    sink_count = rng.integers(1, max(p.n_sinks, 1) + 1, size=nq) if p.n_sinks else np.zeros(nq, int)
    noise_std = np.where(retrieval, p.retrieval_noise, p.noise)
    rho = np.where(retrieval, p.retrieval_rho, p.rho)
    needle_rate = np.where(retrieval, p.retrieval_needle_rate, p.needle_rate)
    flatten = np.where(dense, p.dense_flatten, 1.0)

    # Static logits per (queue, position): power-law importance plus sinks.
    heavy = p.heavy_scale * jitter[2][:, None] * rng.standard_exponential((nq, npos))
    static = heavy.copy()
    pos_idx = np.arange(npos)
    static += np.where(pos_idx[None, :] < sink_count[:, None], p.sink_logit * jitter[0][:, None], 0.0)
    recent_amp = p.recent_logit * jitter[1]

    episodes = _needle_episodes(rng, p, needle_rate, heavy, prefill, steps)

    # Decode: one row per (step, queue) over all positions, in chunks of steps.
    z = rng.standard_normal((nq, npos))
    innovation = np.sqrt(1.0 - rho * rho)[:, None]          # keeps the noise's variance at 1
    chunk = max(1, _CHUNK_CELLS // (nq * npos))
    parts, kept_mass, near_zero = [], [], []
    for s0 in range(1, steps + 1, chunk):
        s1 = min(s0 + chunk, steps + 1)
        n = s1 - s0
        newest = prefill + np.arange(s0, s1) - 1                 # position appended at each step
        eps = rng.standard_normal((n, nq, npos))
        for i in range(n):                                       # AR(1) query content across steps
            z = rho[:, None] * z + innovation * eps[i]
            eps[i] = z
        logits = eps
        logits *= noise_std[None, :, None]
        logits += static[None]
        dist = newest[:, None] - pos_idx[None, :]                # (n, npos)
        if p.recent_logit:
            logits += recent_amp[None, :, None] * np.exp(-np.maximum(dist, 0) / p.recent_tau)[:, None, :]
        for (e0, e1, q, lo, hi) in episodes:
            if e0 < s1 and e1 > s0:
                logits[max(e0, s0) - s0:min(e1, s1) - s0, q, lo:hi] += p.needle_logit
        logits *= flatten[None, :, None]
        logits[np.broadcast_to((dist < 0)[:, None, :], logits.shape)] = -np.inf
        logits -= logits.max(axis=2, keepdims=True)
        w = np.exp(logits, out=logits)
        w /= w.sum(axis=2, keepdims=True)

        resident = newest + 1
        k_sparse = np.minimum(p.k, resident)                     # (n,) reads per sparse row
        k_dense = np.ceil(p.dense_frac * resident).astype(np.int64)
        kq = np.where(dense[None, :], k_dense[:, None], k_sparse[:, None])   # (n, nq)
        # Top-kq of each row: the kq-th largest weight is the threshold (one np.partition per
        # step and group, since kq is the same for all sparse rows, and for all dense rows, of
        # a step); ties at the threshold go to the lowest positions.
        thr = np.empty((n, nq))
        for i in range(n):
            for group, kk in ((~dense, k_sparse[i]), (dense, k_dense[i])):
                if group.any():
                    thr[i, group] = np.partition(w[i, group], npos - kk, axis=1)[:, npos - kk]
        thr = thr[:, :, None]
        sel = w > thr
        tie = w == thr
        need = kq - sel.sum(axis=2)
        if (tie.sum(axis=2) != need).any():                      # more ties than places left
            sel |= tie & (np.cumsum(tie, axis=2) <= need[:, :, None])
        else:
            sel |= tie
        # Full-row sparsity: resident entries below 1% of the row's largest weight.
        near_zero.append(((w < 0.01 * w.max(axis=2, keepdims=True)).sum(axis=2) - (npos - resident)[:, None])
                         .ravel() / np.repeat(resident, nq))
        si, qi, pi = (ix.astype(np.int32) for ix in np.nonzero(sel))  # row-major: step, queue, ascending pos
        wsel = w[si, qi, pi]
        rows_mass = np.bincount(si.astype(np.int64) * nq + qi, weights=wsel, minlength=n * nq)
        kept_mass.append(rows_mass)                              # mass the top-k holds, per row
        sc = (wsel / rows_mass[si.astype(np.int64) * nq + qi]).astype(np.float32)
        parts.append((s0, si, qi, pi, sc, kq.ravel(), newest))

    trace = _assemble(parts, prefill, n_layers, n_kv_heads)
    kept = np.concatenate(kept_mass)
    sparse_rows = np.tile(~dense, steps)
    nz = np.concatenate(near_zero)
    trace.meta = {
        "generator": GENERATOR, "version": VERSION, "family": family, "seed": seed,
        "n_layers": n_layers, "n_kv_heads": n_kv_heads, "prefill": prefill, "steps": steps,
        "params": dataclasses.asdict(p),
        "retrieval_queues": np.flatnonzero(retrieval).tolist(),
        "needle_episodes": len(episodes),
        # [first_step, end_step (exclusive), layer, head, first_pos, end_pos (exclusive)]
        "needles": [[e0, e1, q // n_kv_heads, q % n_kv_heads, lo, hi] for (e0, e1, q, lo, hi) in episodes],
        # Sparse (non-dense) layers: top-k share of the full row, and the full row's near-zero share.
        "topk_mass_mean": round(float(kept[sparse_rows].mean()), 6) if sparse_rows.any() else None,
        "row_near_zero_mean": round(float(nz[sparse_rows].mean()), 6) if sparse_rows.any() else None,
    }
    return trace.validate(f"<synth {family}>")


def _needle_episodes(rng, p, needle_rate, heavy, prefill, steps):
    """[(first_step, end_step, queue, lo_pos, hi_pos)] of needle episodes, in start order."""
    nq = len(needle_rate)
    if not needle_rate.any():
        return []
    starts = rng.random((steps, nq)) < needle_rate[None, :]
    cold_cut = np.median(heavy, axis=1) if heavy.any() else np.full(nq, np.inf)
    out = []
    for si, q in zip(*np.nonzero(starts)):
        s = int(si) + 1
        newest = prefill + s - 1
        last_start = newest - p.needle_min_age - p.needle_span + 1
        if last_start < 1:                          # too early in the sequence for a needle
            continue
        cand = np.arange(1, last_start + 1)         # never position 0, the sink of every head with sinks
        cold = cand[heavy[q, cand] <= cold_cut[q]]
        start = int(rng.choice(cold if len(cold) else cand))
        out.append((s, min(s + p.needle_len, steps + 1), int(q), start, start + p.needle_span))
    return out


def _assemble(parts, prefill, n_layers, n_kv_heads) -> Trace:
    """Prefill writes, then per (step, queue): the append write followed by that row's reads."""
    nq = n_layers * n_kv_heads
    pre_q = np.repeat(np.arange(nq), prefill)
    pre_pos = np.tile(np.arange(prefill), nq)
    steps_l, q_l, pos_l, op_l, sc_l = [np.zeros(nq * prefill, np.int64)], [pre_q], [pre_pos], \
        [np.full(nq * prefill, OP_WRITE, np.uint8)], [np.zeros(nq * prefill, np.float32)]
    for (s0, si, qi, pi, sc, kq, newest) in parts:
        n = len(newest)
        start = np.zeros(n * nq, np.int64)                       # each row: 1 write + kq reads
        np.cumsum(kq[:-1] + 1, out=start[1:])
        total = int(start[-1] + kq[-1] + 1)
        first_read = np.cumsum(kq) - kq                          # index of each row's first read
        row = si.astype(np.int64) * nq + qi
        idx_read = start[row] + 1 + (np.arange(len(row)) - first_read[row])
        step = np.empty(total, np.int64)
        q = np.empty(total, np.int64)
        pos = np.empty(total, np.int64)
        op = np.full(total, OP_READ, np.uint8)
        sco = np.zeros(total, np.float32)
        step[start] = np.repeat(np.arange(s0, s0 + n), nq)
        q[start] = np.tile(np.arange(nq), n)
        pos[start] = np.repeat(newest, nq)
        op[start] = OP_WRITE
        step[idx_read], q[idx_read], pos[idx_read], sco[idx_read] = si + s0, qi, pi, sc
        steps_l.append(step), q_l.append(q), pos_l.append(pos), op_l.append(op), sc_l.append(sco)
    q = np.concatenate(q_l)
    return Trace(step=np.concatenate(steps_l).astype(np.int32),
                 layer=(q // n_kv_heads).astype(np.uint16), head=(q % n_kv_heads).astype(np.uint16),
                 pos=np.concatenate(pos_l).astype(np.uint32), op=np.concatenate(op_l),
                 score=np.concatenate(sc_l), n_layers=n_layers, n_kv_heads=n_kv_heads)
