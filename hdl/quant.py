"""Transparent KV quantizer: FP16 line -> stored record (write path) and back (read path).

Golden model and the exact arithmetic: :mod:`cxlkv.models.quant`. Documentation: ``docs/quant.md``.

One 64-byte line (32 FP16 lanes) per clock in each direction. The format travels with
the line (``fmt``: fp16 0, fp8 1, int8 2, int4 3); the stored record carries it, so the
read path needs nothing else. No divider anywhere: the per-line scale is a power of two,
so dividing by it is a shift; every rounding is round-to-nearest-even of an exact integer.

:class:`LineQuantizer` (5 stages)::

  S1 input register      S2 max/min of the 32 lanes (16-bit total-order keys), Inf/NaN
  S3 scale shift j       S4 per lane: operand and shift amount for the format
  S5 RNE shift, codes, record (output register)

:class:`LineDequantizer` (4 stages)::

  D1 input register      D2 scale check and decode, per lane (mag, exp) of the value
  D3 per lane FP16 exponent and shift    D4 RNE shift, saturate, line (output register)

Each pipeline moves only when its output register is empty or being read, so one line per
clock is sustained with the output ready and backpressure stalls every stage at once
(``i.ready = ~o.valid | o.ready``: a combinational path; put a skid buffer behind ``o``
if it limits timing). :class:`QuantUnit` holds both paths side by side.
"""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._params import require_int
from cxlkv.hdl._pipeline import LockstepPipeline
from cxlkv.models import quant as M

LANES = M.LANES
FMT_BITS = 2
COUNTER_BITS = 32
#: Fixed-point magnitude of an FP16 value in units of 2^-24: (1024 + 1023) << 29 < 2^40.
FIX_BITS = 40
SHIFT_BITS = 6


def line_layout(tag_width):
    """Write-path input: a host line and the format configured for its queue."""
    return data.StructLayout({
        "tag": tag_width,
        "fmt": FMT_BITS,
        "data": data.ArrayLayout(16, LANES),
    })


def record_layout(tag_width):
    """The stored form of a line (see cxlkv.models.quant: unused fields are zero)."""
    return data.StructLayout({
        "tag": tag_width,
        "fmt": FMT_BITS,
        "raw": 1,
        "scale": 16,
        "min": 16,
        "data": 16 * LANES,
    })


def readback_layout(tag_width):
    """Read-path output: the FP16 line, and ``bad`` if its record was malformed."""
    return data.StructLayout({
        "tag": tag_width,
        "bad": 1,
        "data": data.ArrayLayout(16, LANES),
    })


# --------------------------------------------------------------------------- combinational helpers

def _bit_length(m, v, name):
    """Bit length of an unsigned value (0 for 0): leading zeros by binary search, log2 steps."""
    width = 1 << (len(v) - 1).bit_length()
    x = Signal(width, name=f"{name}_x0")
    m.d.comb += x.eq(v)
    zeros = []
    step = width // 2
    while step:
        top_zero = Signal(name=f"{name}_z{step}")
        nxt = Signal(width, name=f"{name}_x{step}")
        m.d.comb += [top_zero.eq(x[width - step:] == 0),
                     nxt.eq(Mux(top_zero, (x << step)[:width], x))]
        zeros.append(top_zero)
        x = nxt
        step //= 2
    n = Signal(range(width + 1), name=name)
    # leading zeros = the skipped steps (binary weights) + 1 if the last bit is zero too
    m.d.comb += n.eq(width - (Cat(*reversed(zeros)) + ~x[-1]))
    return n


def _low_ones(width, s):
    """``2^s - 1`` in ``width`` bits for 0 <= s <= width, without a widening left shift."""
    return Const((1 << width) - 1, width) >> (width - s)[:len(s) + 1]


def _rne_shift_right(m, v, s, name):
    """``v / 2^s`` rounded to nearest, ties to even (v, s unsigned; s <= len(v)).

    Adds ``2^(s-1) - 1 + lsb`` (lsb = bit 0 of the truncated quotient) before the
    truncating shift: a remainder above one half, or exactly one half with an odd
    quotient, carries into the quotient. For s = 0 nothing is added.
    """
    width = len(v)
    lsb = Signal(name=f"{name}_lsb")
    m.d.comb += lsb.eq((v >> s)[0] & (s != 0))
    bias = Signal(width, name=f"{name}_bias")    # 2^(s-1) - 1 + lsb
    m.d.comb += bias.eq(Mux(s == 0, 0, _low_ones(width, s - 1) + lsb))
    out = Signal(width + 1, name=name)
    m.d.comb += out.eq((v + bias) >> s)
    return out


