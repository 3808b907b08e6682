"""Synthetic trace families: determinism, contract conformance, normalised rows, clean errors."""
from pathlib import Path

import numpy as np
import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import tracegen as G
from cxlkv.models import tracestats as S
from cxlkv.models.trace import EVENT_KEYS, OP_READ, OP_WRITE

SMALL = dict(n_layers=2, n_kv_heads=2, prefill=64, steps=48)


def _row_sums(t):
    r = t.op == OP_READ
    key = t.step[r].astype(np.int64) * t.n_queues + t.queue[r]
    _, inv = np.unique(key, return_inverse=True)
    return np.bincount(inv, weights=t.score[r].astype(np.float64))


@pytest.mark.parametrize("family", G.FAMILIES)
def test_family_is_valid_deterministic_and_normalised(family):
    a = G.synth(family, seed=7, **SMALL)
    b = G.synth(family, seed=7, **SMALL)
    c = G.synth(family, seed=8, **SMALL)
    a.validate()
    for key in EVENT_KEYS:
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert not np.array_equal(a.score, c.score)
    np.testing.assert_allclose(_row_sums(a), 1.0, atol=1e-5)
    assert len(_row_sums(a)) == SMALL["steps"] * a.n_queues
    assert a.meta["family"] == family and a.meta["seed"] == 7


@pytest.mark.parametrize("family,params,match", [
    ("nope", {}, "unknown trace family 'nope'.*mixed"),
    ("mixed", {"bogus": 1}, "unknown synth parameter.*bogus.*valid parameters:.*needle_rate"),
    ("mixed", {"rho": 1.0}, "'rho' must be in \\[0, 1\\)"),
])
def test_unknown_family_and_parameter_are_refused_listing_valid_ones(family, params, match):
    with pytest.raises(CxlkvError, match=match):
        G.synth(family, **params)


# --- each family shows its defining property, measurably, at the default geometry -----------------

_CACHE = {}


def _family(family, **params):
    key = (family, tuple(sorted(params.items())))
    if key not in _CACHE:
        t = G.synth(family, **params)
        _CACHE[key] = (t, S.trace_stats(t))
    return _CACHE[key]


def test_default_geometry_structure():
    t, s = _family("heavy")
    nq, k = 8, 64
    assert len(t) == 512 * nq + 512 * nq * (1 + k)            # prefill writes; per row 1 write + k reads
    assert s["reads_per_row"] == {"mean": 64.0, "min": 64.0, "max": 64.0}
    # Step 0 writes 0..511 for every queue; step s appends 511 + s, then reads resident positions only.
    pre = t.step == 0
    assert (t.op[pre] == OP_WRITE).all() and pre.sum() == 512 * nq
    w = (t.op == OP_WRITE) & ~pre
    np.testing.assert_array_equal(t.pos[w], np.repeat(511 + np.arange(1, 513), nq))
    r = t.op == OP_READ
    newest = np.repeat(t.pos[w].astype(np.int64), k)
    assert (t.pos[r] <= newest).all()
    rows = t.pos[r].reshape(-1, k).astype(np.int64)
    assert (np.diff(rows, axis=1) > 0).all()                 # unique, ascending within a row


def test_sinks_family_puts_most_mass_on_the_first_positions():
    assert _family("sinks")[1]["sink_share"] > 0.6
    for other in ("recent", "heavy"):
        assert _family(other)[1]["sink_share"] < 0.05


def test_recent_family_is_local():
    assert _family("recent")[1]["local_share"]["64"] > 0.85
    assert _family("heavy")[1]["local_share"]["64"] < 0.25


