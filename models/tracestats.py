"""Statistics of a KV access trace: what `cxlkv trace info` prints.

Definitions (all vectorised numpy; a few million events take well under a second):

* A **row** is the set of reads of one (step, queue), queue = (layer, KV head): one
  query's attention. Row mass = sum of its scores. Rows with zero mass are left
  out of the mass-based averages (``zero_mass_rows`` counts them).
* **Concentration** (mean over rows): ``top1pct_share`` / ``top10pct_share``, the
  mass share of the row's top ceil(1%) / ceil(10%) read entries (at least one);
  ``gini`` of the row's scores; ``entropy_norm``, entropy / ln(row size)
  (1 = uniform; rows of one read count as 0); ``small_entries``, the fraction of
  read entries carrying less than 1% of their row's mass.
* **Sink share**: mean over rows of the mass on positions ``0 .. sink_positions-1``.
* **Local share** for each W: mean over rows of the mass within ``W`` positions of
  the queue's newest position (the highest position written in that queue up to
  and including the row's step, or the row's highest read if that is higher).
* **Persistence**: for each queue, the Jaccard index of the row's top-``persist_k``
  positions (by score; all reads if fewer) with the previous step's row of the
  same queue (only when that step has a row). ``persistence_jaccard`` is the
  mean over such row pairs; ``head_stability`` gives each queue's mean.
* **Cold reads** for each gap G: the share of reads (and of read mass) whose
  (queue, position) had not been accessed (read or written) for at least G
  steps; ``first_touch_reads`` counts reads of a never-written, never-read entry.
"""
from __future__ import annotations

import math

import numpy as np

from cxlkv.models.trace import OP_READ, OP_WRITE, Trace

DEFAULT_WINDOWS = (16, 64, 256)
DEFAULT_COLD_GAPS = (64, 256)
DEFAULT_PERSIST_K = 32
DEFAULT_SINK_POSITIONS = 4


def _summary(x) -> dict:
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return {"mean": None, "min": None, "max": None}
    return {"mean": float(x.mean()), "min": float(x.min()), "max": float(x.max())}


def _mean(x):
    return float(np.mean(x)) if len(x) else None


