"""EMA scoring pipeline: EMA update and eviction priority, one event per clock.

Golden model and fixed-point definition: :mod:`cxlkv.models.scoring`.
Documentation: ``docs/scoring.md``.

Per event in: {id, ema, sample, update, last_step, cur_step}; per event out:
{id, ema (updated if ``update``), priority}. α and τ are configuration inputs,
sampled when an event is accepted, so a configuration change never alters an
event already in flight. A τ change starts a bit-serial divider (45 cycles)
that derives the decay constants; the input stalls meanwhile.

Pipeline (6 stages, one event per clock, full backpressure): a stage moves
only when the output register is empty or being read (``advance``).

  S1 input register          S2 diff = sample - ema, age = sat(cur - last)
  S3 diff*α, age*mant        S4 new EMA, y = age*mant >> shift, ROM address
  S5 e = ROM[yf] >> yi, r    S6 priority = (1 - ema) * r, rounded, clamped
"""
from amaranth import Cat, Module, Mux, Shape, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.models import scoring as M

TAU_IN_BITS = M.TAU_BITS
TAU_EFF_BITS = M.TAU_MAX.bit_length()          # 21: 1 .. 2^20
SHIFT_BITS = 5                                 # 48 - n, n in 21..41 -> 7..27


def input_layout(id_width):
    return data.StructLayout({
        "id": id_width,
        "ema": M.SCORE_BITS,
        "sample": M.SCORE_BITS,
        "update": 1,
        "last_step": M.STEP_BITS,
        "cur_step": M.STEP_BITS,
    })


def output_layout(id_width):
    return data.StructLayout({
        "id": id_width,
        "ema": M.SCORE_BITS,
        "priority": M.SCORE_BITS,
    })


class DecayRateDivider(wiring.Component):
    """Derives the decay constants of τ: ``rate = floor(LOG2E_Q40 / tau)``, normalised.

    Restoring division, one quotient bit per cycle (RATE_BITS cycles), then one
    cycle to normalise: ``mant`` = the top MANT_BITS bits of ``rate``, ``shift`` =
    48 - bit_length(rate). ``start`` is honoured when not ``busy``.
    """
    tau: In(TAU_EFF_BITS)
    start: In(1)
    busy: Out(1)
    mant: Out(M.MANT_BITS)
    shift: Out(SHIFT_BITS)

    def elaborate(self, platform):
        m = Module()
        n = M.RATE_BITS
        divisor = Signal(TAU_EFF_BITS)
        rem = Signal(TAU_EFF_BITS + 1)
        quot = Signal(n)
        count = Signal(range(n + 1))
        dividend = Signal(n)                       # shifts left; its top bit enters rem

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [divisor.eq(self.tau), rem.eq(0), quot.eq(0), count.eq(n),
                                 dividend.eq(M.LOG2E_Q40)]
                    m.next = "DIVIDE"
            with m.State("DIVIDE"):
                m.d.comb += self.busy.eq(1)
                trial = Signal(TAU_EFF_BITS + 2)
                m.d.comb += trial.eq(Cat(dividend[-1], rem))
                with m.If(trial >= divisor):
                    m.d.sync += [rem.eq(trial - divisor), quot.eq(Cat(1, quot))]
                with m.Else():
                    m.d.sync += [rem.eq(trial), quot.eq(Cat(0, quot))]
                m.d.sync += [count.eq(count - 1), dividend.eq(dividend << 1)]
                with m.If(count == 1):
                    m.next = "NORMALISE"
            with m.State("NORMALISE"):
                m.d.comb += self.busy.eq(1)
                # bit length of the quotient; it is at least 21 for tau <= 2^20
                nbits = Signal(range(n + 1))
                for i in range(n):
                    with m.If(quot[i]):
                        m.d.comb += nbits.eq(i + 1)
                drop = Signal(range(n))                # nbits - MANT_BITS, never negative here
                m.d.comb += drop.eq(nbits - M.MANT_BITS)
                m.d.sync += [
                    self.mant.eq(quot >> drop),
                    self.shift.eq(M.MANT_BITS + 40 - M.Y_FRAC_BITS - nbits),
                ]
                m.next = "IDLE"
        return m


