"""Synthetic trace families: determinism, contract conformance, normalised rows, clean errors."""
import numpy as np
import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import tracegen as G
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


def test_unknown_family_and_parameter_are_refused_listing_valid_ones():
    with pytest.raises(CxlkvError, match="unknown trace family 'nope'.*mixed"):
        G.synth("nope")
    with pytest.raises(CxlkvError, match="unknown synth parameter.*bogus.*valid parameters:.*needle_rate"):
        G.synth("mixed", bogus=1)
    with pytest.raises(CxlkvError, match="'rho' must be in \\[0, 1\\)"):
        G.synth("mixed", rho=1.0)
