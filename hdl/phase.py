"""Prefill/decode phase detector: windowed read and write counts, a ratio test, hysteresis.

Golden model and the exact rules: :mod:`cxlkv.models.phase`. Documentation: ``docs/phase.md``.

One event per clock in (``ev_valid``, ``ev_write``; a tap on the access stream, never
back-pressured). Three register stages, so that no path is longer than one carry chain and a
few LUTs (the event's path was the board top's critical path, docs/phase.md "On the FPGA"):

* **input**: the event, with the clamped ratio and hysteresis of its clock; the controller's
  handshake ends here;
* **count**: the event updates the open window's counts and the balance
  ``reads - ratio * writes - 1`` (each write subtracts the ratio it came with: no multiply).
  Whether it closes the window is a flag computed the clock before, from the registered total
  and the window size of the event's clock; the vote is the sign of the new balance;
* **mode**: a closed window's registered vote moves the streak and the mode, and the phase.

``decode`` follows an event :data:`~cxlkv.models.phase.DRAIN` clocks later than an override
(which shows one clock after it is written).
"""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._params import require_int
from cxlkv.models import phase as M


class PhaseDetector(wiring.Component):
    def __init__(self, *, counter_width=32):
        self.counter_width = require_int(self, "counter_width", counter_width, 1)
        super().__init__({
            "ev_valid": In(1),
            "ev_write": In(1),
            "ratio": In(M.RATIO_BITS),
            "window_log2": In(M.WINDOW_LOG2_BITS),
            "hysteresis": In(M.HYSTERESIS_BITS),
            "phase_override": In(M.OVERRIDE_BITS),
            "decode": Out(1),
            "mode": Out(1),
            "phase_change": Out(1),
            "streak": Out(M.HYSTERESIS_BITS),
            "last_reads": Out(M.COUNT_BITS),
            "last_writes": Out(M.COUNT_BITS),
            "cfg_error": Out(1),
            "windows": Out(counter_width),
            "changes": Out(counter_width),
        })

    def elaborate(self, platform):
        m = Module()

        # ---- configuration as applied (clamped), and the flag that says it was
        ratio = Signal(M.RATIO_BITS)
        hyst = Signal(M.HYSTERESIS_BITS)
        override = Signal(M.OVERRIDE_BITS)
        m.d.comb += [
            ratio.eq(Mux(self.ratio == 0, 1, self.ratio)),
            hyst.eq(Mux(self.hysteresis == 0, 1, self.hysteresis)),
            override.eq(Mux(self.phase_override > M.OVERRIDE_DECODE, M.OVERRIDE_AUTO, self.phase_override)),
            self.cfg_error.eq((self.ratio == 0) | (self.window_log2 < M.WINDOW_LOG2_MIN) |
                              (self.window_log2 > M.WINDOW_LOG2_MAX) | (self.hysteresis == 0) |
                              (self.phase_override > M.OVERRIDE_DECODE)),
        ]
        # 2^window_log2 - 1 with window_log2 clamped to [MIN, MAX], written bit by bit (bit i is
        # i < window_log2) so that it is one LUT per bit ahead of the compare, not a shift and a subtract
        size_m1 = Signal(M.COUNT_BITS)
        m.d.comb += size_m1.eq(Cat(*(Const(1, 1) if i < M.WINDOW_LOG2_MIN else
                                     self.window_log2 > i if i < M.WINDOW_LOG2_MAX else Const(0, 1)
                                     for i in range(M.COUNT_BITS))))

        # ---- input stage: the event, with the ratio and hysteresis of its clock
        v1 = Signal()
        w1 = Signal()
        neg_ratio1 = Signal(signed(M.RATIO_BITS + 1))        # negated here, not in front of the balance's adder
        hyst1 = Signal(M.HYSTERESIS_BITS)
        m.d.sync += [v1.eq(self.ev_valid), w1.eq(self.ev_write), neg_ratio1.eq(-ratio), hyst1.eq(hyst)]

        # ---- count stage: the open window (the event in the input register not included)
        reads = Signal(M.COUNT_BITS)
        writes = Signal(M.COUNT_BITS)
        total = Signal(M.COUNT_BITS)
        balance = Signal(signed(M.BALANCE_BITS), init=-1)     # reads - sum of the writes' ratios - 1
        close_next = Signal()                                 # the event in the input register closes
        close = Signal()
        balance_n = Signal(signed(M.BALANCE_BITS))
        m.d.comb += [
            close.eq(v1 & close_next),
            balance_n.eq(balance + Mux(w1, neg_ratio1, 1)),
        ]
        # into the mode stage; the streak cannot move between here and there (a window is >= 16 events)
        closed = Signal()
        vote = Signal()
        switch = Signal()
        m.d.sync += [closed.eq(close), vote.eq(~balance_n[-1]), switch.eq(self.streak + 1 >= hyst1)]
        with m.If(close):
            m.d.sync += [reads.eq(0), writes.eq(0), total.eq(0), balance.eq(-1),
                         self.last_reads.eq(reads + ~w1), self.last_writes.eq(writes + w1),
                         self.windows.eq(self.windows + 1)]
        with m.Elif(v1):
            m.d.sync += [reads.eq(reads + ~w1), writes.eq(writes + w1), total.eq(total + 1), balance.eq(balance_n)]
        # the next event closes its window if the total after this clock's event, + 1, reaches the
        # size of the next event's clock (this one): both cases compared from the registered total
        size_m2 = Cat(Const(0, 1), size_m1[1:])              # 2^window_log2 - 2
        m.d.sync += close_next.eq(~close & Mux(v1, total >= size_m2, total >= size_m1))

        # ---- mode stage: a closed window's vote, hysteresis, the mode and the (registered) phase
        mode_n = Signal()
        mode = Signal()
        m.d.comb += [self.mode.eq(mode), mode_n.eq(mode)]
        with m.If(closed):
            with m.If(vote == mode):
                m.d.sync += self.streak.eq(0)
            with m.Elif(switch):
                m.d.comb += mode_n.eq(vote)
                m.d.sync += self.streak.eq(0)
            with m.Else():
                m.d.sync += self.streak.eq(self.streak + 1)
        m.d.sync += mode.eq(mode_n)
        phase_n = Signal()
        m.d.comb += phase_n.eq(Mux(override == M.OVERRIDE_DECODE, M.DECODE,
                                   Mux(override == M.OVERRIDE_PREFILL, M.PREFILL, mode_n)))
        m.d.sync += [self.decode.eq(phase_n), self.phase_change.eq(phase_n != self.decode)]
        with m.If(phase_n != self.decode):
            m.d.sync += self.changes.eq(self.changes + 1)
        return m


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"phase": lambda: PhaseDetector()}
