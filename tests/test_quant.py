"""Golden model of the quantizer: exact arithmetic, ml_dtypes agreement, documented error bounds
(hypothesis, against an ideal float reference), non-finite lines, malformed input, the contract API."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cxlkv.errors import CxlkvError
from cxlkv.models import quant as M

FINITE_BITS = np.concatenate([np.arange(0, 0x7C00), np.arange(0x8000, 0xFC00)]).astype(np.int64)


def f64(bits):
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float64)


# --------------------------------------------------------------------------- exact helpers

def test_fp8_encoder_equals_ml_dtypes_on_every_scaled_value():
    """Every finite FP16 magnitude, every scale the format uses: code == ml_dtypes' RNE cast."""
    sign, mag, _ = M.fp16_to_fix(FINITE_BITS[FINITE_BITS < 0x8000])
    checked = 0
    for j in range(0, M.J_MAX[M.FP8] + 1):
        scaled = mag.astype(np.float64) * 2.0 ** -j          # exact in float64 and float32
        ok = scaled <= 448
        ref = scaled[ok].astype(np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        got = M.round_float(mag[ok], -j, M.FP8_MBITS, M.FP8_EMIN)
        assert np.array_equal(got, ref.astype(np.int64)), f"j={j}"
        checked += int(ok.sum())
    assert checked > 500_000


def test_fp8_saturates_instead_of_nan():
    # beyond 448 ml_dtypes gives NaN; the format here saturates (never reached by a chosen scale)
    big = np.array([449, 464, 480, 1 << 20], dtype=np.int64)
    assert (np.minimum(M.round_float(big, 0, 3, -6), M.FP8_MAX_CODE) == 0x7E).all()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 43) - 1), st.integers(-60, 20))
def test_fp16_rounding_equals_numpy(mag, exp):
    value = mag * 2.0 ** exp                                    # exact: mag < 2^53
    with np.errstate(over="ignore"):
        ref = np.float16(value)
    got = int(M.round_float(np.array([mag]), np.array([exp]), M.FP16_MBITS, M.FP16_EMIN)[0])
    if np.isinf(ref):
        assert got >= 0x7C00                                    # the dequantizer saturates these
    else:
        assert got == int(ref.view(np.uint16))


def test_fix_is_exact_and_rne_ties_to_even():
    sign, mag, nonfinite = M.fp16_to_fix(FINITE_BITS)
    assert not nonfinite.any()
    assert np.array_equal(np.where(sign == 1, -1.0, 1.0) * mag * 2.0 ** -24, f64(FINITE_BITS))
    assert M.rne_shift(np.array([5, 6, 7, 10, 14, 3]), np.array([1, 2, 1, 2, 2, -2])).tolist() == [2, 2, 4, 2, 4, 12]


def test_scale_bits_are_the_powers_of_two():
    j = np.arange(0, M.J_MAX[M.INT4] + 1)
    bits = M.scale_bits(j)
    assert np.array_equal(f64(bits), 2.0 ** (j - 24))
    back, valid = M.scale_shift(bits, M.INT4)
    assert valid.all() and np.array_equal(back, j)
    _, valid8 = M.scale_shift(bits, M.FP8)
    assert np.array_equal(valid8, j <= M.J_MAX[M.FP8])


# --------------------------------------------------------------------------- error bounds

def _scale_exponent(rec):
    j, valid = M.scale_shift(rec.scale, int(rec.fmt[0]))
    assert valid.all()
    return j + M.K_MIN


