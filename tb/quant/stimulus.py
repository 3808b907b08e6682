"""Stimulus for the quantizer bench, generated in bulk with numpy (no per-line Python arithmetic).

Every function takes a ``numpy.random.Generator`` and returns FP16 bit patterns, shape (n, 32).
"""
import numpy as np

from cxlkv.models import quant as M

LANES = M.LANES


def _f16_bits(x):
    """FP16 bits of float values, clipped to the finite range (Inf/NaN are placed on purpose)."""
    return np.clip(np.asarray(x, dtype=np.float64), -65504, 65504).astype(np.float16).view(np.uint16)


def random_lines(rng, n, nonfinite=0.02):
    """A mix of line families: Gaussian at random magnitudes, random finite bit patterns,
    single outliers, outlier channels, all-equal, one-signed, near 65504, subnormal-only,
    zeros of both signs, and (fraction ``nonfinite``) lines holding Inf or NaN."""
    fam = rng.integers(0, 10, size=n)
    mag = 2.0 ** rng.uniform(-26, 16, size=(n, 1))
    out = _f16_bits(rng.standard_normal((n, LANES)) * mag)

    def put(sel, values):
        out[sel] = values[sel] if values.shape[0] == n else values

    rb = rng.integers(0, 0x10000, size=(n, LANES), dtype=np.int64)
    rb = np.where((rb & 0x7C00) == 0x7C00, rb & 0x83FF, rb).astype(np.uint16)   # finite only
    put(fam == 1, rb)
    outlier = out.copy()                                   # one lane far above the rest
    lane = rng.integers(0, LANES, size=n)
    outlier[np.arange(n), lane] = _f16_bits(rng.choice([-1, 1], n) * mag[:, 0] * 2.0 ** rng.uniform(4, 14, n))
    put(fam == 2, outlier)
    chan = _f16_bits(rng.standard_normal((n, LANES)) * mag * np.where(np.arange(LANES) % 8 == 3, 50.0, 1.0))
    put(fam == 3, chan)
    equal = np.repeat(out[:, :1], LANES, axis=1)
    put(fam == 4, equal)
    put(fam == 5, out & 0x7FFF)                             # all non-negative
    put(fam == 6, out | 0x8000)                             # all non-positive
    near_max = (0x7BFF - rng.integers(0, 64, size=(n, LANES))).astype(np.uint16) | \
        (rng.integers(0, 2, size=(n, LANES)).astype(np.uint16) << 15)
    put(fam == 7, near_max)
    sub = (rng.integers(0, 1024, size=(n, LANES)) | (rng.integers(0, 2, size=(n, LANES)) << 15)).astype(np.uint16)
    put(fam == 8, sub)
    zeros = (rng.integers(0, 2, size=(n, LANES)) << 15).astype(np.uint16)
    put(fam == 9, zeros)

    bad = rng.random(n) < nonfinite
    k = int(bad.sum())
    specials = rng.choice(np.array([0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7DFF, 0xFFFF], dtype=np.uint16), size=k)
    out[np.flatnonzero(bad), rng.integers(0, LANES, size=k)] = specials
    return out


def edge_lines():
    """Directed lines: every one goes through every format."""
    f = np.float16
    rows = [
        np.zeros(LANES, f),
        np.full(LANES, -0.0, f),
        np.where(np.arange(LANES) % 2, -0.0, 0.0).astype(f),
        np.full(LANES, 65504, f),
        np.full(LANES, -65504, f),
        np.where(np.arange(LANES) % 2, -65504, 65504).astype(f),
        np.full(LANES, 2.0 ** -24, f),                      # smallest subnormal
        (np.arange(LANES) * 2.0 ** -24).astype(f),          # subnormal ramp
        np.full(LANES, 6.1e-5, f),                          # near the smallest normal
        np.full(LANES, 1.0, f),                              # all equal (int4 max == min)
        np.full(LANES, -3.14, f),
        np.concatenate([np.full(31, 0.01), [1000.0]]).astype(f),       # single outlier
        np.concatenate([[-1000.0], np.full(31, 0.01)]).astype(f),
        np.concatenate([np.full(31, 1e-7), [65504.0]]).astype(f),
        np.concatenate([[-65504.0], np.full(31, 65504.0)]).astype(f),  # int4 span 131008
        np.linspace(-448, 448, LANES).astype(f),
        np.linspace(-127, 127, LANES).astype(f),
        np.linspace(0, 15, LANES).astype(f),
        np.linspace(-1, 1, LANES).astype(f) * f(0.5),
        np.array([(-1) ** k * 2.0 ** (k - 16) for k in range(LANES)], f),   # every exponent, mixed signs
        np.array([464.0] + [0.0] * 31, f), np.array([456.0] + [0.0] * 31, f),
        np.array([127.5] + [0.0] * 31, f), np.array([126.5] + [-0.0] * 31, f),
        np.array([7.5, 0.0] + [0.5] * 30, f),
    ]
    bits = np.stack(rows).view(np.uint16)
    specials = []
    for v in (0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0xFDFF):
        for lane in (0, 17, 31):
            row = np.full(LANES, 0x3C00, np.uint16)
            row[lane] = v
            specials.append(row)
    specials.append(np.full(LANES, 0x7E00, np.uint16))
    specials.append(np.full(LANES, 0xFC00, np.uint16))
    return np.concatenate([bits, np.stack(specials)])


def random_records(rng, n):
    """Records the quantizer may or may not produce: random format/raw, scales both valid and
    arbitrary, random minimums (some non-finite), random data. Fields as a Records tuple plus
    the packed 512-bit data ints."""
    fmt = rng.integers(0, 4, size=n)
    raw = rng.random(n) < 0.1
    j = rng.integers(0, 40, size=n)
    scale = np.where(rng.random(n) < 0.6, M.scale_bits(j), rng.integers(0, 0x10000, size=n))
    mins = rng.integers(0, 0x10000, size=n)
    data = [int.from_bytes(rng.bytes(64), "little") for _ in range(n)]
    codes = M.unpack_data(data, fmt, raw)
    return M.Records(fmt, raw, scale.astype(np.uint16), mins.astype(np.uint16), codes), data
