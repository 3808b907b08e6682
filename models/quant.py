"""Transparent KV quantizer: the golden model (FP16 line <-> FP8 E4M3 / INT8 / INT4 / FP16).

One line is 32 FP16 values (64 bytes, little-endian). The host writes FP16; the device
stores the line in the format configured for its queue; the host reads FP16 back.
The RTL (``cxlkv.hdl.quant``) is checked against this module bit for bit. The exact
arithmetic, defined once here and documented in ``docs/quant.md``:

* **Fixed-point view.** Every finite FP16 value is an exact integer multiple of 2^-24
  (the smallest subnormal): ``fix = mant`` for a subnormal, ``(1024 + mant) << (exp - 1)``
  for a normal; ``|fix| < 2^40``. All arithmetic below is exact integer arithmetic on
  these, with one rounding rule: round to nearest, ties to even (RNE).
* **Scales are powers of two**, ``2^k`` with ``k`` in -24 .. 14, stored as FP16 (exact:
  subnormal powers 2^-24 .. 2^-15, normal ones above). Per line, ``k`` is the *smallest*
  value with ``k >= -24`` for which no value exceeds the format's largest code:
  ``amax <= 448 * 2^k`` (fp8), ``amax <= 127 * 2^k`` (int8), ``max - min <= 15 * 2^k``
  (int4). With ``j = k + 24`` (the shift in fixed-point units) and ``b`` the bit length
  of the bounded quantity ``v``: ``j0 = max(b - w, 0)``, ``j = j0 + (v > C << j0)`` for
  ``(C, w)`` = (448, 9), (127, 7), (15, 4). Dividing by the scale is then a shift, so
  no value is ever clamped: each code is the RNE of the exact quotient.
  (Power-of-two block scales are what the OCP Microscaling formats use for blocks of 32;
  they cost at most one bit of INT resolution against a free FP16 scale and no divider.)
* **fp8** (OCP E4M3, bias 7, max 448): the code of ``x / 2^k``, rounded to nearest even
  with subnormals (identical to ``ml_dtypes.float8_e4m3fn`` on these exact values),
  saturated to +-448 (which the scale choice never needs). The sign of zero is kept.
* **int8** (symmetric): ``q = sign(x) * RNE(|fix| / 2^j)``, ``|q| <= 127``, two's complement.
* **int4** (asymmetric): ``q = RNE((fix - fix_min) / 2^j)`` in 0 .. 15; ``min`` is the
  line's smallest value (FP16, stored exactly; ``-0`` counts below ``+0``).
* **Dequantization**: fp8 ``code * 2^k``, int8 ``q * 2^k``, int4 ``q * 2^k + min``,
  each computed exactly and rounded once to FP16 (RNE), magnitudes saturated to 65504:
  finite input never comes back as Inf. int8 and int4 return ``+0`` for a zero result.
* **Non-finite lines**: a line holding any Inf or NaN is stored raw (FP16, bit for bit,
  NaN payloads included), with the record's ``raw`` flag set; the RTL counts them.

Stored record (what the RTL's quantizer emits and its dequantizer consumes), unused
fields zero: ``fmt`` (2 bits: fp16 0, fp8 1, int8 2, int4 3), ``raw`` (1), ``scale``
(FP16 bits), ``min`` (FP16 bits, int4 only), ``data`` (512 bits: FP16 lanes; or 8-bit
codes of lane i at bits 8i; or 4-bit codes at bits 4i).

Blob (the contract's ``quantize_line`` / ``dequantize_line``): fp16 or raw: the 64-byte
line; fp8/int8: scale (2 bytes LE) + 32 code bytes = 34 bytes; int4: scale + min +
16 bytes (lane 2i in the low nibble of byte i) = 20 bytes. ``dequantize_line`` tells a
raw-stored line by its length (64 bytes).

Records the quantizer cannot produce get a defined meaning in the dequantizer
(:func:`dequantize_records`): a scale that is not 2^k with k in -24 .. K_MAX[fmt], or a
non-finite int4 ``min``, makes the whole line canonical NaN (0x7E00); an fp8 NaN code
(0x7F/0xFF) gives a NaN lane. Either marks the record ``bad`` (the RTL counts it).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cxlkv.errors import CxlkvError

LANES = 32
LINE_BYTES = 64
FORMATS = ("fp16", "fp8", "int8", "int4")
FMT_CODE = {name: i for i, name in enumerate(FORMATS)}
FP16, FP8, INT8, INT4 = range(4)

K_MIN = -24                                  # smallest scale exponent (FP16 min subnormal)
#: Largest scale exponent each format can need (for |x| <= 65504) and accepts.
K_MAX = {FP8: 8, INT8: 10, INT4: 14}
J_MAX = {f: k - K_MIN for f, k in K_MAX.items()}
#: (largest code magnitude C, its bit length w) of the bounded quantity per format.
CODE_LIMIT = {FP8: (448, 9), INT8: (127, 7), INT4: (15, 4)}

FP16_MAX_BITS = 0x7BFF                       # 65504
FP16_QNAN = 0x7E00
FP8_MAX_CODE = 0x7E                          # 448
FP8_EMIN, FP8_MBITS = -6, 3
FP16_EMIN, FP16_MBITS = -14, 10

#: Bytes of a stored blob per format (a raw-stored line is always LINE_BYTES).
BLOB_BYTES = {FP16: LINE_BYTES, FP8: 2 + LANES, INT8: 2 + LANES, INT4: 4 + LANES // 2}


class QuantError(CxlkvError, ValueError):
    """Bad argument to the quantizer model: wrong shape/dtype, unknown format, malformed blob."""


class Records(NamedTuple):
    """Stored records of n lines (the RTL's stored-line payload, field by field)."""
    fmt: np.ndarray      # (n,) int: format code
    raw: np.ndarray      # (n,) bool: stored raw because the line held Inf/NaN
    scale: np.ndarray    # (n,) uint16: FP16 bits of 2^k (0 when unused)
    min: np.ndarray      # (n,) uint16: FP16 bits of the line minimum (int4; else 0)
    codes: np.ndarray    # (n, 32) int64: per-lane stored value (FP16 bits, 8- or 4-bit code)


def fmt_code(fmt) -> int:
    if isinstance(fmt, str):
        if fmt not in FMT_CODE:
            raise QuantError(f"unknown format '{fmt}': expected one of {', '.join(FORMATS)}")
        return FMT_CODE[fmt]
    # an integer code only: int() would take 2.7 to int8 and True to fp8 without a word
    if isinstance(fmt, bool) or not isinstance(fmt, (int, np.integer)) or int(fmt) not in range(4):
        raise QuantError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)} or a code 0..3")
    return int(fmt)