def test_heavy_family_is_persistent_and_power_law():
    t, s = _family("heavy")
    assert s["persistence_jaccard"] > 0.7 > _family("sinks")[1]["persistence_jaccard"]
    r = t.op == OP_READ
    acc = np.bincount(t.queue[r] * 2048 + t.pos[r], weights=t.score[r])
    acc = np.sort(acc[acc > 0])[::-1]
    assert acc[:len(acc) // 10].sum() > 0.8 * acc.sum()       # H2O: a few heavy hitters hold the mass


def test_needle_family_reads_long_untouched_positions():
    t, s = _family("needle")
    off = _family("needle", needle_rate=0.0)[1]
    assert t.meta["needle_episodes"] > 100
    assert s["cold_reads"]["256"]["reads"] > 5 * max(off["cold_reads"]["256"]["reads"], 1e-4)
    assert s["cold_reads"]["256"]["mass"] > 5 * max(off["cold_reads"]["256"]["mass"], 1e-4)
    assert s["cold_reads"]["256"]["reads"] > 5 * _family("heavy")[1]["cold_reads"]["256"]["reads"]


def test_needle_passages_take_most_of_their_rows_mass():
    t, _ = _family("needle")
    key = t.step.astype(np.int64) * t.n_queues + t.queue      # non-decreasing: rows are contiguous
    shares = []
    for e0, e1, layer, head, lo, hi in t.meta["needles"]:
        newest = 511 + e0                                     # P at the episode's first step
        assert e1 - e0 == 2 and hi - lo == 16 and 1 <= lo and hi - 1 <= newest - 128
        for s in range(e0, e1):
            k = s * t.n_queues + layer * t.n_kv_heads + head
            a, b = np.searchsorted(key, [k, k + 1])
            inside = (t.op[a:b] == OP_READ) & (t.pos[a:b] >= lo) & (t.pos[a:b] < hi)
            shares.append(t.score[a:b][inside].sum())
    assert len(shares) == 2 * t.meta["needle_episodes"] and np.mean(shares) > 0.8


def test_heads_family_mixes_stable_and_retrieval_heads():
    t, s = _family("heads")
    retrieval = t.meta["retrieval_queues"]
    assert len(retrieval) == round(0.4 * t.n_queues)
    per_q = s["head_stability"]["per_queue"]
    stable = [v for q, v in enumerate(per_q) if q not in retrieval]
    assert max(per_q[q] for q in retrieval) < 0.5 < min(stable)


def test_dense_early_family_reads_layers_0_1_densely():
    t, _ = _family("dense_early")
    r = (t.op == OP_READ) & (t.step == 512)
    per_layer = np.bincount(t.layer[r], minlength=4) / 2      # reads per queue at the last step
    np.testing.assert_array_equal(per_layer, [512, 512, 64, 64])   # ceil(0.5 * 1024) vs k


def test_mixed_family_has_every_ingredient_and_sparse_rows():
    t, s = _family("mixed")
    assert s["sink_share"] > 0.1 and s["local_share"]["64"] > 0.2
    assert t.meta["needle_episodes"] > 0 and len(t.meta["retrieval_queues"]) == 3
    assert s["reads_per_row"]["max"] == 512 and s["reads_per_row"]["min"] == 64
    assert t.meta["row_near_zero_mean"] > 0.95                # >95% of a full row near zero
    assert t.meta["topk_mass_mean"] > 0.9


@pytest.mark.parametrize("family", G.FAMILIES)
def test_full_rows_are_sparse(family):
    assert _family(family)[0].meta["row_near_zero_mean"] > 0.9


def test_load_params(tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"_fitted_to": "tiny-llama", "k": 48, "rho": 0.9}')
    params = G.load_params(p)
    assert params == {"k": 48, "rho": 0.9}
    assert G.synth("mixed", **params, **SMALL).meta["params"]["k"] == 48
    p.write_text('{"k": "many"}')
    with pytest.raises(CxlkvError, match="'k' must be a number"):
        G.load_params(p)
    p.write_text('{"kk": 1}')
    with pytest.raises(CxlkvError, match="unknown synth parameter.*kk"):
        G.load_params(p)


@pytest.mark.parametrize("kwargs,message", [
    (dict(n_layers=0), "n_layers must be an integer"),
    (dict(steps=2.5), "steps must be an integer"),
    (dict(seed=-1), "seed must be a non-negative integer"),
    (dict(k=True), "'k' must be a number"),
    (dict(dense_frac=0.0), "'dense_frac' must be in \\(0, 1\\]"),
    (dict(noise=float("nan")), "'noise' must be >= 0"),
])
def test_bad_geometry_and_parameters(kwargs, message):
    with pytest.raises(CxlkvError, match=message):
        G.synth("mixed", **kwargs)


# --- docs/tracegen.md shows what the code does -------------------------------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "tracegen.md"


@pytest.mark.parametrize("family", G.FAMILIES)
def test_docs_show_current_info_tables(family):
    """The page's `trace info` block for each family is what the generator produces now."""
    table = f"{family}.npz\n" + S.format_stats(_family(family)[1])
    assert f"```text\n{table}\n```" in DOC.read_text(), \
        f"docs/tracegen.md: the {family} table is stale; regenerate it with the command the page gives"


def test_docs_list_current_presets():
    text = DOC.read_text()
    for family, preset in G.FAMILY_PRESETS.items():
        row = f"| `{family}` | `{' '.join(f'{k}={v}' for k, v in preset.items())}` |"
        assert row in text, f"docs/tracegen.md: preset row of {family} is stale"


def test_geometry_too_large_is_refused_before_allocating():
    with pytest.raises(CxlkvError, match="geometry too large"):
        G.synth("mixed", n_layers=64, n_kv_heads=64, prefill=8192, steps=8192)