def _fp16_fix(bits):
    """(sign, |value| in units of 2^-24) of FP16 bits, as expressions."""
    e = bits[10:15]
    mant = bits[0:10]
    mag = Mux(e == 0, mant, Cat(mant, Const(1, 1)) << (e - 1)[:5])
    return bits[15], mag


class _Counter:
    """Saturating event counter."""

    @staticmethod
    def add(m, counter, event):
        with m.If(event & (counter != (1 << len(counter)) - 1)):
            m.d.sync += counter.eq(counter + 1)


# --------------------------------------------------------------------------- write path

class LineQuantizer(wiring.Component):
    """FP16 line + format -> stored record, one line per clock.

    Ports
    -----
    i : stream of :func:`line_layout`, in.
    o : stream of :func:`record_layout`, out; backpressure honoured; order kept.
    raw_lines : count of fp8/int8/int4 lines stored raw because they held Inf or NaN
        (counted as the record leaves; saturates at 2^32 - 1).
    """

    def __init__(self, tag_width=16):
        self.tag_width = require_int(self, "tag_width", tag_width, 1)
        super().__init__({
            "i": In(stream.Signature(line_layout(tag_width))),
            "o": Out(stream.Signature(record_layout(tag_width))),
            "raw_lines": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        stages = 5

        pipe = LockstepPipeline(m, stages, self.i, self.o)
        advance, carry = pipe.advance, pipe.carry

        # -- S1: input register
        s1 = carry(self.i.payload, "s1")

        # -- S2: line max/min by total-order keys (-0 < +0); any Inf/NaN
        lanes1 = [s1.data[k] for k in range(LANES)]
        keys = []
        for k, b in enumerate(lanes1):
            key = Signal(16, name=f"key{k}")
            m.d.comb += key.eq(Mux(b[15], ~b, b | 0x8000))
            keys.append(key)

        def reduce(vals, pick, name):
            level = 0
            while len(vals) > 1:
                nxt = []
                for i in range(0, len(vals), 2):
                    node = Signal(16, name=f"{name}_{level}_{i // 2}")
                    m.d.comb += node.eq(pick(vals[i], vals[i + 1]))
                    nxt.append(node)
                vals, level = nxt, level + 1
            return vals[0]

        key_max = reduce(keys, lambda a, b: Mux(a > b, a, b), "key_max")
        key_min = reduce(keys, lambda a, b: Mux(a < b, a, b), "key_min")

        def key_to_bits(k):
            return Mux(k[15], k ^ 0x8000, ~k)

        nonfinite = Signal()
        m.d.comb += nonfinite.eq(Cat(*[b[10:15] == 31 for b in lanes1]).any())
        s2 = carry(s1, "s2")
        s2_max = carry(key_to_bits(key_max)[:16], "s2_max")
        s2_min = carry(key_to_bits(key_min)[:16], "s2_min")
        s2_raw = carry(nonfinite & (s1.fmt != M.FP16), "s2_raw")

        # -- S3: the scale shift j = k + 24 (smallest with no code beyond the format's limit)
        max_sign, max_mag = _fp16_fix(s2_max)
        min_sign, min_mag = _fp16_fix(s2_min)
        fix_max = Signal(signed(FIX_BITS + 1))
        fix_min = Signal(signed(FIX_BITS + 1))
        m.d.comb += [
            fix_max.eq(Mux(max_sign, -max_mag, max_mag)),
            fix_min.eq(Mux(min_sign, -min_mag, min_mag)),
        ]
        amax = Signal(FIX_BITS)
        span = Signal(FIX_BITS + 1)
        m.d.comb += [
            amax.eq(Mux(max_mag > min_mag, max_mag, min_mag)),
            span.eq(fix_max - fix_min),
        ]
        bounded = Signal(FIX_BITS + 1)                 # the quantity the scale must cover
        code_width = Signal(4)
        m.d.comb += bounded.eq(Mux(s2.fmt == M.INT4, span, amax))
        with m.Switch(s2.fmt):
            for f in (M.FP8, M.INT8, M.INT4):
                with m.Case(f):
                    m.d.comb += code_width.eq(M.CODE_LIMIT[f][1])
        blen = _bit_length(m, bounded, "blen")
        j0 = Signal(SHIFT_BITS)
        m.d.comb += j0.eq(Mux(blen > code_width, blen - code_width, 0))
        code_limit = Signal(9)
        with m.Switch(s2.fmt):
            for f in (M.FP8, M.INT8, M.INT4):
                with m.Case(f):
                    m.d.comb += code_limit.eq(M.CODE_LIMIT[f][0])
        # bounded > C * 2^j0  <=>  ceil(bounded / 2^j0) > C
        bounded_ceil = Signal(FIX_BITS + 2)
        m.d.comb += bounded_ceil.eq((bounded + _low_ones(FIX_BITS + 1, j0)) >> j0)
        j = Signal(SHIFT_BITS)
        m.d.comb += j.eq(j0 + (bounded_ceil > code_limit))
        scale = Signal(16)                             # FP16 bits of 2^(j - 24)
        m.d.comb += scale.eq(Mux(j < 10, Const(0x200, 10) >> (9 - j)[:4], Cat(Const(0, 10), (j - 9)[:6])))
        s3 = carry(s2, "s3")
        s3_raw = carry(s2_raw, "s3_raw")
        s3_j = carry(j, "s3_j")
        s3_fix_min = carry(fix_min, "s3_fix_min")
        s3_scale = carry(Mux(s2_raw | (s2.fmt == M.FP16), 0, scale), "s3_scale")
        s3_min = carry(Mux(s2_raw | (s2.fmt != M.INT4), 0, s2_min), "s3_min")

        # -- S4: per lane, the operand and shift amount of the one RNE shifter.
        # All operands are pre-shifted left by 9 so fp8's shift (>= -9) is never negative.
        op_width = FIX_BITS + 1 + 9
        s4_ops, s4_shifts, s4_exps, s4_signs, s4_zero = [], [], [], [], []
        for k in range(LANES):
            sign, mag = _fp16_fix(s3.data[k])
            lane_len = _bit_length(m, mag, f"len{k}")
            fp8_shift = Signal(SHIFT_BITS, name=f"fp8_shift{k}")   # max(len + 5, j)
            m.d.comb += fp8_shift.eq(Mux(lane_len + 5 > s3_j, lane_len + 5, s3_j))
            diff = Signal(FIX_BITS + 1, name=f"diff{k}")           # value - min >= 0
            m.d.comb += diff.eq(Mux(sign, -mag, mag) - s3_fix_min)
            op = Signal(op_width, name=f"op{k}")
            shift = Signal(SHIFT_BITS, name=f"shift{k}")
            m.d.comb += [
                op.eq(Mux(s3.fmt == M.INT4, diff, mag) << 9),
                shift.eq(Mux(s3.fmt == M.FP8, fp8_shift, s3_j + 9)),
            ]
            s4_ops.append(carry(op, f"s4_op{k}"))
            s4_shifts.append(carry(shift, f"s4_shift{k}"))
            # fp8: biased exponent field before rounding = shift - j = max(len + 5 - j, 0)
            s4_exps.append(carry((fp8_shift - s3_j)[:5], f"s4_exp{k}"))
            s4_signs.append(carry(sign, f"s4_sign{k}"))
            s4_zero.append(carry(mag == 0, f"s4_zero{k}"))
        s4 = carry(s3, "s4")
        s4_raw = carry(s3_raw, "s4_raw")
        s4_scale = carry(s3_scale, "s4_scale")
        s4_min = carry(s3_min, "s4_min")

        # -- S5: RNE shift, codes, the record
        codes8 = []
        codes4 = []
        for k in range(LANES):
            n = _rne_shift_right(m, s4_ops[k], s4_shifts[k], f"rne{k}")
            fp8_mag = Signal(8, name=f"fp8_mag{k}")
            fp8_sum = Signal(9, name=f"fp8_sum{k}")
            m.d.comb += fp8_sum.eq((s4_exps[k] << 3) + n[:5])
            m.d.comb += fp8_mag.eq(Mux(s4_zero[k], 0, Mux(fp8_sum > M.FP8_MAX_CODE, M.FP8_MAX_CODE, fp8_sum)))
            fp8_code = Cat(fp8_mag[:7], s4_signs[k])
            q = n[:8]
            int8_code = Mux(s4_signs[k], -q, q)[:8]
            codes8.append(Mux(s4.fmt == M.FP8, fp8_code, int8_code))
            codes4.append(n[:4])
        record = self.o.payload
        with m.If(advance):
            m.d.sync += [
                record.tag.eq(s4.tag),
                record.fmt.eq(s4.fmt),
                record.raw.eq(s4_raw),
                record.scale.eq(s4_scale),
                record.min.eq(s4_min),
            ]
            with m.If(s4_raw | (s4.fmt == M.FP16)):
                m.d.sync += record.data.eq(s4.data.as_value())
            with m.Elif(s4.fmt == M.INT4):
                m.d.sync += record.data.eq(Cat(*codes4))
            with m.Else():
                m.d.sync += record.data.eq(Cat(*codes8))

        _Counter.add(m, self.raw_lines, self.o.valid & self.o.ready & record.raw)
        return m


# --------------------------------------------------------------------------- read path

class LineDequantizer(wiring.Component):
    """Stored record -> FP16 line, one line per clock.

    Ports
    -----
    i : stream of :func:`record_layout`, in.
    o : stream of :func:`readback_layout`, out; backpressure honoured; order kept.
    bad_records : count of malformed records read (a scale the quantizer cannot produce,
        a non-finite int4 minimum, an fp8 NaN code); saturates at 2^32 - 1.
    """

    def __init__(self, tag_width=16):
        self.tag_width = require_int(self, "tag_width", tag_width, 1)
        super().__init__({
            "i": In(stream.Signature(record_layout(tag_width))),
            "o": Out(stream.Signature(readback_layout(tag_width))),
            "bad_records": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        stages = 4
        pipe = LockstepPipeline(m, stages, self.i, self.o)
        advance, carry = pipe.advance, pipe.carry

        # -- D1: input register
        d1 = carry(self.i.payload, "d1")

        # -- D2: scale -> j; whether the record is one the quantizer can produce; lane values
        s_exp = d1.scale[10:15]
        s_mant = d1.scale[0:10]
        pow2_sub = (s_exp == 0) & (s_mant != 0) & ((s_mant & (s_mant - 1)) == 0)
        pow2_norm = (s_exp != 0) & (s_mant == 0)
        j = Signal(SHIFT_BITS)
        m.d.comb += j.eq(Mux(s_exp == 0, _bit_length(m, s_mant, 'scale_len') - 1, s_exp + 9))
        j_max = Signal(SHIFT_BITS)
        with m.Switch(d1.fmt):
            for f in (M.FP8, M.INT8, M.INT4):
                with m.Case(f):
                    m.d.comb += j_max.eq(M.J_MAX[f])
        min_sign, min_mag = _fp16_fix(d1.min)
        fix_min = Signal(signed(FIX_BITS + 1))
        m.d.comb += fix_min.eq(Mux(min_sign, -min_mag, min_mag))
        scale_ok = Signal()
        m.d.comb += scale_ok.eq((pow2_sub | pow2_norm) & ~d1.scale[15] & (j <= j_max)
                                & ((d1.fmt != M.INT4) | (d1.min[10:15] != 31)))
        passthrough = d1.raw | (d1.fmt == M.FP16)

        mag_width = FIX_BITS + 3                      # int4: |(q << j) + min| < 2^43
        exp_shape = signed(7)                         # value = mag * 2^exp, exp in -34 .. 14
        d2_mags, d2_exps, d2_signs, d2_nans = [], [], [], []
        for k in range(LANES):
            c8 = d1.data[8 * k:8 * k + 8]
            c4 = d1.data[4 * k:4 * k + 4]
            f8_e = c8[3:7]
            mag = Signal(mag_width, name=f"mag{k}")
            exp = Signal(exp_shape, name=f"exp{k}")
            sign = Signal(name=f"sign{k}")
            nan = Signal(name=f"nan{k}")
            total = Signal(signed(FIX_BITS + 4), name=f"total{k}")
            # q << j for j <= 38 (larger j: invalid scale, line replaced by NaN anyway)
            m.d.comb += total.eq((Cat(Const(0, M.J_MAX[M.INT4]), c4) >> (M.J_MAX[M.INT4] - j)[:SHIFT_BITS])
                                 + fix_min)
            with m.Switch(d1.fmt):
                with m.Case(M.FP8):
                    m.d.comb += [
                        sign.eq(c8[7]),
                        mag.eq(Mux(f8_e == 0, c8[0:3], Cat(c8[0:3], Const(1, 1)))),
                        exp.eq(Mux(f8_e == 0, 0, f8_e - 1) - 33 + j),
                        nan.eq(c8[0:7] == 0x7F),
                    ]
                with m.Case(M.INT8):
                    m.d.comb += [
                        sign.eq(c8[7]),
                        mag.eq(Mux(c8[7], -c8.as_signed(), c8)),
                        exp.eq(j - 24),
                    ]
                with m.Case(M.INT4):
                    m.d.comb += [
                        sign.eq(total < 0),
                        mag.eq(Mux(total < 0, -total, total)),
                        exp.eq(-24),
                    ]
            d2_mags.append(carry(mag, f"d2_mag{k}"))
            d2_exps.append(carry(exp, f"d2_exp{k}"))
            d2_signs.append(carry(sign, f"d2_sign{k}"))
            d2_nans.append(carry(nan, f"d2_nan{k}"))
        d2 = carry(d1, "d2")
        d2_pass = carry(passthrough, "d2_pass")
        d2_scale_ok = carry(scale_ok, "d2_scale_ok")

        # -- D3: FP16 exponent t = max(floor(log2 value), -14) and the shift to 11 bits.
        # Operands are pre-shifted left by 10, so the shift t - 10 - exp (>= -10) is >= 0.
        d3_ops, d3_shifts, d3_exps, d3_signs, d3_zero, d3_nans = [], [], [], [], [], []
        for k in range(LANES):
            lane_len = _bit_length(m, d2_mags[k], f"dlen{k}")
            top = Signal(signed(8), name=f"top{k}")             # floor(log2 value)
            m.d.comb += top.eq(lane_len - 1 + d2_exps[k])
            t = Signal(signed(8), name=f"t{k}")
            m.d.comb += t.eq(Mux(top > M.FP16_EMIN, top, M.FP16_EMIN))
            d3_ops.append(carry(d2_mags[k] << 10, f"d3_op{k}"))
            d3_shifts.append(carry((t - d2_exps[k])[:SHIFT_BITS], f"d3_shift{k}"))
            d3_exps.append(carry((t - M.FP16_EMIN)[:6], f"d3_exp{k}"))
            d3_signs.append(carry(d2_signs[k], f"d3_sign{k}"))
            d3_zero.append(carry(d2_mags[k] == 0, f"d3_zero{k}"))
            d3_nans.append(carry(d2_nans[k], f"d3_nan{k}"))
        d3 = carry(d2, "d3")
        d3_pass = carry(d2_pass, "d3_pass")
        d3_scale_ok = carry(d2_scale_ok, "d3_scale_ok")

        # -- D4: RNE to 11 significant bits, saturate to 65504, the line
        lanes_out = []
        for k in range(LANES):
            n = _rne_shift_right(m, d3_ops[k], d3_shifts[k], f"drne{k}")
            code = Signal(17, name=f"fp16_mag{k}")
            m.d.comb += code.eq((d3_exps[k] << 10) + n[:12])
            mag16 = Mux(d3_zero[k], 0, Mux(code > M.FP16_MAX_BITS, M.FP16_MAX_BITS, code))
            lane = Mux(d3_nans[k], M.FP16_QNAN, mag16[:15])
            lanes_out.append(Mux(d3_scale_ok, Cat(lane[:15], d3_signs[k]), M.FP16_QNAN))
        bad = ~d3_pass & (~d3_scale_ok | Cat(*d3_nans).any())
        out = self.o.payload
        with m.If(advance):
            m.d.sync += [out.tag.eq(d3.tag), out.bad.eq(bad)]
            with m.If(d3_pass):
                m.d.sync += out.data.eq(d3.data)
            with m.Else():
                m.d.sync += out.data.eq(Cat(*lanes_out))

        _Counter.add(m, self.bad_records, self.o.valid & self.o.ready & out.bad)
        return m


class QuantUnit(wiring.Component):
    """The block as the controller instantiates it: write path and read path side by side.

    Ports: ``wr_i``/``wr_o`` (:class:`LineQuantizer`), ``rd_i``/``rd_o``
    (:class:`LineDequantizer`), ``raw_lines``, ``bad_records``.
    """

    def __init__(self, tag_width=16):
        self.tag_width = require_int(self, "tag_width", tag_width, 1)
        super().__init__({
            "wr_i": In(stream.Signature(line_layout(tag_width))),
            "wr_o": Out(stream.Signature(record_layout(tag_width))),
            "rd_i": In(stream.Signature(record_layout(tag_width))),
            "rd_o": Out(stream.Signature(readback_layout(tag_width))),
            "raw_lines": Out(COUNTER_BITS),
            "bad_records": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.quantizer = q = LineQuantizer(self.tag_width)
        m.submodules.dequantizer = d = LineDequantizer(self.tag_width)
        wiring.connect(m, wiring.flipped(self.wr_i), q.i)
        wiring.connect(m, q.o, wiring.flipped(self.wr_o))
        wiring.connect(m, wiring.flipped(self.rd_i), d.i)
        wiring.connect(m, d.o, wiring.flipped(self.rd_o))
        m.d.comb += [self.raw_lines.eq(q.raw_lines), self.bad_records.eq(d.bad_records)]
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"quant": lambda: QuantUnit(tag_width=16)}