# --------------------------------------------------------------------------- exact helpers

def bit_length(v):
    """Bit length of non-negative int64 values (< 2^53), elementwise; 0 for 0."""
    v = np.asarray(v, dtype=np.int64)
    return np.frexp(v.astype(np.float64))[1].astype(np.int64)


def rne_shift(v, s):
    """``v * 2^-s`` rounded to nearest, ties to even, for v >= 0 (int64) and any integer s.

    A negative ``s`` is an exact left shift.
    """
    v = np.asarray(v, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    left = np.maximum(-s, 0)
    right = np.minimum(np.maximum(s, 0), 62)
    v = v << left
    q = v >> right
    rem = v - (q << right)
    half = (np.int64(1) << right) >> 1
    up = (right > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    return q + up


def round_float(mag, exp, mbits, emin):
    """Magnitude code of the binary float nearest ``mag * 2^exp`` (RNE, subnormals, no saturation).

    The float has ``mbits`` fraction bits and smallest normal exponent ``emin``; its code
    is ``(biased exponent << mbits) | fraction``. With ``t = max(floor(log2 value), emin)``
    the value is rounded to a multiple of ``2^(t - mbits)``: ``n`` (at most 2^(mbits+1),
    a carry into the next exponent); the code is ``((t - emin) << mbits) + n``.
    """
    mag = np.asarray(mag, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    t = np.maximum(bit_length(mag) - 1 + exp, emin)
    n = rne_shift(mag, t - mbits - exp)
    return np.where(mag == 0, 0, ((t - emin) << mbits) + n)


def fp16_to_fix(bits):
    """(sign, |value| / 2^-24, non-finite) of FP16 bit patterns; magnitudes exact int64."""
    bits = np.asarray(bits, dtype=np.int64)
    sign = (bits >> 15) & 1
    e = (bits >> 10) & 31
    m = bits & 1023
    mag = np.where(e == 0, m, (1024 + m) << np.maximum(e - 1, 0))
    return sign, mag, e == 31


def order_key(bits):
    """Total order of FP16 bit patterns as unsigned keys (-0 < +0): the min/max the RTL reduces."""
    bits = np.asarray(bits, dtype=np.int64)
    return np.where(bits & 0x8000, ~bits & 0xFFFF, bits | 0x8000)


def choose_shift(v, fmt):
    """Smallest ``j = k + 24 >= 0`` with ``v <= C * 2^j`` (see the module docstring)."""
    c, w = CODE_LIMIT[fmt]
    v = np.asarray(v, dtype=np.int64)
    j0 = np.maximum(bit_length(v) - w, 0)
    return j0 + (v > (np.int64(c) << j0))


def scale_bits(j):
    """FP16 bits of 2^(j - 24)."""
    j = np.asarray(j, dtype=np.int64)
    return np.where(j < 10, np.int64(1) << np.minimum(j, 9), (j - 9) << 10)


def scale_shift(bits, fmt):
    """Inverse of :func:`scale_bits` for the scales format ``fmt`` accepts: (j, valid)."""
    bits = np.asarray(bits, dtype=np.int64)
    e = bits >> 10
    m = bits & 1023
    sub_ok = (e == 0) & (m != 0) & ((m & (m - 1)) == 0)
    j = np.where(e == 0, bit_length(m) - 1, e + 9)
    valid = (sub_ok | ((e != 0) & (m == 0))) & (j <= J_MAX[fmt]) & (bits < 0x8000)
    return np.where(valid, j, 0), valid


# --------------------------------------------------------------------------- quantizer

def _as_lines(x):
    x = np.asarray(x)
    if x.dtype == np.float16:
        x = x.view(np.uint16)
    if x.dtype != np.uint16:
        raise QuantError(f"lines must be float16 (or their uint16 bits), got dtype {x.dtype}")
    if x.ndim != 2 or x.shape[1] != LANES:
        raise QuantError(f"lines must have shape (n, {LANES}), got {x.shape}")
    return x.astype(np.int64)


def _as_fmts(fmt, n):
    if isinstance(fmt, str) or np.ndim(fmt) == 0:
        return np.full(n, fmt_code(fmt), dtype=np.int64)
    f = np.asarray(fmt, dtype=np.int64)
    if f.shape != (n,) or ((f < 0) | (f > 3)).any():
        raise QuantError(f"formats must be one code 0..3 per line ({n} lines)")
    return f


def quantize_records(lines, fmt) -> Records:
    """Quantize n lines (FP16 values or their bits, shape (n, 32)); ``fmt`` one or per line."""
    bits = _as_lines(lines)
    n = bits.shape[0]
    fmts = _as_fmts(fmt, n)
    sign, mag, nonfinite = fp16_to_fix(bits)
    fix = np.where(sign == 1, -mag, mag)
    raw = nonfinite.any(axis=1) & (fmts != FP16)

    keys = order_key(bits)
    rows = np.arange(n)
    max_bits = bits[rows, keys.argmax(axis=1)]
    min_bits = bits[rows, keys.argmin(axis=1)]
    smax, mmax, _ = fp16_to_fix(max_bits)
    smin, mmin, _ = fp16_to_fix(min_bits)
    fmax = np.where(smax == 1, -mmax, mmax)
    fmin = np.where(smin == 1, -mmin, mmin)
    amax = np.maximum(np.abs(fmax), np.abs(fmin))
    span = fmax - fmin

    codes = bits.copy()
    scale = np.zeros(n, dtype=np.int64)
    mins = np.zeros(n, dtype=np.int64)
    for f in (FP8, INT8, INT4):
        sel = (fmts == f) & ~raw
        if not sel.any():
            continue
        j = choose_shift(span[sel] if f == INT4 else amax[sel], f)
        scale[sel] = scale_bits(j)
        jl = j[:, None]
        if f == FP8:
            code = np.minimum(round_float(mag[sel], -jl, FP8_MBITS, FP8_EMIN), FP8_MAX_CODE)
            codes[sel] = (sign[sel] << 7) | code
        elif f == INT8:
            q = rne_shift(mag[sel], jl)
            codes[sel] = np.where(sign[sel] == 1, -q, q) & 0xFF
        else:
            codes[sel] = rne_shift(fix[sel] - fmin[sel][:, None], jl)
            mins[sel] = min_bits[sel]
    codes[raw] = bits[raw]
    return Records(fmts, raw, scale.astype(np.uint16), mins.astype(np.uint16), codes)


# --------------------------------------------------------------------------- dequantizer

def dequantize_records(rec: Records):
    """FP16 bits (n, 32) of stored records, and a per-record ``bad`` flag (see module docstring)."""
    fmts = np.asarray(rec.fmt, dtype=np.int64)
    raw = np.asarray(rec.raw, dtype=bool)
    scale = np.asarray(rec.scale, dtype=np.int64)
    mins = np.asarray(rec.min, dtype=np.int64)
    codes = np.asarray(rec.codes, dtype=np.int64)
    n = fmts.shape[0]
    out = np.zeros((n, LANES), dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    passthrough = raw | (fmts == FP16)
    out[passthrough] = codes[passthrough] & 0xFFFF
    for f in (FP8, INT8, INT4):
        sel = (fmts == f) & ~raw
        if not sel.any():
            continue
        j, valid = scale_shift(scale[sel], f)
        jl = j[:, None]
        c = codes[sel]
        if f == FP8:
            c = c & 0xFF
            sgn = c >> 7
            e = (c >> 3) & 15
            mag = np.where(e == 0, c & 7, 8 + (c & 7))
            exp = np.maximum(e - 1, 0) - 9 + (jl + K_MIN)
            nan_lane = (c & 0x7F) == 0x7F
        elif f == INT8:
            c = c & 0xFF
            q = np.where(c >= 128, c - 256, c)
            sgn, mag = (q < 0).astype(np.int64), np.abs(q)
            exp = np.broadcast_to(jl + K_MIN, q.shape)
            nan_lane = np.zeros(q.shape, dtype=bool)
        else:
            c = c & 0xF
            ms, mm, mnonfinite = fp16_to_fix(mins[sel])
            valid = valid & ~mnonfinite
            total = (c << jl) + np.where(ms == 1, -mm, mm)[:, None]
            sgn, mag = (total < 0).astype(np.int64), np.abs(total)
            exp = np.full(total.shape, K_MIN, dtype=np.int64)
            nan_lane = np.zeros(total.shape, dtype=bool)
        val = np.minimum(round_float(mag, exp, FP16_MBITS, FP16_EMIN), FP16_MAX_BITS) | (sgn << 15)
        val = np.where(nan_lane, FP16_QNAN | (sgn << 15), val)
        val[~valid] = FP16_QNAN
        out[sel] = val
        bad[sel] = ~valid | nan_lane.any(axis=1)
    return out.astype(np.uint16), bad


# --------------------------------------------------------------------------- packing

def data_layout(fmt, raw):
    """Lane width of each record's ``data``: a raw-stored record holds FP16 lanes."""
    return np.where(np.asarray(raw, dtype=bool), FP16, np.asarray(fmt, dtype=np.int64))


def pack_data(codes, fmt, raw=False):
    """512-bit ``data`` field of each record as Python ints (lane i of width 16/8/4 at bit i*width)."""
    codes = np.asarray(codes, dtype=np.int64)
    fmts = data_layout(_as_fmts(fmt, codes.shape[0]), raw)
    out = []
    for f, row in zip(fmts, codes):
        out.append(int.from_bytes(_data_bytes(row, f), "little"))
    return out


def _data_bytes(row, f):
    if f == FP16:
        return (row & 0xFFFF).astype("<u2").tobytes()
    if f in (FP8, INT8):
        return (row & 0xFF).astype(np.uint8).tobytes()
    nib = (row & 0xF).astype(np.uint8)
    return (nib[0::2] | (nib[1::2] << 4)).tobytes()


def unpack_data(words, fmt, raw=False):
    """Inverse of :func:`pack_data`: (n, 32) int64 lane values of 512-bit ``data`` ints."""
    fmts = data_layout(_as_fmts(fmt, len(words)), raw)
    raw = np.frombuffer(b"".join(int(w).to_bytes(64, "little") for w in words), dtype=np.uint8)
    raw = raw.reshape(len(words), 64).astype(np.int64)
    out = np.empty((len(words), LANES), dtype=np.int64)
    w16 = raw[:, 0::2] | (raw[:, 1::2] << 8)
    for f in range(4):
        sel = fmts == f
        if f == FP16:
            out[sel] = w16[sel]
        elif f in (FP8, INT8):
            out[sel] = raw[sel, :LANES]
        else:
            b = raw[sel, :LANES // 2]
            out[sel] = np.stack([b & 0xF, b >> 4], axis=2).reshape(-1, LANES)
    return out


#: bits of a stored record without its tag: fmt 2, raw 1, scale 16, min 16, data 512 (hdl/quant.py
#: ``record_layout``, fields LSB first); what the tier memories hold per line with the host data path
RECORD_BITS = 2 + 1 + 16 + 16 + 16 * LANES


def record_words(rec: Records) -> list:
    """Each record packed as one int, the RTL's ``record_layout`` without the tag (LSB first)."""
    data = pack_data(rec.codes, rec.fmt, rec.raw)
    return [int(f) | int(r) << 2 | int(s) << 3 | int(mn) << 19 | d << 35
            for f, r, s, mn, d in zip(rec.fmt, rec.raw, rec.scale, rec.min, data)]


def word_records(words) -> Records:
    """Inverse of :func:`record_words` (any ``RECORD_BITS``-bit words: the read path takes what memory holds)."""
    words = [int(w) for w in words]
    fmt = np.array([w & 3 for w in words], dtype=np.int64)
    raw = np.array([(w >> 2) & 1 for w in words], dtype=bool)
    scale = np.array([(w >> 3) & 0xFFFF for w in words], dtype=np.uint16)
    mins = np.array([(w >> 19) & 0xFFFF for w in words], dtype=np.uint16)
    codes = unpack_data([w >> 35 for w in words], fmt, raw) if words else np.zeros((0, LANES), np.int64)
    return Records(fmt, raw, scale, mins, codes)


def line_bits(word: int):
    """A 512-bit line (lane i at bit 16 i) as (32,) FP16 bits."""
    return np.frombuffer(int(word).to_bytes(LINE_BYTES, "little"), dtype="<u2").astype(np.uint16)


def bits_line(bits) -> int:
    """Inverse of :func:`line_bits`."""
    return int.from_bytes(np.asarray(bits, dtype=np.int64).astype("<u2").tobytes(), "little")


# --------------------------------------------------------------------------- the contract's API

def quantize_line(x, fmt) -> bytes:
    """Stored blob of one line of 32 FP16 values (layout in the module docstring)."""
    x = np.asarray(x)
    if x.dtype != np.float16 or x.shape != (LANES,):
        raise QuantError(f"a line is {LANES} float16 values, got dtype {x.dtype} shape {x.shape}")
    f = fmt_code(fmt)
    rec = quantize_records(x[None, :], f)
    if f == FP16 or rec.raw[0]:
        return _data_bytes(rec.codes[0], FP16)
    head = int(rec.scale[0]).to_bytes(2, "little")
    if f == INT4:
        head += int(rec.min[0]).to_bytes(2, "little")
    return head + _data_bytes(rec.codes[0], f)


def dequantize_line(blob: bytes, fmt) -> np.ndarray:
    """The 32 FP16 values a blob of format ``fmt`` stands for."""
    f = fmt_code(fmt)
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise QuantError(f"blob must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) == LINE_BYTES:
        return np.frombuffer(blob, dtype="<u2").astype(np.uint16).view(np.float16).copy()
    if len(blob) != BLOB_BYTES[f]:
        raw = "" if BLOB_BYTES[f] == LINE_BYTES else f" (or {LINE_BYTES} if stored raw)"
        raise QuantError(f"a {FORMATS[f]} blob is {BLOB_BYTES[f]} bytes{raw}, got {len(blob)}")
    scale = int.from_bytes(blob[0:2], "little")
    mins = int.from_bytes(blob[2:4], "little") if f == INT4 else 0
    body = blob[4:] if f == INT4 else blob[2:]
    codes = unpack_data([int.from_bytes(body, "little")], f)
    out, bad = dequantize_records(Records(np.array([f]), np.array([False]), np.array([scale]),
                                          np.array([mins]), codes))
    if bad[0]:
        raise QuantError(f"malformed {FORMATS[f]} blob: scale {scale:#06x}"
                         + (f", min {mins:#06x}" if f == INT4 else "") + " or a NaN code")
    return out[0].view(np.float16)


def roundtrip(lines, fmt):
    """FP16 bits after quantize then dequantize (n, 32), and the records."""
    rec = quantize_records(lines, fmt)
    out, bad = dequantize_records(rec)
    assert not bad.any()
    return out, rec


# --------------------------------------------------------------------------- evaluation on synthetic data

DISTRIBUTIONS = ("gaussian", "outlier", "uniform")
#: Channels (lane indices) made large in the "outlier" distribution: keys show a few such channels.
OUTLIER_LANES = (3, 17)
OUTLIER_GAIN = 20.0


def synthetic_lines(dist, n, rng):
    """FP16 bits (n, 32) of synthetic KV lines: ``gaussian`` N(0, 1) times a per-line magnitude
    2^U(-4, 4); ``outlier`` the same with lanes OUTLIER_LANES times OUTLIER_GAIN (channel
    outliers, as in keys); ``uniform`` U(-1, 1)."""
    if dist not in DISTRIBUTIONS:
        raise QuantError(f"unknown distribution '{dist}': expected one of {', '.join(DISTRIBUTIONS)}")
    if dist == "uniform":
        x = rng.uniform(-1, 1, size=(n, LANES))
    else:
        x = rng.standard_normal((n, LANES)) * 2.0 ** rng.uniform(-4, 4, size=(n, 1))
        if dist == "outlier":
            x[:, list(OUTLIER_LANES)] *= OUTLIER_GAIN
    return np.clip(x, -65504, 65504).astype(np.float16).view(np.uint16)


def _ideal_free_scale(x, f):
    """Reference quantizer with an unrounded float scale (amax/127, span/15, amax/448): what a
    free FP16 scale and a divider per value would give, to show the cost of power-of-two scales."""
    amax = np.abs(x).max(axis=1, keepdims=True)
    if f == INT8:
        s = np.where(amax > 0, amax / 127, 1.0)
        return np.rint(x / s) * s
    if f == INT4:
        lo = x.min(axis=1, keepdims=True)
        s = np.where(x.max(axis=1, keepdims=True) > lo, (x.max(axis=1, keepdims=True) - lo) / 15, 1.0)
        return np.rint((x - lo) / s) * s + lo
    import ml_dtypes
    s = np.where(amax > 0, amax / 448, 1.0)
    return (x / s).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * s


def error_stats(bits, fmt):
    """Error of the quantize/dequantize round trip of FP16 lines against the FP16 input.

    Returns a dict: ``snr_db`` (10 log10 of signal power over error power), ``rel_rms``
    (RMS error / RMS value), ``max_err_over_amax`` (largest |error| / its line's max |x|),
    ``bits_per_value`` (stored bits, scale and min included), ``raw_lines``, and, for the
    quantized formats, ``snr_db_free_scale``: the same SNR with an unrounded per-line scale.
    """
    f = fmt_code(fmt)
    rec = quantize_records(bits, f)
    out, _ = dequantize_records(rec)
    bits = _as_lines(bits)
    x = bits.astype(np.uint16).view(np.float16).astype(np.float64)
    y = out.view(np.float16).astype(np.float64)
    fin = np.isfinite(x).all(axis=1)
    x, y = x[fin], y[fin]
    err = y - x
    amax = np.abs(x).max(axis=1, keepdims=True)
    sig, noise = float(np.mean(x ** 2)), float(np.mean(err ** 2))

    def snr(p):
        return float("inf") if p == 0 else 10 * np.log10(sig / p)

    stats = {
        "format": FORMATS[f],
        "lines": int(bits.shape[0]),
        "snr_db": snr(noise),
        "rel_rms": float(np.sqrt(noise / sig)) if sig else 0.0,
        "max_err_over_amax": float(np.max(np.abs(err) / np.where(amax > 0, amax, 1))),
        "bits_per_value": BLOB_BYTES[f] * 8 / LANES,
        "raw_lines": int(rec.raw.sum()),
    }
    if f != FP16:
        stats["snr_db_free_scale"] = snr(float(np.mean((_ideal_free_scale(x, f) - x) ** 2)))
    return stats


def attention_error(fmt, rng, tokens=2048, head_dim=128, queries=16, outlier_channels=4, gain=10.0):
    """Error of softmax(q K^T / sqrt(d)) V when K and V are stored in ``fmt``, against FP16 K, V.

    Synthetic: K ~ N(0, 1) with ``outlier_channels`` channels times ``gain`` (key channel
    outliers), V and q ~ N(0, 1). Each token's K and V vectors are head_dim/32 lines. Returns
    ``rel_l2`` (||out' - out|| / ||out||), ``max_abs`` and ``max_weight_err`` (largest change of
    an attention weight). Computed in float64 from the FP16 values.
    """
    if head_dim % LANES:
        raise QuantError(f"head_dim must be a multiple of {LANES}, got {head_dim}")
    f = fmt_code(fmt)
    k = rng.standard_normal((tokens, head_dim))
    k[:, rng.choice(head_dim, size=outlier_channels, replace=False)] *= gain
    v = rng.standard_normal((tokens, head_dim))
    q = rng.standard_normal((queries, head_dim))

    def store(a):
        b = a.astype(np.float16).view(np.uint16).reshape(-1, LANES)
        out, _ = dequantize_records(quantize_records(b, f))
        return (b.view(np.float16).astype(np.float64).reshape(a.shape),
                out.view(np.float16).astype(np.float64).reshape(a.shape))

    def attend(kk, vv):
        s = q @ kk.T / np.sqrt(head_dim)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        return w, w @ vv

    (k16, kq), (v16, vq) = store(k), store(v)
    w_ref, ref = attend(k16, v16)
    w_q, got = attend(kq, vq)
    return {"format": FORMATS[f], "tokens": tokens, "head_dim": head_dim, "queries": queries,
            "rel_l2": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
            "max_abs": float(np.abs(got - ref).max()),
            "max_weight_err": float(np.abs(w_q - w_ref).max())}
