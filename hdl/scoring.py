"""EMA scoring pipeline: EMA update and eviction priority, one event per clock.

Golden model and fixed-point definition: :mod:`cxlkv.models.scoring`.
Documentation: ``docs/scoring.md``.

Per event in: {id, ema, sample, update, last_step, cur_step}; per event out:
{id, ema (updated if ``update``), priority}. α and τ are configuration inputs,
sampled when an event is accepted, so a configuration change never alters an
event already in flight. Any change of α or τ stalls the input for a cycle
(the configuration is registered); a τ change also starts a bit-serial divider
(82 + up to 21 cycles) that derives the decay constants, and the input stalls meanwhile.

Pipeline (10 stages, one event per clock, full backpressure): a stage moves
only when the output register is empty or being read (``advance``). One
multiply, shift or add/compare per stage, for 125 MHz-class FPGA timing.

  S1 input register             S2 diff = sample - ema, age = sat(cur - last)
  S3 diff*α, age*mant (2 halves) S4 new EMA, age*mant summed
  S5 y = age*mant >> shift       S6 ROM address (y's fraction), integer part
  S7 ROM word registered         S8 r = 1 - (ROM >> yi), 1 - ema
  S9 (1 - ema) * r               S10 round, clamp: the output register
"""
from amaranth import Cat, Module, Mux, Shape, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._params import require_int
from cxlkv.hdl._pipeline import LockstepPipeline
from cxlkv.models import scoring as M