def _check_bounds(bits, fmt):
    """The documented per-format bounds (docs/quant.md, "Error bounds") for lines of FP16 bits."""
    rec = M.quantize_records(bits, fmt)
    out, bad = M.dequantize_records(rec)
    assert not bad.any() and not rec.raw.any()
    x, y = f64(bits), f64(out)
    assert np.isfinite(y).all(), "finite input dequantized to Inf/NaN"
    err = np.abs(y - x)
    f = M.FMT_CODE[fmt]
    if f == M.FP16:
        assert np.array_equal(out, bits)
        return
    k = _scale_exponent(rec)[:, None].astype(np.float64)
    step = 2.0 ** k
    amax = np.abs(x).max(axis=1, keepdims=True)
    span = x.max(axis=1, keepdims=True) - x.min(axis=1, keepdims=True)
    bounded = span if f == M.INT4 else amax
    limit = M.CODE_LIMIT[f][0]
    # the scale is the smallest power of two (>= 2^-24) with no code beyond the format's limit
    assert (bounded <= limit * step).all()
    assert ((k == M.K_MIN) | (bounded > limit * step / 2)).all()
    if f == M.INT8:
        q = rec.codes.astype(np.int64)
        q = np.where(q >= 128, q - 256, q)
        assert (np.abs(q) <= 127).all()
        assert np.array_equal(np.minimum(np.abs(q * step), 65504) * np.sign(q), y)   # exact product
        assert (err <= step / 2).all()
        assert (err <= amax / 127).all()
    elif f == M.INT4:
        assert ((rec.codes >= 0) & (rec.codes <= 15)).all()
        assert (err <= step / 2 + 2.0 ** -11 * (np.abs(x) + step / 2) + 2.0 ** -25).all()
        assert (err <= span / 15 + 2.0 ** -11 * (np.abs(x) + span / 15) + 2.0 ** -25).all()
    else:
        e4m3 = np.maximum(2.0 ** -4 * np.abs(x), step * 2.0 ** -10)
        assert (err <= e4m3 + 2.0 ** -11 * (np.abs(x) + e4m3) + 2.0 ** -25).all()


finite_f16 = st.integers(0, 0xFFFF).filter(lambda b: (b & 0x7C00) != 0x7C00)
finite_lines = hnp.arrays(np.uint16, (1, M.LANES), elements=finite_f16)


@st.composite
def scaled_lines(draw):
    """Gaussian-like lines at one magnitude, optionally with one outlier: typical KV lines."""
    mag = 2.0 ** draw(st.floats(-26, 15.9))
    vals = draw(hnp.arrays(np.float64, (M.LANES,), elements=st.floats(-3, 3)))
    if draw(st.booleans()):
        vals[draw(st.integers(0, M.LANES - 1))] *= draw(st.floats(1, 2000))
    with np.errstate(over="ignore"):
        line = np.clip(vals * mag, -65504, 65504).astype(np.float16)
    return line.view(np.uint16)[None, :]


@pytest.mark.parametrize("fmt", M.FORMATS)
@settings(max_examples=200, deadline=None)
@given(bits=finite_lines)
def test_error_bounds_arbitrary_finite_lines(fmt, bits):
    _check_bounds(bits, fmt)


@pytest.mark.parametrize("fmt", M.FORMATS)
@settings(max_examples=200, deadline=None)
@given(bits=scaled_lines())
def test_error_bounds_typical_lines(fmt, bits):
    _check_bounds(bits, fmt)


@pytest.mark.parametrize("fmt", M.FORMATS)
def test_error_bounds_bulk(fmt):
    """The same bounds on 20,000 random lines of mixed families (the bench's stimulus)."""
    from cxlkv.tb.quant.stimulus import edge_lines, random_lines
    edges = edge_lines()
    edges = edges[((edges & 0x7C00) != 0x7C00).all(axis=1)]
    bits = np.concatenate([random_lines(np.random.default_rng(5), 20_000, nonfinite=0.0), edges])
    _check_bounds(bits, fmt)


# --------------------------------------------------------------------------- non-finite lines

@st.composite
def nonfinite_lines(draw):
    line = draw(hnp.arrays(np.uint16, (M.LANES,), elements=finite_f16))
    lanes = draw(st.lists(st.integers(0, M.LANES - 1), min_size=1, max_size=M.LANES, unique=True))
    for lane in lanes:    # Inf or NaN with any payload and sign
        line[lane] = 0x7C00 | draw(st.integers(0, 0x3FF)) | (draw(st.integers(0, 1)) << 15)
    return line


