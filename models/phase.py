"""Golden model of the prefill/decode phase detector (``hdl/phase.py``, ``docs/phase.md``).

The device sees the access stream of every queue, one event per clock at most.
Prefill appends (writes) the prompt's KV entries; decode reads them all at every
step and appends one. The detector tells them apart by counting:

* **windows** are consecutive, non-overlapping runs of events (reads and writes,
  not cycles): a window closes at the event that brings its count to
  ``2**window_log2`` (or beyond, if the size was lowered meanwhile);
* a closed window **votes** decode if ``reads > ratio * writes`` (strictly), else
  prefill (the seed's ratio: 10). Each write weighs the ratio of the clock it came
  in, so a ratio written mid-window applies to the writes after it;
* **hysteresis**: a vote different from the current mode increments a streak, a
  vote equal to it clears the streak; when the streak reaches ``hysteresis`` (the
  value of the closing event's clock) the mode changes and the streak clears. With
  ``hysteresis = 1`` every differing window switches;
* the mode starts at prefill after reset;
* the **phase** the rest of the device uses is the mode unless overridden
  (``override`` 1: prefill, 2: decode); it is registered.

Timing (the RTL is pipelined for the FPGA clock): an event (and the ratio and
hysteresis of its clock) enters an input register at its clock edge; at the next
edge it is counted (``windows``, ``last_reads``, ``last_writes``), its window's vote
registered; at the one after, the streak, the mode and the phase move. So an event
reaches ``decode`` :data:`DRAIN` clocks later than an override, which shows one clock
after it is written. Every change of the phase counts in ``changes`` and raises
``phase_change`` for one clock.

Configuration the hardware cannot honour is clamped and flagged (``cfg_error``):
``ratio`` 0 acts as 1, ``window_log2`` is clamped to [4, 24], ``hysteresis`` 0
acts as 1, ``override`` 3 acts as 0 (automatic).
"""
from __future__ import annotations

from dataclasses import dataclass

PREFILL, DECODE = 0, 1
OVERRIDE_AUTO, OVERRIDE_PREFILL, OVERRIDE_DECODE = 0, 1, 2

RATIO_BITS = 8
WINDOW_LOG2_BITS = 5
WINDOW_LOG2_MIN, WINDOW_LOG2_MAX = 4, 24
HYSTERESIS_BITS = 8
OVERRIDE_BITS = 2
COUNT_BITS = WINDOW_LOG2_MAX + 1          #: per-window read/write counts: up to 2**24
#: the balance ``reads - ratio * writes - 1`` (signed): from -(255 * 2**24) - 1 to 2**24 - 1
BALANCE_BITS = WINDOW_LOG2_MAX + RATIO_BITS + 1
#: clocks an event takes, beyond an override's one, to reach the phase: its input register and
#: the count stage; after an event, DRAIN idle clocks show its effect on ``decode``
DRAIN = 2


@dataclass(frozen=True)
class PhaseConfig:
    ratio: int = 10
    window_log2: int = 12
    hysteresis: int = 2
    override: int = OVERRIDE_AUTO


def sanitize(cfg: PhaseConfig) -> tuple[PhaseConfig, bool]:
    """The configuration the hardware applies, and whether it differs from the one written."""
    applied = PhaseConfig(ratio=max(cfg.ratio, 1),
                          window_log2=min(max(cfg.window_log2, WINDOW_LOG2_MIN), WINDOW_LOG2_MAX),
                          hysteresis=max(cfg.hysteresis, 1),
                          override=cfg.override if cfg.override <= OVERRIDE_DECODE else OVERRIDE_AUTO)
    return applied, applied != cfg


def window_vote(reads: int, writes: int, ratio: int) -> int:
    """DECODE if the window's reads exceed ``ratio`` times its writes, else PREFILL."""
    return DECODE if reads > ratio * writes else PREFILL


def effective_phase(mode: int, override: int) -> int:
    return {OVERRIDE_PREFILL: PREFILL, OVERRIDE_DECODE: DECODE}.get(override, mode)