TAU_IN_BITS = M.TAU_BITS
TAU_EFF_BITS = M.TAU_MAX.bit_length()          # 21: 1 .. 2^20
SHIFT_BITS = 5                                 # 48 - n, n in 21..41 -> 7..27
PIPELINE_STAGES = 10                           # latency from the accepting edge to o.valid


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

    Restoring division, one quotient bit per two cycles (2 * RATE_BITS cycles): the trial
    subtract is registered (``diff``, from registers alone, with no enable or state in front of
    its carry chain), and the next cycle keeps ``trial`` or ``diff``. Then up to 21 cycles to
    normalise (one left shift per cycle): ``mant`` = the top MANT_BITS bits of ``rate``,
    ``shift`` = 48 - bit_length(rate). ``start`` is honoured when not ``busy``.
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
        lz = Signal(range(n + 1))                  # leading zeros shifted out while normalising
        dividend = Signal(n)                       # shifts left; its top bit enters rem
        trial = Signal(TAU_EFF_BITS + 2)
        # trial - divisor, registered every cycle; its top bit is the borrow (trial < divisor).
        # As one cycle's compare and subtract behind the FSM's state it was the board's
        # critical path (fsm_state → the trial's carry chain → quot/rem, 9.36 ns at 0f14eae).
        diff = Signal(TAU_EFF_BITS + 3)
        m.d.comb += trial.eq(Cat(dividend[-1], rem))
        m.d.sync += diff.eq(trial - divisor)

        # The state is three flip-flops, with `busy` itself one of them: the controller's start
        # (stale_r & ~busy & ~loading) is then one LUT of flip-flops in front of the load's
        # enables. With `busy` decoded from an FSM's state, the state → busy → start → the
        # enables of rem, quot and divisor (66 loads) was 8.77 ns in the board build of b6c0a0b.
        busy = Signal()                            # not idle: subtracting or normalising
        stepping = Signal()                        # this cycle keeps trial or diff (else diff is made)
        normalising = Signal()
        m.d.comb += self.busy.eq(busy)
        with m.If(~busy):
            with m.If(self.start):
                m.d.sync += [divisor.eq(self.tau), rem.eq(0), quot.eq(0), count.eq(n), lz.eq(0),
                             dividend.eq(M.LOG2E_Q40), busy.eq(1), stepping.eq(0), normalising.eq(0)]
        with m.Elif(~normalising):
            # diff is made from rem in one cycle (stepping low), the next keeps trial or diff
            m.d.sync += stepping.eq(~stepping)
            with m.If(stepping):
                with m.If(diff[-1]):
                    m.d.sync += [rem.eq(trial), quot.eq(Cat(0, quot))]
                with m.Else():
                    m.d.sync += [rem.eq(diff), quot.eq(Cat(1, quot))]
                m.d.sync += [count.eq(count - 1), dividend.eq(dividend << 1)]
                with m.If(count == 1):
                    m.d.sync += normalising.eq(1)
        with m.Else():
            # shift the quotient left until its top bit is set (at most 20 shifts for
            # tau <= 2^20, then the cycle that loads: <= 21 cycles, as docs/scoring.md says):
            # no wide priority encoder or barrel shifter in the fast path
            with m.If(quot[-1]):
                m.d.sync += [
                    self.mant.eq(quot[n - M.MANT_BITS:]),
                    self.shift.eq(M.MANT_BITS + 40 - M.Y_FRAC_BITS - n + lz),
                    busy.eq(0), normalising.eq(0),
                ]
            with m.Else():
                m.d.sync += [quot.eq(quot << 1), lz.eq(lz + 1)]
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
        self.id_width = require_int(self, "id_width", id_width, 1)
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
        N = PIPELINE_STAGES

        # -- configuration, registered and sanitized. The event input stalls for the cycle in
        # which the registered copy differs from the inputs, so an accepted event always sees
        # the alpha/tau on the inputs at its accepting edge (what the model assumes).
        alpha_in = Signal(M.ALPHA_BITS)
        tau_in = Signal(TAU_IN_BITS)
        alpha_eff = Signal(M.ALPHA_BITS)
        tau_clamped = Signal(TAU_EFF_BITS)
        tau_eff = Signal(TAU_EFF_BITS)
        cfg_changed = Signal()
        m.d.comb += tau_clamped.eq(Mux(self.tau < M.TAU_MIN, M.TAU_MIN, Mux(self.tau > M.TAU_MAX, M.TAU_MAX, self.tau)))
        m.d.sync += [
            alpha_in.eq(self.alpha), tau_in.eq(self.tau),
            alpha_eff.eq(Mux(self.alpha == 0, 1, self.alpha)),
            tau_eff.eq(tau_clamped),
            self.cfg_error.eq((self.alpha == 0) | (self.tau < M.TAU_MIN) | (self.tau > M.TAU_MAX)),
        ]
        m.d.comb += cfg_changed.eq((alpha_in != self.alpha) | (tau_in != self.tau))

        m.submodules.divider = div = DecayRateDivider()
        # all ones at reset: never a valid tau, and never tau_eff's reset value (0), so the rate is
        # stale from the first cycle and an event offered at reset waits for the divider (reset to 0
        # it matched tau_eff while alpha = tau = 0 were on the inputs: the event was taken at once,
        # with alpha 0 and a zero decay rate)
        tau_loaded = Signal(TAU_EFF_BITS, init=(1 << TAU_EFF_BITS) - 1)
        tau_pending = Signal(TAU_EFF_BITS)
        stale = Signal()
        was_busy = Signal()
        loading = Signal()                         # the divider's result is loaded this cycle
        # The divider starts from a register (stale_r: tau_eff differs from the tau loaded by the
        # end of this cycle), as the controller's does: the inputs' compares and the clamp are off
        # the divider's enables (input -> cfg_changed -> start -> enables was this block's
        # critical path, 8.37 ns). stale_r equals the combinational stale in every cycle, so a tau
        # change starts it when it did before; ~loading keeps it from starting again in the cycle
        # its result is loaded (tau_loaded is updated only then: every tau change ran it twice).
        stale_r = Signal()
        m.d.comb += [
            stale.eq(tau_eff != tau_loaded),
            loading.eq(was_busy & ~div.busy),
            div.tau.eq(tau_eff),
            div.start.eq(stale_r & ~div.busy & ~loading),
            # (busy from stale_r, the same value without this 24-bit compare, measured slower:
            # stale_r then drives the pipeline's advance, and tau -> stale_r lengthens; 123.93
            # against 131.13 MHz mean over five nextpnr seeds of this block alone)
            self.busy.eq(stale | div.busy | cfg_changed),
        ]
        m.d.sync += stale_r.eq(tau_clamped != Mux(loading, tau_pending, tau_loaded))
        with m.If(div.start):
            m.d.sync += tau_pending.eq(tau_eff)
        m.d.sync += was_busy.eq(div.busy)
        with m.If(loading):
            m.d.sync += tau_loaded.eq(tau_pending)

        # -- pipeline control: every stage moves when the output register is empty or read
        pipe = LockstepPipeline(m, N, self.i, self.o, accept=~self.busy)
        advance, on_advance = pipe.advance, pipe.on_advance

        def stage(name, shape):
            return Signal(shape, name=name)

        # S1: input register, with the configuration the event was accepted under
        s1 = stage("s1", input_layout(idw))
        s1_alpha = stage("s1_alpha", M.ALPHA_BITS)
        s1_mant = stage("s1_mant", M.MANT_BITS)
        s1_shift = stage("s1_shift", SHIFT_BITS)
        on_advance(s1.eq(self.i.payload), s1_alpha.eq(alpha_eff), s1_mant.eq(div.mant), s1_shift.eq(div.shift))

        # S2: difference and saturated age
        age_raw = Signal(M.STEP_BITS)
        m.d.comb += age_raw.eq(s1.cur_step - s1.last_step)
        s2_id, s2_ema = stage("s2_id", idw), stage("s2_ema", M.SCORE_BITS)
        s2_diff = stage("s2_diff", signed(M.SCORE_BITS + 1))
        s2_update, s2_alpha = stage("s2_update", 1), stage("s2_alpha", M.ALPHA_BITS)
        s2_age, s2_mant, s2_shift = stage("s2_age", M.AGE_BITS), stage("s2_mant", M.MANT_BITS), stage("s2_shift", SHIFT_BITS)
        on_advance(s2_id.eq(s1.id), s2_ema.eq(s1.ema), s2_update.eq(s1.update),
                   s2_diff.eq(s1.sample - s1.ema), s2_age.eq(Mux(age_raw > M.AGE_MAX, M.AGE_MAX, age_raw)),
                   s2_alpha.eq(s1_alpha), s2_mant.eq(s1_mant), s2_shift.eq(s1_shift))

        # S3: products; age x mant as two 12 x 18 halves (one multiplier block each)
        half = M.AGE_BITS // 2
        s3_id, s3_ema, s3_update = stage("s3_id", idw), stage("s3_ema", M.SCORE_BITS), stage("s3_update", 1)
        s3_prod = stage("s3_prod", signed(M.SCORE_BITS + 1 + M.ALPHA_BITS + 1))
        s3_am_lo = stage("s3_am_lo", half + M.MANT_BITS)
        s3_am_hi = stage("s3_am_hi", half + M.MANT_BITS)
        s3_shift = stage("s3_shift", SHIFT_BITS)
        on_advance(s3_id.eq(s2_id), s3_ema.eq(s2_ema), s3_update.eq(s2_update),
                   s3_prod.eq(s2_diff * s2_alpha),
                   s3_am_lo.eq(s2_age[:half] * s2_mant), s3_am_hi.eq(s2_age[half:] * s2_mant),
                   s3_shift.eq(s2_shift))

        # S4: new EMA; age x mant summed
        step = Signal(signed(s3_prod.shape().width))
        m.d.comb += step.eq((s3_prod + 0x8000) >> 16)
        s4_id, s4_ema = stage("s4_id", idw), stage("s4_ema", M.SCORE_BITS)
        s4_am = stage("s4_am", M.AGE_BITS + M.MANT_BITS)
        s4_shift = stage("s4_shift", SHIFT_BITS)
        on_advance(s4_id.eq(s3_id), s4_ema.eq(Mux(s3_update, (s3_ema + step)[:M.SCORE_BITS], s3_ema)),
                   s4_am.eq(s3_am_lo + (s3_am_hi << half)), s4_shift.eq(s3_shift))

        # S5: y = age*mant >> shift (UQ.10)
        s5_id, s5_ema = stage("s5_id", idw), stage("s5_ema", M.SCORE_BITS)
        s5_y = stage("s5_y", M.AGE_BITS + M.MANT_BITS)
        on_advance(s5_id.eq(s4_id), s5_ema.eq(s4_ema), s5_y.eq(s4_am >> s4_shift))

        # S6: ROM address from y's fraction; integer part kept for the shift
        yi = Signal(M.AGE_BITS + M.MANT_BITS - M.Y_FRAC_BITS)
        m.d.comb += yi.eq(s5_y[M.Y_FRAC_BITS:])
        m.submodules.exp_rom = rom = Memory(shape=M.SCORE_BITS + 1, depth=1 << M.EXP_INDEX_BITS,
                                            init=M.EXP2_NEG_Q16)
        rd = rom.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(s5_y[:M.Y_FRAC_BITS]), rd.en.eq(advance)]
        yi_width = Shape.cast(range(M.EXP_SHIFT_LIMIT)).width
        s6_id, s6_ema = stage("s6_id", idw), stage("s6_ema", M.SCORE_BITS)
        s6_yi_big, s6_yi = stage("s6_yi_big", 1), stage("s6_yi", yi_width)
        on_advance(s6_id.eq(s5_id), s6_ema.eq(s5_ema), s6_yi_big.eq(yi >= M.EXP_SHIFT_LIMIT),
                   s6_yi.eq(yi[:yi_width]))

        # S7: the ROM's word for this event, registered (block-RAM output register)
        s7_id, s7_ema = stage("s7_id", idw), stage("s7_ema", M.SCORE_BITS)
        s7_e = stage("s7_e", M.SCORE_BITS + 1)
        s7_yi_big, s7_yi = stage("s7_yi_big", 1), stage("s7_yi", yi_width)
        on_advance(s7_id.eq(s6_id), s7_ema.eq(s6_ema), s7_e.eq(rd.data), s7_yi_big.eq(s6_yi_big), s7_yi.eq(s6_yi))

        # S8: r = 1 - 2^-y in UQ1.16, and 1 - ema, so S9 is the multiply alone
        s8_id, s8_ema, s8_r = stage("s8_id", idw), stage("s8_ema", M.SCORE_BITS), stage("s8_r", M.SCORE_BITS + 1)
        s8_one_minus = stage("s8_one_minus", M.SCORE_BITS + 1)
        on_advance(s8_id.eq(s7_id), s8_ema.eq(s7_ema), s8_r.eq(ONE - Mux(s7_yi_big, 0, s7_e >> s7_yi)),
                   s8_one_minus.eq(ONE - s7_ema))

        # S9: (1 - ema) x r, one 17 x 17 multiply
        s9_id, s9_ema = stage("s9_id", idw), stage("s9_ema", M.SCORE_BITS)
        s9_prod = stage("s9_prod", 2 * (M.SCORE_BITS + 1))
        on_advance(s9_id.eq(s8_id), s9_ema.eq(s8_ema), s9_prod.eq(s8_one_minus * s8_r))

        # S10: round to nearest, clamp to UQ0.16; the output register
        prio = Signal(2 * (M.SCORE_BITS + 1))
        m.d.comb += prio.eq((s9_prod + 0x8000) >> 16)
        on_advance(self.o.payload.id.eq(s9_id), self.o.payload.ema.eq(s9_ema),
                   self.o.payload.priority.eq(Mux(prio > M.SCORE_MAX, M.SCORE_MAX, prio)))
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"scoring": lambda: ScoringPipeline(id_width=32)}
