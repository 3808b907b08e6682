"""EMA attention scoring and eviction priority: the golden model.

Fixed point (``../shared/spec/contracts.md``, "Scoring fixed point"):

* Scores, EMAs, α and priorities are UQ0.16 integers (0 ... 65535 <-> 0 ... 1 - 2^-16).
* :func:`ema_update` is the contract's round-to-nearest EMA step.
* :func:`priority_float` is the seed's rule ``(1 - ema) * (1 - exp(-age / tau))``.
* :func:`priority_fixed` is what the RTL computes (``cxlkv.hdl.scoring``); its
  arithmetic is defined here, once, and documented in ``docs/scoring.md``.

How priority_fixed computes ``1 - exp(-age / tau)`` without a divider per event:

1. ``exp(-age/tau) = 2^-y`` with ``y = age * log2(e) / tau``.
2. Per configuration (not per event), ``rate = floor(LOG2E_Q40 / tau)`` -- the
   RTL gets it from a bit-serial divider when τ changes -- then normalised to
   an 18-bit mantissa ``m`` (top bit set) and its bit length ``n``.
3. Per event, ``y_q10 = (age * m) >> (48 - n)``: y in UQ.10 (truncated).
4. ``e = EXP2_NEG_Q16[y_q10 & 1023] >> (y_q10 >> 10)`` (0 once the integer part
   reaches 17): 2^-y in UQ1.16, from a 1024-entry table rounded to nearest.
5. ``r = 65536 - e``; ``priority = min(((65536 - ema) * r + 0x8000) >> 16, 65535)``.

Ages saturate at 2^24 - 1 (for every accepted τ, 1 - exp(-age/τ) has reached 1
within one LSB long before). The worst-case error against priority_float is
well under the contract's 2^-8 (measured in tests/test_scoring.py and
docs/scoring.md).

Configuration the hardware cannot honour has one behaviour, here and in the RTL:
α = 0 is applied as α = 1; τ < TAU_MIN as TAU_MIN; τ > TAU_MAX as TAU_MAX; and
the unit's ``cfg_error`` flag is raised (:func:`sanitize_config`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SCORE_BITS = 16
SCORE_ONE = 1 << SCORE_BITS          # 1.0 in UQ0.16 (not representable as a score)
SCORE_MAX = SCORE_ONE - 1
ALPHA_BITS = 16
STEP_BITS = 32                       # step counters wrap modulo 2^32
AGE_BITS = 24
AGE_MAX = (1 << AGE_BITS) - 1
TAU_BITS = 32                        # width of the τ configuration input
TAU_MIN, TAU_MAX = 1, 1 << 20        # τ range the hardware honours, in steps

#: round(log2(e) * 2^40), computed once with 60-digit decimal arithmetic.
LOG2E_Q40 = 1586259972792
RATE_BITS = LOG2E_Q40.bit_length()  # 41: width of the divider's quotient
MANT_BITS = 18                       # rate mantissa: one 18-bit multiplier operand
Y_FRAC_BITS = 10                     # y = age*log2(e)/tau in UQ.10
EXP_INDEX_BITS = Y_FRAC_BITS
EXP_SHIFT_LIMIT = 17                 # 2^-17 < 2^-16: beyond this, e = 0

#: 2^-(i/1024) in UQ1.16, rounded to nearest, i = 0 .. 1023 (entry 0 is 65536).
EXP2_NEG_Q16 = tuple(int(math.floor(2.0 ** (16 - i / 1024) + 0.5)) for i in range(1 << EXP_INDEX_BITS))


def _check_u16(name, v):
    if not 0 <= v <= SCORE_MAX:
        raise ValueError(f"{name} must be a UQ0.16 integer in 0..65535, got {v}")


def ema_update(ema: int, sample: int, alpha: int) -> int:
    """One EMA step, UQ0.16: ``ema + (((sample - ema) * alpha + 0x8000) >> 16)``.

    ``>>`` is a floor shift, so the step rounds to nearest with ties up. The result
    never overshoots ``sample`` and stays in 0..65535.
    """
    _check_u16("ema", ema)
    _check_u16("sample", sample)
    _check_u16("alpha", alpha)
    return ema + (((sample - ema) * alpha + 0x8000) >> 16)


def priority_float(score_ema: float, age: float, tau: float) -> float:
    """The seed's eviction priority: ``(1 - score_ema) * (1 - exp(-age / tau))``.

    Higher means evict sooner. ``score_ema`` is a float in [0, 1].
    """
    return (1.0 - score_ema) * (1.0 - math.exp(-age / tau))


def sanitize_config(alpha: int, tau: int) -> tuple[int, int, bool]:
    """The (α, τ) the hardware applies, and whether the request was out of range.

    α = 0 (the EMA would never move) becomes 1; τ is clamped to [TAU_MIN, TAU_MAX].
    """
    if not 0 <= alpha <= SCORE_MAX:
        raise ValueError(f"alpha must be a UQ0.16 integer in 0..65535, got {alpha}")
    if not 0 <= tau < (1 << TAU_BITS):
        raise ValueError(f"tau must fit {TAU_BITS} bits, got {tau}")
    a = max(alpha, 1)
    t = min(max(tau, TAU_MIN), TAU_MAX)
    return a, t, (a, t) != (alpha, tau)


@dataclass(frozen=True)
class DecayRate:
    """Per-τ constants the RTL derives once per configuration."""
    tau: int
    rate: int       # floor(LOG2E_Q40 / tau)
    mant: int       # top MANT_BITS bits of rate
    nbits: int      # rate.bit_length()

    @property
    def shift(self) -> int:
        """Right shift turning age * mant into y in UQ.10."""
        return MANT_BITS + 40 - Y_FRAC_BITS - self.nbits


def decay_rate(tau: int) -> DecayRate:
    """Constants for τ (already sanitized, TAU_MIN <= τ <= TAU_MAX)."""
    if not TAU_MIN <= tau <= TAU_MAX:
        raise ValueError(f"tau must be in {TAU_MIN}..{TAU_MAX} (use sanitize_config), got {tau}")
    rate = LOG2E_Q40 // tau
    n = rate.bit_length()
    return DecayRate(tau, rate, rate >> (n - MANT_BITS), n)


def step_age(last_step: int, cur_step: int) -> int:
    """Steps since the last access: modulo 2^32 (counters wrap), saturated to AGE_MAX."""
    return min((cur_step - last_step) % (1 << STEP_BITS), AGE_MAX)


def recency_fixed(age: int, rate: DecayRate) -> int:
    """``1 - exp(-age/tau)`` in UQ1.16 (0 ... 65536), as the RTL computes it."""
    age = min(age, AGE_MAX)
    y = (age * rate.mant) >> rate.shift
    yi, yf = y >> Y_FRAC_BITS, y & ((1 << Y_FRAC_BITS) - 1)
    e = EXP2_NEG_Q16[yf] >> yi if yi < EXP_SHIFT_LIMIT else 0
    return SCORE_ONE - e


def priority_from_recency(ema: int, r: int) -> int:
    return min(((SCORE_ONE - ema) * r + 0x8000) >> 16, SCORE_MAX)


def priority_fixed(ema: int, age: int, tau: int) -> int:
    """The UQ0.16 priority the hardware computes for an entry of EMA ``ema`` and ``age`` steps.

    τ outside [TAU_MIN, TAU_MAX] is clamped as :func:`sanitize_config` says; ages
    of 2^24 and more count as 2^24 - 1.
    """
    _check_u16("ema", ema)
    if age < 0:
        raise ValueError(f"age must be >= 0, got {age}")
    _, tau, _ = sanitize_config(1, tau)
    return priority_from_recency(ema, recency_fixed(age, decay_rate(tau)))


@dataclass(frozen=True)
class ScoringInput:
    """One event into the scoring pipeline (field names match the RTL's payload)."""
    id: int
    ema: int
    sample: int
    update: int        # 1: fold `sample` into the EMA; 0: score the current EMA only
    last_step: int
    cur_step: int


@dataclass(frozen=True)
class ScoringOutput:
    id: int
    ema: int
    priority: int


def score_event(ev: ScoringInput, alpha: int, tau: int) -> ScoringOutput:
    """What the pipeline emits for ``ev`` accepted while the configuration was (α, τ)."""
    alpha, tau, _ = sanitize_config(alpha, tau)
    ema = ema_update(ev.ema, ev.sample, alpha) if ev.update else ev.ema
    age = step_age(ev.last_step, ev.cur_step)
    return ScoringOutput(ev.id, ema, priority_from_recency(ema, recency_fixed(age, decay_rate(tau))))