@pytest.mark.parametrize("fmt", M.FORMATS)
@settings(max_examples=150, deadline=None)
@given(line=nonfinite_lines())
def test_nonfinite_lines_round_trip_unchanged(fmt, line):
    blob = M.quantize_line(line.view(np.float16), fmt)
    assert blob == line.astype("<u2").tobytes()                  # stored raw, bit for bit
    assert np.array_equal(M.dequantize_line(blob, fmt).view(np.uint16), line)
    rec = M.quantize_records(line[None, :], fmt)
    assert bool(rec.raw[0]) == (fmt != "fp16")
    out, bad = M.dequantize_records(rec)
    assert np.array_equal(out[0], line) and not bad[0]


# --------------------------------------------------------------------------- edge lines

def _rt(values, fmt):
    x = np.asarray(values, dtype=np.float16)
    return M.dequantize_line(M.quantize_line(x, fmt), fmt)


@pytest.mark.parametrize("fmt", M.FORMATS)
def test_edge_lines(fmt):
    zeros = np.zeros(32)
    assert np.array_equal(_rt(zeros, fmt), zeros)
    assert np.array_equal(_rt(np.full(32, 2.0 ** -24), fmt), np.full(32, 2.0 ** -24))   # subnormal, exact
    assert np.array_equal(_rt(np.full(32, 65504.0), fmt), np.full(32, 65504.0))        # max finite, exact
    assert np.array_equal(_rt(np.full(32, -65504.0), fmt), np.full(32, -65504.0))
    mixed = np.where(np.arange(32) % 2, -65504.0, 65504.0)
    assert np.isfinite(_rt(mixed, fmt)).all()
    ramp = np.arange(32) * 2.0 ** -24                                                   # subnormal ramp
    if fmt in ("fp16", "int8"):                                 # 31 <= 127: int8 at scale 2^-24 is exact
        assert np.array_equal(_rt(ramp, fmt), ramp)
    # single outlier: the outlier survives within its format's rounding
    out = _rt(np.concatenate([np.full(31, 0.01), [1000.0]]), fmt)
    assert abs(out[31] - 1000.0) <= 1000.0 / 16


def test_negative_zero():
    nz = np.full(32, -0.0, dtype=np.float16)
    assert (_rt(nz, "fp16").view(np.uint16) == 0x8000).all()
    assert (_rt(nz, "fp8").view(np.uint16) == 0x8000).all()      # fp8 keeps the sign of zero
    for fmt in ("int8", "int4"):
        assert (_rt(nz, fmt).view(np.uint16) == 0).all()         # integers have one zero


def test_int4_all_equal_line_is_exact():
    for v in (1.0, -3.14, 65504.0, 2.0 ** -24, 0.0):
        x = np.full(32, v, dtype=np.float16)
        blob = M.quantize_line(x, "int4")
        assert np.array_equal(M.dequantize_line(blob, "int4"), x)
        assert blob[0:2] == (1).to_bytes(2, "little") and blob[4:] == bytes(16)   # scale 2^-24, codes 0


def test_blob_layout():
    x = np.linspace(-1, 1, 32).astype(np.float16)
    assert len(M.quantize_line(x, "fp16")) == 64
    assert len(M.quantize_line(x, "fp8")) == len(M.quantize_line(x, "int8")) == 34
    assert len(M.quantize_line(x, "int4")) == 20
    blob = M.quantize_line(x, "int8")
    # amax 1: 127 * 2^-7 < 1 <= 127 * 2^-6, so the scale is 2^-6 and 1.0 is code 64
    assert int.from_bytes(blob[0:2], "little") == M.scale_bits(24 - 6)
    assert blob[2 + 31] == 64 and blob[2] == (256 - 64)
    b4 = M.quantize_line(x, "int4")
    assert int.from_bytes(b4[2:4], "little") == int(np.float16(-1).view(np.uint16))
    # span 2: 15 * 2^-3 < 2 <= 15 * 2^-2, scale 2^-2: codes 0 .. 8
    assert int.from_bytes(b4[0:2], "little") == M.scale_bits(24 - 2)
    assert b4[4] & 0xF == 0 and b4[-1] >> 4 == 8