def trace_stats(trace: Trace, *, windows=DEFAULT_WINDOWS, cold_gaps=DEFAULT_COLD_GAPS,
                persist_k=DEFAULT_PERSIST_K, sink_positions=DEFAULT_SINK_POSITIONS) -> dict:
    """A JSON-serialisable dict of the statistics in the module docstring."""
    trace.check_queue_state("trace info")
    n = len(trace)
    queue = trace.queue
    step = trace.step.astype(np.int64)
    pos = trace.pos.astype(np.int64)
    is_read = trace.op == OP_READ
    is_write = trace.op == OP_WRITE
    out = {
        "events": n, "n_layers": trace.n_layers, "n_kv_heads": trace.n_kv_heads,
        "n_queues": trace.n_queues, "reads": int(is_read.sum()), "writes": int(is_write.sum()),
        "steps": int(len(np.unique(step))), "first_step": int(step[0]) if n else None,
        "last_step": int(step[-1]) if n else None,
        "max_pos": int(pos.max()) if n else None,
        "generator": trace.meta.get("generator"), "family": trace.meta.get("family"),
    }
    if trace.meta.get("generator") == "cxlkv.models.tracegen":
        # What the generator saw of the full rows, before keeping only the top-k.
        out["full_rows"] = {k: trace.meta.get(k) for k in ("topk_mass_mean", "row_near_zero_mean")}
    if not is_read.any():
        out.update(rows=0, decode_steps=0)
        return out

    # Rows: reads grouped by (step, queue), in (step, queue) order.
    r_idx = np.flatnonzero(is_read)
    r_step, r_q, r_pos = step[r_idx], queue[r_idx], pos[r_idx]
    r_score = trace.score[r_idx].astype(np.float64)
    row_key = r_step * trace.n_queues + r_q
    if len(row_key) < 2 or (row_key[1:] >= row_key[:-1]).all():    # the usual layout: O(n)
        new_row = np.empty(len(row_key), bool)
        new_row[:1] = True
        new_row[1:] = row_key[1:] != row_key[:-1]
        keys, row = row_key[new_row], np.cumsum(new_row) - 1
    else:
        keys, row = np.unique(row_key, return_inverse=True)
    n_rows = len(keys)
    row_q = keys % trace.n_queues
    row_step = keys // trace.n_queues
    size = np.bincount(row, minlength=n_rows)
    mass = np.bincount(row, weights=r_score, minlength=n_rows)
    ok = mass > 0
    inv_mass = np.where(ok, 1.0 / np.where(ok, mass, 1.0), 0.0)
    share = r_score * inv_mass[row]                       # each read's share of its row
    out.update(rows=n_rows, decode_steps=int(len(np.unique(row_step))),
               reads_per_row=_summary(size), row_mass=_summary(mass), zero_mass_rows=int((~ok).sum()))

    # Concentration: sort each row by descending score.
    # Sort each row by descending score, ties in file order: for non-negative float32 the bit
    # pattern orders like the value, so (row, ~bits) is one int64 key for a stable radix sort.
    bits = trace.score[r_idx].astype(np.float32, copy=False).view(np.uint32).astype(np.int64)
    order = np.argsort((row.astype(np.int64) << 32) | (0xFFFFFFFF - bits), kind="stable")
    s_row, s_share = row[order], share[order]
    first = np.cumsum(size) - size
    rank = np.arange(len(order)) - first[s_row]           # 0 = largest in its row
    conc = {}
    for name, frac in (("top1pct_share", 0.01), ("top10pct_share", 0.10)):
        m = np.maximum(1, np.ceil(frac * size - 1e-9)).astype(np.int64)
        conc[name] = _mean(np.bincount(s_row, weights=np.where(rank < m[s_row], s_share, 0.0),
                                       minlength=n_rows)[ok])
    # Gini with ascending rank i = size - rank (1-based): G = 2 sum(i x) / (n sum x) - (n + 1) / n
    asc = (size[s_row] - rank).astype(np.float64)
    g = 2.0 * np.bincount(s_row, weights=asc * s_share, minlength=n_rows) / size - (size + 1.0) / size
    conc["gini"] = _mean(g[ok])
    plogp = np.where(share > 0, share * np.log(np.where(share > 0, share, 1.0)), 0.0)
    ent = -np.bincount(row, weights=plogp, minlength=n_rows)
    multi = ok & (size > 1)
    conc["entropy_norm"] = _mean(ent[multi] / np.log(size[multi])) if multi.any() else None
    conc["small_entries"] = float(np.mean(share[ok[row]] < 0.01)) if ok.any() else None
    out["concentration"] = conc

    out["sink_positions"] = sink_positions
    out["sink_share"] = _mean(np.bincount(row, weights=np.where(r_pos < sink_positions, share, 0.0),
                                          minlength=n_rows)[ok])

    # Newest position of each row's queue: the highest position written in it at steps up to and
    # including the row's step, or the row's own highest read if that is higher.
    row_newest = np.maximum(_newest_written(queue, pos, step, is_write, row_q, row_step),
                            np.maximum.reduceat(r_pos[order], first))
    dist = np.abs(row_newest[row] - r_pos)
    out["local_share"] = {str(w): _mean(np.bincount(row, weights=np.where(dist <= w, share, 0.0),
                                                    minlength=n_rows)[ok]) for w in windows}

    out["persist_k"] = persist_k
    pj, per_q = _persistence(row, rank, order, r_pos, row_q, row_step, size, persist_k, trace.n_queues)
    out["persistence_jaccard"] = _mean(pj)
    valid = per_q[~np.isnan(per_q)]
    out["head_stability"] = {
        "min": float(valid.min()) if valid.size else None,
        "median": float(np.median(valid)) if valid.size else None,
        "max": float(valid.max()) if valid.size else None,
        "per_queue": [None if math.isnan(v) else round(float(v), 4) for v in per_q],
    }

    gap = _gap_since_last_access(queue, pos, step)[r_idx]
    cold = {}
    for g_ in cold_gaps:
        hit = gap >= g_
        cold[str(g_)] = {"reads": float(hit.mean()),
                         "mass": float(share[hit].sum() / max(share.sum(), 1e-300))}
    out["cold_reads"] = cold
    out["first_touch_reads"] = int((gap == np.iinfo(np.int64).max).sum())
    return out


def _newest_written(queue, pos, step, is_write, row_q, row_step):
    """Per row: highest position written in queue row_q at a step <= row_step (-1 if none)."""
    w = np.flatnonzero(is_write)
    if not len(w):
        return np.full(len(row_q), -1, np.int64)
    span = int(max(step.max(), row_step.max())) + 2
    wkey = queue[w] * span + step[w]
    order = np.argsort(wkey, kind="stable")
    wkey, wq = wkey[order], queue[w][order]
    big = int(pos.max()) + 2
    # Running max per queue: offset each queue's values above every earlier queue's.
    run = np.maximum.accumulate(pos[w][order] + wq * big) - wq * big
    i = np.searchsorted(wkey, row_q * span + row_step, side="right") - 1
    found = (i >= 0) & (wq[np.maximum(i, 0)] == row_q)
    return np.where(found, run[np.maximum(i, 0)], -1)


def _gap_since_last_access(queue, pos, step):
    """Per event: steps since the previous access of the same (queue, pos); int64 max if none."""
    key = queue * (int(pos.max()) + 1) + pos
    order = np.argsort(key, kind="stable")
    k, s = key[order], step[order]
    gap = np.full(len(k), np.iinfo(np.int64).max, np.int64)
    same = k[1:] == k[:-1]
    gap[1:][same] = (s[1:] - s[:-1])[same]
    out = np.empty_like(gap)
    out[order] = gap
    return out


