"""Prefill/decode phase detector: windowed read and write counts, a ratio test, hysteresis.

Golden model and the exact rules: :mod:`cxlkv.models.phase`. Documentation: ``docs/phase.md``.

One event per clock in (``ev_valid``, ``ev_write``; a tap on the access stream, never
back-pressured). All state is registered; ``decode`` (the phase: 1 decode, 0 prefill) follows a mode change (or an
override) one clock later. The ratio test ``reads > ratio * writes`` is one 8 x 25-bit
multiply of the registered write count (plus ``ratio`` for a write event in the same cycle,
so the multiply is not on the event's path).
"""
from amaranth import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cxlkv.models import phase as M


class PhaseDetector(wiring.Component):
    def __init__(self, *, counter_width=32):
        self.counter_width = counter_width
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
        wlog2 = Signal(M.WINDOW_LOG2_BITS)
        hyst = Signal(M.HYSTERESIS_BITS)
        override = Signal(M.OVERRIDE_BITS)
        m.d.comb += [
            ratio.eq(Mux(self.ratio == 0, 1, self.ratio)),
            wlog2.eq(Mux(self.window_log2 < M.WINDOW_LOG2_MIN, M.WINDOW_LOG2_MIN,
                         Mux(self.window_log2 > M.WINDOW_LOG2_MAX, M.WINDOW_LOG2_MAX, self.window_log2))),
            hyst.eq(Mux(self.hysteresis == 0, 1, self.hysteresis)),
            override.eq(Mux(self.phase_override > M.OVERRIDE_DECODE, M.OVERRIDE_AUTO, self.phase_override)),
            self.cfg_error.eq((self.ratio == 0) | (self.window_log2 < M.WINDOW_LOG2_MIN) |
                              (self.window_log2 > M.WINDOW_LOG2_MAX) | (self.hysteresis == 0) |
                              (self.phase_override > M.OVERRIDE_DECODE)),
        ]

        # ---- the open window
        reads = Signal(M.COUNT_BITS)
        writes = Signal(M.COUNT_BITS)
        reads_n = Signal(M.COUNT_BITS)
        writes_n = Signal(M.COUNT_BITS)
        m.d.comb += [
            reads_n.eq(reads + (self.ev_valid & ~self.ev_write)),
            writes_n.eq(writes + (self.ev_valid & self.ev_write)),
        ]
        size = Signal(M.COUNT_BITS)
        m.d.comb += size.eq(Const(1, M.COUNT_BITS) << wlog2)
        close = Signal()
        m.d.comb += close.eq(self.ev_valid & ((reads_n + writes_n) >= size))

        # ---- vote and hysteresis
        # ratio * writes_n, with the multiply on the registered count (off the event path): the
        # event adds one more `ratio` when it is a write
        ratio_writes = Signal(M.COUNT_BITS + M.RATIO_BITS)
        m.d.comb += ratio_writes.eq(ratio * writes + Mux(self.ev_valid & self.ev_write, ratio, 0))
        vote = Signal()
        m.d.comb += vote.eq(reads_n > ratio_writes)
        mode = Signal()
        mode_n = Signal()
        streak = Signal(M.HYSTERESIS_BITS)
        m.d.comb += [self.mode.eq(mode), self.streak.eq(streak), mode_n.eq(mode)]
        with m.If(close):
            m.d.sync += [reads.eq(0), writes.eq(0), self.last_reads.eq(reads_n),
                         self.last_writes.eq(writes_n), self.windows.eq(self.windows + 1)]
            with m.If(vote == mode):
                m.d.sync += streak.eq(0)
            with m.Elif(streak + 1 >= hyst):
                m.d.comb += mode_n.eq(vote)
                m.d.sync += streak.eq(0)
            with m.Else():
                m.d.sync += streak.eq(streak + 1)
        with m.Elif(self.ev_valid):
            m.d.sync += [reads.eq(reads_n), writes.eq(writes_n)]
        m.d.sync += mode.eq(mode_n)

        # ---- the effective (registered) phase and its changes
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