class PhaseDetector:
    """Cycle-accurate model of ``hdl.phase.PhaseDetector``: :meth:`tick` is one clock edge. The
    attributes are the RTL's registers, stage by stage."""

    def __init__(self, counter_width: int = 32):
        self.counter_width = counter_width
        # input register: the event, with the (clamped) ratio and hysteresis of its clock
        self.ev_valid = self.ev_write = 0
        self.ev_ratio = self.ev_hysteresis = 0
        # count stage: the open window, events in the input register not included
        self.reads = 0             #: reads in the open window
        self.writes = 0            #: writes in the open window
        self.total = 0             #: reads + writes
        self.balance = -1          #: reads - (the ratio of each write, summed) - 1: the vote is balance >= 0
        self.close_next = 0        #: the event in the input register closes its window
        self.last_reads = 0        #: counts of the last closed window
        self.last_writes = 0
        self.windows = 0           #: windows closed
        # into the mode stage: a window closed at the last edge, its vote, whether it completes a streak
        self.closed = 0
        self.vote = PREFILL
        self.switch = 0
        # mode stage
        self.mode = PREFILL        #: the automatic decision
        self.streak = 0            #: consecutive windows that voted against the mode
        self.phase = PREFILL       #: registered effective phase
        self.phase_change = 0      #: the phase changed at the last edge
        self.changes = 0           #: phase changes

    def outputs(self, cfg: PhaseConfig) -> dict:
        return {"decode": self.phase, "mode": self.mode, "streak": self.streak, "phase_change": self.phase_change,
                "last_reads": self.last_reads, "last_writes": self.last_writes, "windows": self.windows,
                "changes": self.changes, "cfg_error": int(sanitize(cfg)[1])}

    def tick(self, cfg: PhaseConfig, valid: int, write: int):
        c, _ = sanitize(cfg)
        mask = (1 << self.counter_width) - 1
        # mode stage: the window that closed at the last edge moves the streak and the mode
        mode, streak = self.mode, self.streak
        if self.closed:
            if self.vote == mode:
                streak = 0
            elif self.switch:
                mode, streak = self.vote, 0
            else:
                streak += 1
        phase = effective_phase(mode, c.override)
        # count stage: the event in the input register
        v, w = self.ev_valid, self.ev_write
        close = v and self.close_next
        balance = self.balance + (-self.ev_ratio if w else 1)
        self.closed, self.vote = int(close), DECODE if balance >= 0 else PREFILL
        self.switch = int(self.streak + 1 >= self.ev_hysteresis)      # the streak cannot move in between
        if close:
            self.last_reads, self.last_writes = self.reads + 1 - w, self.writes + w
            self.windows = (self.windows + 1) & mask
            self.reads = self.writes = self.total = 0
            self.balance = -1
        elif v:
            self.reads += 1 - w
            self.writes += w
            self.total += 1
            self.balance = balance
        # does the event coming in close its window (after the one counted now), at this clock's size
        self.close_next = int(not close and self.total + 1 >= 1 << c.window_log2)
        self.ev_valid, self.ev_write = int(bool(valid)), int(bool(write))
        self.ev_ratio, self.ev_hysteresis = c.ratio, c.hysteresis
        self.mode, self.streak = mode, streak
        self.phase_change = int(phase != self.phase)
        if self.phase_change:
            self.changes = (self.changes + 1) & mask
        self.phase = phase

    def drain(self, cfg: PhaseConfig):
        """:data:`DRAIN` idle clocks: the events so far have reached the phase."""
        for _ in range(DRAIN):
            self.tick(cfg, 0, 0)


def run(ops, cfg: PhaseConfig = PhaseConfig()) -> list[int]:
    """The phase after each event of ``ops`` (0 read, 1 write), one event per clock: the phase the
    detector shows :data:`DRAIN` clocks after that event's, which is the one it keeps if the
    stream stops there."""
    det = PhaseDetector()
    out = []
    for op in [*ops, *[None] * DRAIN]:
        det.tick(cfg, op is not None, int(bool(op)))
        out.append(det.phase)
    return out[DRAIN:]