class ScoringPipeline(wiring.Component):
    """EMA-update and eviction-priority unit; see the module docstring.

    Parameters
    ----------
    id_width : int
        Width of the opaque entry id carried through (default 32).

    Ports
    -----
    i : stream of :func:`input_layout`, in.
    o : stream of :func:`output_layout`, out; backpressure honoured.
    alpha : UQ0.16 EMA weight. 0 is applied as 1 and flags ``cfg_error``.
    tau : recency time constant in steps; clamped to [1, 2^20], flags ``cfg_error``.
    cfg_error : the configuration on ``alpha``/``tau`` is out of range (clamped).
    busy : the decay divider is running after a τ change; ``i.ready`` is low.
    """

    def __init__(self, id_width=32):
        self.id_width = id_width
        super().__init__({
            "i": In(stream.Signature(input_layout(id_width))),
            "o": Out(stream.Signature(output_layout(id_width))),
            "alpha": In(M.ALPHA_BITS),
            "tau": In(TAU_IN_BITS),
            "cfg_error": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        idw = self.id_width
        ONE = M.SCORE_ONE

        # -- configuration: sanitize, and re-derive decay constants when tau changes
        alpha_eff = Signal(M.ALPHA_BITS)
        tau_eff = Signal(TAU_EFF_BITS)
        m.d.comb += [
            alpha_eff.eq(Mux(self.alpha == 0, 1, self.alpha)),
            tau_eff.eq(Mux(self.tau < M.TAU_MIN, M.TAU_MIN,
                           Mux(self.tau > M.TAU_MAX, M.TAU_MAX, self.tau))),
        ]
        m.d.sync += self.cfg_error.eq((self.alpha == 0) | (self.tau < M.TAU_MIN) | (self.tau > M.TAU_MAX))

        m.submodules.divider = div = DecayRateDivider()
        tau_loaded = Signal(TAU_EFF_BITS)          # 0 at reset: never a valid tau
        tau_pending = Signal(TAU_EFF_BITS)
        stale = Signal()
        m.d.comb += [
            stale.eq(tau_eff != tau_loaded),
            div.tau.eq(tau_eff),
            div.start.eq(stale & ~div.busy),
            self.busy.eq(stale | div.busy),
        ]
        with m.If(div.start):
            m.d.sync += tau_pending.eq(tau_eff)
        was_busy = Signal()
        m.d.sync += was_busy.eq(div.busy)
        with m.If(was_busy & ~div.busy):
            m.d.sync += tau_loaded.eq(tau_pending)

        # -- pipeline control
        valid = Signal(6)                          # valid[k] = stage k+1 holds an event
        advance = Signal()
        m.d.comb += [
            advance.eq(~valid[5] | self.o.ready),
            self.i.ready.eq(advance & ~self.busy),
            self.o.valid.eq(valid[5]),
        ]
        with m.If(advance):
            m.d.sync += valid.eq(Cat(self.i.valid & self.i.ready, valid[:5]))

        # -- S1: input register (configuration sampled with the event)
        s1 = Signal(input_layout(idw))
        s1_alpha = Signal(M.ALPHA_BITS)
        s1_mant = Signal(M.MANT_BITS)
        s1_shift = Signal(SHIFT_BITS)
        with m.If(advance):
            m.d.sync += [s1.eq(self.i.payload), s1_alpha.eq(alpha_eff),
                         s1_mant.eq(div.mant), s1_shift.eq(div.shift)]

        # -- S2: difference and age
        s2_id = Signal(idw)
        s2_ema = Signal(M.SCORE_BITS)
        s2_diff = Signal(signed(M.SCORE_BITS + 1))
        s2_update = Signal()
        s2_alpha = Signal(M.ALPHA_BITS)
        s2_age = Signal(M.AGE_BITS)
        s2_mant = Signal(M.MANT_BITS)
        s2_shift = Signal(SHIFT_BITS)
        age_raw = Signal(M.STEP_BITS)
        m.d.comb += age_raw.eq(s1.cur_step - s1.last_step)
        with m.If(advance):
            m.d.sync += [
                s2_id.eq(s1.id), s2_ema.eq(s1.ema), s2_update.eq(s1.update),
                s2_diff.eq(s1.sample - s1.ema),
                s2_age.eq(Mux(age_raw > M.AGE_MAX, M.AGE_MAX, age_raw)),
                s2_alpha.eq(s1_alpha), s2_mant.eq(s1_mant), s2_shift.eq(s1_shift),
            ]

        # -- S3: the two products
        s3_id = Signal(idw)
        s3_ema = Signal(M.SCORE_BITS)
        s3_prod = Signal(signed(M.SCORE_BITS + 1 + M.ALPHA_BITS + 1))
        s3_update = Signal()
        s3_am = Signal(M.AGE_BITS + M.MANT_BITS)
        s3_shift = Signal(SHIFT_BITS)
        with m.If(advance):
            m.d.sync += [
                s3_id.eq(s2_id), s3_ema.eq(s2_ema), s3_update.eq(s2_update),
                s3_prod.eq(s2_diff * s2_alpha), s3_am.eq(s2_age * s2_mant), s3_shift.eq(s2_shift),
            ]

        # -- S4: new EMA; y = age*mant >> shift; ROM address
        s4_id = Signal(idw)
        s4_ema = Signal(M.SCORE_BITS)
        s4_yi_big = Signal()                       # integer part of y >= 17: e = 0
        s4_yi = Signal(range(M.EXP_SHIFT_LIMIT))
        y = Signal(M.AGE_BITS + M.MANT_BITS)
        yi = Signal(M.AGE_BITS + M.MANT_BITS - M.Y_FRAC_BITS)
        step = Signal(signed(s3_prod.shape().width))
        m.d.comb += [
            y.eq(s3_am >> s3_shift),
            yi.eq(y[M.Y_FRAC_BITS:]),
            step.eq((s3_prod + 0x8000) >> 16),
        ]
        m.submodules.exp_rom = rom = Memory(shape=M.SCORE_BITS + 1, depth=1 << M.EXP_INDEX_BITS,
                                            init=M.EXP2_NEG_Q16)
        rd = rom.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(y[:M.Y_FRAC_BITS]), rd.en.eq(advance)]
        with m.If(advance):
            m.d.sync += [
                s4_id.eq(s3_id),
                s4_ema.eq(Mux(s3_update, (s3_ema + step)[:M.SCORE_BITS], s3_ema)),
                s4_yi_big.eq(yi >= M.EXP_SHIFT_LIMIT),
                s4_yi.eq(yi[:Shape.cast(range(M.EXP_SHIFT_LIMIT)).width]),
            ]

        # -- S5: e = 2^-y in UQ1.16; r = 1 - e
        s5_id = Signal(idw)
        s5_ema = Signal(M.SCORE_BITS)
        s5_r = Signal(M.SCORE_BITS + 1)
        with m.If(advance):
            m.d.sync += [
                s5_id.eq(s4_id), s5_ema.eq(s4_ema),
                s5_r.eq(ONE - Mux(s4_yi_big, 0, rd.data >> s4_yi)),
            ]

        # -- S6: priority = (1 - ema) * r, rounded to nearest, clamped to UQ0.16
        prio = Signal(2 * (M.SCORE_BITS + 1))
        m.d.comb += prio.eq(((ONE - s5_ema) * s5_r + 0x8000) >> 16)
        with m.If(advance):
            m.d.sync += [
                self.o.payload.id.eq(s5_id),
                self.o.payload.ema.eq(s5_ema),
                self.o.payload.priority.eq(Mux(prio > M.SCORE_MAX, M.SCORE_MAX, prio)),
            ]
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"scoring": lambda: ScoringPipeline(id_width=32)}