def test_records_pack_round_trip():
    rng = np.random.default_rng(3)
    from cxlkv.tb.quant.stimulus import random_lines
    bits = random_lines(rng, 400)
    fmts = rng.integers(0, 4, 400)
    rec = M.quantize_records(bits, fmts)
    words = M.pack_data(rec.codes, rec.fmt, rec.raw)
    assert np.array_equal(M.unpack_data(words, rec.fmt, rec.raw), rec.codes)
    for i in range(40):                                        # the batch model equals the line API
        blob = M.quantize_line(bits[i].view(np.float16), int(fmts[i]))
        assert np.array_equal(M.dequantize_line(blob, int(fmts[i])).view(np.uint16),
                              M.dequantize_records(M.Records(*(a[i:i + 1] for a in rec)))[0][0])


# --------------------------------------------------------------------------- malformed input

def test_bad_arguments_raise_cxlkv_errors():
    x = np.zeros(32, dtype=np.float16)
    with pytest.raises(CxlkvError, match="unknown format 'fp4'"):
        M.quantize_line(x, "fp4")
    for fmt in (2.7, True, None, 4, -1, "2"):                  # an integer code 0..3 or a name, nothing else
        with pytest.raises(CxlkvError, match="unknown format"):
            M.quantize_line(x, fmt)
    assert M.fmt_code(np.int64(2)) == M.fmt_code("int8")
    with pytest.raises(CxlkvError, match=r"fp16 blob is 64 bytes, got 33"):
        M.dequantize_line(bytes(33), "fp16")
    with pytest.raises(CxlkvError, match="32 float16"):
        M.quantize_line(np.zeros(32, dtype=np.float32), "fp8")
    with pytest.raises(CxlkvError, match="32 float16"):
        M.quantize_line(np.zeros(31, dtype=np.float16), "fp8")
    with pytest.raises(CxlkvError, match="34 bytes"):
        M.dequantize_line(bytes(33), "int8")
    with pytest.raises(CxlkvError, match="must be bytes"):
        M.dequantize_line("abc", "int8")
    bad_scale = (3).to_bytes(2, "little") + bytes(32)          # 3 * 2^-24: not a power of two
    with pytest.raises(CxlkvError, match="malformed int8 blob"):
        M.dequantize_line(bad_scale, "int8")
    inf_min = (1).to_bytes(2, "little") + (0x7C00).to_bytes(2, "little") + bytes(16)
    with pytest.raises(CxlkvError, match="malformed int4 blob"):
        M.dequantize_line(inf_min, "int4")
    big_scale = int(M.scale_bits(M.J_MAX[M.FP8] + 1)).to_bytes(2, "little") + bytes(32)
    with pytest.raises(CxlkvError, match="malformed fp8 blob"):
        M.dequantize_line(big_scale, "fp8")


def test_malformed_records_have_defined_output():
    n = 4
    codes = np.zeros((n, 32), dtype=np.int64)
    codes[3, 5] = 0xFF                                          # fp8 NaN code (negative)
    rec = M.Records(np.array([M.INT8, M.INT4, M.FP8, M.FP8]), np.zeros(n, bool),
                    np.array([3, 1, 0x7C00, 1], dtype=np.uint16),
                    np.array([0, 0xFE00, 0, 0], dtype=np.uint16), codes)
    out, bad = M.dequantize_records(rec)
    assert bad.tolist() == [True, True, True, True]
    assert (out[:3] == M.FP16_QNAN).all()                      # whole line NaN for a bad scale/min
    assert out[3, 5] == 0xFE00 and (np.delete(out[3], 5) == 0).all()