def _persistence(row, rank, order, r_pos, row_q, row_step, size, k, n_queues):
    """Jaccard of each row's top-k set with the previous step's row of the same queue."""
    keep = rank < k                                       # in sorted order
    kr = row[order][keep]
    kp = r_pos[order][keep]
    ksize = np.minimum(size, k)
    # Row id of "same queue, previous step", if it exists.
    n_rows = len(size)
    row_key = row_step * n_queues + row_q
    prev_key = (row_step - 1) * n_queues + row_q
    j = np.searchsorted(row_key, prev_key)
    has_prev = (j < n_rows) & (row_key[np.minimum(j, n_rows - 1)] == prev_key)
    prev_row = np.where(has_prev, j, -1)
    # Intersections: an entry (row, pos) matches (prev_row(row), pos).
    span = int(r_pos.max()) + 1
    entry = kr * span + kp
    entry_sorted = np.sort(entry)
    probe_row = prev_row[kr]
    probe = probe_row * span + kp
    idx = np.searchsorted(entry_sorted, probe)
    found = (probe_row >= 0) & (idx < len(entry_sorted)) & \
        (entry_sorted[np.minimum(idx, len(entry_sorted) - 1)] == probe)
    inter = np.bincount(kr, weights=found, minlength=n_rows)
    rows = np.flatnonzero(has_prev)
    union = ksize[rows] + ksize[prev_row[rows]] - inter[rows]
    jac = inter[rows] / union
    per_q = np.full(n_queues, np.nan)
    if len(rows):
        sums = np.bincount(row_q[rows], weights=jac, minlength=n_queues)
        cnt = np.bincount(row_q[rows], minlength=n_queues)
        per_q = np.where(cnt > 0, sums / np.maximum(cnt, 1), np.nan)
    return jac, per_q


def _fmt(v, pct=False):
    if v is None:
        return "-"
    if pct:
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def format_stats(s: dict) -> str:
    """A readable two-column table of :func:`trace_stats`'s result."""
    lines = []

    def add(name, value):
        lines.append((name, value))

    add("events", f"{s['events']:,}")
    add("geometry", f"{s['n_layers']} layers x {s['n_kv_heads']} KV heads = {s['n_queues']} queues")
    add("reads / writes", f"{s['reads']:,} / {s['writes']:,}")
    add("steps", f"{s['steps']} (steps {_fmt(s['first_step'])}..{_fmt(s['last_step'])}, "
                 f"{s.get('decode_steps', 0)} with reads), max pos {_fmt(s['max_pos'])}")
    if s.get("family"):
        add("family", f"{s['family']} ({s.get('generator')})")
    elif s.get("generator"):
        add("generator", str(s["generator"]))
    if s.get("full_rows"):
        fr = s["full_rows"]
        add("full rows, sparse layers", f"reads hold {_fmt(fr['topk_mass_mean'], True)} of the row; "
                                        f"{_fmt(fr['row_near_zero_mean'], True)} of entries < 1% of row max")
    if s.get("rows"):
        rp = s["reads_per_row"]
        add("reads per step per queue", f"mean {rp['mean']:.1f}, min {rp['min']:.0f}, max {rp['max']:.0f}"
                                        f" ({s['rows']:,} rows)")
        rm = s["row_mass"]
        add("row mass (sum of scores)", f"mean {rm['mean']:.4f}, min {rm['min']:.4f}, max {rm['max']:.4f}"
            + (f", {s['zero_mass_rows']} rows of zero mass" if s["zero_mass_rows"] else ""))
        c = s["concentration"]
        add("top 1% / top 10% of a row", f"{_fmt(c['top1pct_share'], True)} / {_fmt(c['top10pct_share'], True)}"
                                         " of its mass")
        add("gini / normalised entropy", f"{_fmt(c['gini'])} / {_fmt(c['entropy_norm'])}")
        add("entries < 1% of row mass", _fmt(c["small_entries"], True))
        add(f"sink share (pos < {s['sink_positions']})", _fmt(s["sink_share"], True))
        add("mass within +-W of newest", ", ".join(f"W={w}: {_fmt(v, True)}" for w, v in s["local_share"].items()))
        hs = s["head_stability"]
        add(f"top-{s['persist_k']} Jaccard step to step", f"{_fmt(s['persistence_jaccard'])} "
            f"(per queue min {_fmt(hs['min'])}, median {_fmt(hs['median'])}, max {_fmt(hs['max'])})")
        add("cold reads (untouched >= G steps)",
            ", ".join(f"G={g}: {_fmt(v['reads'], True)} of reads, {_fmt(v['mass'], True)} of mass"
                      for g, v in s["cold_reads"].items()))
        add("first-touch reads", f"{s['first_touch_reads']:,}")
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in lines)
