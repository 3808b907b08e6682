"""Golden model of EMA scoring: the contract's formulas, the seed's worked example, the error bound."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cxlkv.models import scoring as M


def test_seed_worked_example():
    # tau = 1000: score 0.211 seen 50 steps ago, score 0.08 seen 2000 steps ago (seed 001)
    assert round(M.priority_float(0.211, 50, 1000), 4) == 0.0385
    assert round(M.priority_float(0.08, 2000, 1000), 4) == 0.7955


@pytest.mark.parametrize("ema,sample,alpha,expected", [
    (0, 0xFFFF, 0x8000, 0x8000),          # 65535 * 0.5 = 32767.5 -> ties up
    (0xFFFF, 0, 0x8000, 0x8000),          # -32767.5 -> floor(-32767.5 + 0.5) = -32767
    (100, 102, 0x2000, 100),              # 2 * 1/8 = 0.25 rounds to 0
    (100, 104, 0x2000, 101),              # 4 * 1/8 = 0.5 ties up
    (5, 5, 0xFFFF, 5),
    (0, 0xFFFF, 0xFFFF, 0xFFFE),          # 65535*65535/65536 = 65534.00002
    (0, 1, 0xFFFF, 1),
])
def test_ema_update_contract(ema, sample, alpha, expected):
    assert M.ema_update(ema, sample, alpha) == expected
    assert M.ema_update(ema, sample, alpha) == ema + (((sample - ema) * alpha + 0x8000) >> 16)


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_ema_update_stays_between_old_and_sample(ema, sample, alpha):
    new = M.ema_update(ema, sample, alpha)
    assert min(ema, sample) <= new <= max(ema, sample)


@pytest.mark.parametrize("bad", [-1, 0x10000])
def test_ema_update_refuses_out_of_range(bad):
    with pytest.raises(ValueError, match="UQ0.16"):
        M.ema_update(bad, 0, 1)


#: The contract's bound: priority_fixed within 2^-8 of priority_float.
BOUND = 2.0 ** -8


@settings(max_examples=3000, deadline=None)
@given(ema=st.integers(0, 0xFFFF), age=st.integers(0, (1 << 24) - 1),
       tau=st.integers(M.TAU_MIN, M.TAU_MAX))
def test_priority_fixed_error_bound(ema, age, tau):
    err = abs(M.priority_fixed(ema, age, tau) / 65536 - M.priority_float(ema / 65536, age, tau))
    assert err <= BOUND


@settings(max_examples=2000, deadline=None)
@given(ema=st.integers(0, 0xFFFF), tau=st.integers(M.TAU_MIN, M.TAU_MAX), data=st.data())
def test_priority_fixed_error_bound_where_the_curve_bends(ema, tau, data):
    # ages within a few time constants, where 1 - exp(-age/tau) changes fastest
    age = data.draw(st.integers(0, min(12 * tau, (1 << 24) - 1)))
    err = abs(M.priority_fixed(ema, age, tau) / 65536 - M.priority_float(ema / 65536, age, tau))
    assert err <= BOUND


def test_priority_fixed_error_bound_exhaustive_over_tau_grid():
    worst = 0.0
    for tau in [1, 2, 3, 5, 10, 100, 999, 1000, 4096, 65535, 65536, 500_000, M.TAU_MAX]:
        for age in range(0, min(40 * tau, 1 << 24), max(1, tau // 64)):
            for ema in (0, 0x4000, 0xFFFF):
                err = abs(M.priority_fixed(ema, age, tau) / 65536 - M.priority_float(ema / 65536, age, tau))
                worst = max(worst, err)
    assert worst <= BOUND
    assert worst < 2.0 ** -10  # the design's actual margin (docs/scoring.md)


def test_priority_fixed_extremes():
    assert M.priority_fixed(0, 0, 1000) == 0                      # just touched: never evict first
    assert M.priority_fixed(0, M.AGE_MAX, 1000) == M.SCORE_MAX    # cold and old: clamps below 1.0
    assert M.priority_fixed(0xFFFF, M.AGE_MAX, 1000) == 1          # (1 - 65535/65536) * 1
    assert M.priority_fixed(0x8000, 10**9, 1000) == M.priority_fixed(0x8000, M.AGE_MAX, 1000)


def test_priority_is_monotonic_in_age_and_score():
    for tau in (10, 1000, M.TAU_MAX):
        ages = [0, 1, 2, 5, tau // 2 + 1, tau, 3 * tau, 20 * tau]
        ps = [M.priority_fixed(0x1000, a, tau) for a in ages]
        assert ps == sorted(ps)
        qs = [M.priority_fixed(e, tau, tau) for e in (0, 0x100, 0x8000, 0xFFFF)]
        assert qs == sorted(qs, reverse=True)


@pytest.mark.parametrize("alpha,tau,applied", [
    (0, 1000, (1, 1000, True)),
    (0x1000, 0, (0x1000, 1, True)),
    (0x1000, M.TAU_MAX + 1, (0x1000, M.TAU_MAX, True)),
    (0x1000, (1 << 32) - 1, (0x1000, M.TAU_MAX, True)),
    (0xFFFF, M.TAU_MAX, (0xFFFF, M.TAU_MAX, False)),
    (1, 1, (1, 1, False)),
])
def test_unhonourable_configuration_is_clamped_and_flagged(alpha, tau, applied):
    assert M.sanitize_config(alpha, tau) == applied
    ev = M.ScoringInput(id=3, ema=100, sample=60000, update=1, last_step=0, cur_step=500)
    a, t, _ = applied
    assert M.score_event(ev, alpha, tau) == M.score_event(ev, a, t)
    assert M.priority_fixed(100, 500, tau) == M.priority_fixed(100, 500, t)


def test_score_event_without_update_keeps_ema():
    ev = M.ScoringInput(id=1, ema=1234, sample=60000, update=0, last_step=10, cur_step=20)
    assert M.score_event(ev, 0x8000, 1000).ema == 1234


def test_step_age_wraps_and_saturates():
    assert M.step_age(0xFFFFFFFF, 4) == 5
    assert M.step_age(10, 9) == M.AGE_MAX           # "last after now" reads as very old
    assert M.step_age(0, 1 << 30) == M.AGE_MAX


def test_decay_table_and_constants():
    assert M.EXP2_NEG_Q16[0] == 65536
    assert all(a > b for a, b in zip(M.EXP2_NEG_Q16, M.EXP2_NEG_Q16[1:]))
    assert M.LOG2E_Q40 == round(2 ** 40 / math.log(2))
    for tau in (M.TAU_MIN, M.TAU_MAX):
        r = M.decay_rate(tau)
        assert r.mant >> (M.MANT_BITS - 1) == 1 and 7 <= r.shift <= 27
