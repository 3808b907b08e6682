"""Golden model of the prefill/decode phase detector (``hdl/phase.py``, ``docs/phase.md``).

The device sees the access stream of every queue, one event per clock at most.
Prefill appends (writes) the prompt's KV entries; decode reads them all at every
step and appends one. The detector tells them apart by counting:

* **windows** are consecutive, non-overlapping runs of events (reads and writes,
  not cycles): a window closes at the event that brings its count to
  ``2**window_log2`` (or beyond, if the size was lowered meanwhile);
* a closed window **votes** decode if ``reads > ratio * writes`` (strictly), else
  prefill (the seed's ratio: 10);
* **hysteresis**: a vote different from the current mode increments a streak, a
  vote equal to it clears the streak; when the streak reaches ``hysteresis`` the
  mode changes and the streak clears. With ``hysteresis = 1`` every differing
  window switches;
* the mode starts at prefill after reset;
* the **phase** the rest of the device uses is the mode unless overridden
  (``override`` 1: prefill, 2: decode); it is registered, so it follows the mode
  (or an override write) one clock later; every change of the phase counts in
  ``changes`` and raises ``phase_change`` for one clock.

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
    """Cycle-accurate model of ``hdl.phase.PhaseDetector``: :meth:`tick` is one clock edge."""

    def __init__(self, counter_width: int = 32):
        self.counter_width = counter_width
        self.reads = 0             #: reads in the open window
        self.writes = 0            #: writes in the open window
        self.mode = PREFILL        #: the automatic decision
        self.streak = 0            #: consecutive windows that voted against the mode
        self.phase = PREFILL       #: registered effective phase
        self.phase_change = 0      #: the phase changed at the last edge
        self.last_reads = 0        #: counts of the last closed window
        self.last_writes = 0
        self.windows = 0           #: windows closed
        self.changes = 0           #: phase changes

    def outputs(self, cfg: PhaseConfig) -> dict:
        return {"decode": self.phase, "mode": self.mode, "streak": self.streak, "phase_change": self.phase_change,
                "last_reads": self.last_reads, "last_writes": self.last_writes, "windows": self.windows,
                "changes": self.changes, "cfg_error": int(sanitize(cfg)[1])}

    def tick(self, cfg: PhaseConfig, valid: int, write: int):
        c, _ = sanitize(cfg)
        mask = (1 << self.counter_width) - 1
        mode = self.mode
        if valid:
            reads = self.reads + (0 if write else 1)
            writes = self.writes + (1 if write else 0)
            if reads + writes >= 1 << c.window_log2:
                vote = window_vote(reads, writes, c.ratio)
                if vote == mode:
                    self.streak = 0
                elif self.streak + 1 >= c.hysteresis:
                    mode = vote
                    self.streak = 0
                else:
                    self.streak += 1
                self.last_reads, self.last_writes = reads, writes
                self.windows = (self.windows + 1) & mask
                reads = writes = 0
            self.reads, self.writes = reads, writes
        self.mode = mode
        phase = effective_phase(mode, c.override)
        self.phase_change = int(phase != self.phase)
        if self.phase_change:
            self.changes = (self.changes + 1) & mask
        self.phase = phase


def run(ops, cfg: PhaseConfig = PhaseConfig()) -> list[int]:
    """The phase after each event of ``ops`` (0 read, 1 write), one event per clock."""
    det = PhaseDetector()
    out = []
    for op in ops:
        det.tick(cfg, 1, int(op))
        out.append(det.phase)
    return out
