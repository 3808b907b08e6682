"""Golden model of the controller top (hdl/controller.py), as the host sees it.

The top holds the register block, the per-queue format table behind FMT_SEL/FMT_DATA,
the cold-list ring memory, the geometry fixed by parameters, and (for geometries whose
per-position memories fit on chip) the access tracker with its event input. The tracker
part is :class:`cxlkv.models.tracker.TrackerModel`, configured from the registers exactly
as the RTL wires them (docs/controller.md, "Configuration"):

* QUEUE_BUDGET.entries -> budget C, PINS.first_n -> pinned, ALPHA.value -> α,
  TAU.value -> τe (decay constants from ``scoring.decay_rate``, the top's divider);
* the ``hw`` parameters with no register yet (``hw_rank_tau``, ``hw_rank_tau_long``,
  ``hw_bucket_bits``, ``hw_write_sample``, ``hw_read_credit``) are elaboration parameters
  of the top, defaulting to ``policy.PolicyParams``' defaults;
* CONTROL.enable = 0 holds the tracker cleared (state and memories); events are only
  accepted while it is 1; CONTROL.counters_clear zeroes the counters.
"""
from __future__ import annotations

from dataclasses import dataclass

from cxlkv.models import policy as P
from cxlkv.models import regmap
from cxlkv.models import tracker as T
from cxlkv.models.regs import FormatTable, RegisterFile

COLDLIST = regmap.MEMORIES[0]

#: on-chip tracker memories up to this many words per region (queues x positions)
ONCHIP_MAX_WORDS = 1 << 16
TRACKER_CHOICES = ("auto", "onchip", "external", "none")

#: counter register <- tracker counter(s) it counts (VICTIM_NONE: demand misses with nothing
#: evictable plus victim requests answered none; the victim-request port is not used yet)
COUNTER_SOURCES = {
    "READS": ("reads",), "READ_HITS": ("read_hits",), "WRITES": ("writes",), "EVICTIONS": ("evictions",),
    "VICTIM_NONE": ("no_victim", "victim_none"), "STALL_CYCLES": ("mem_wait_cycles",),
}


@dataclass(frozen=True)
class TrackerStatics:
    """The tracker configuration fixed when the top is elaborated (no register holds it yet)."""
    hw_rank_tau: int = 0
    hw_rank_tau_long: int = 64
    hw_bucket_bits: int = 3
    hw_write_sample: int = 0
    hw_read_credit: int = 0

    @property
    def policy_params(self) -> P.PolicyParams:
        return P.PolicyParams(hw_rank_tau=self.hw_rank_tau, hw_rank_tau_long=self.hw_rank_tau_long,
                              hw_bucket_bits=self.hw_bucket_bits, hw_write_sample=self.hw_write_sample,
                              hw_read_credit=self.hw_read_credit).check()

    @property
    def tln_r(self) -> int:
        return P.hw_tau_ln2_q8(P.hw_rank_tau(self.policy_params))

    @property
    def tln_d(self) -> int:
        tl = P.hw_rank_tau_long(self.policy_params)
        return P.hw_tau_ln2_q8(tl) if tl else 0

    @property
    def n_buckets(self) -> int:
        """The deadline ring: the smallest power of two holding the policy's NB (128 for the defaults)."""
        return max(2, T.ring_size(P.hw_bucket_count(self.policy_params)))


def tracker_placement(choice: str, n_queues: int, n_positions: int) -> str:
    """Where the tracker's per-position memories live: 'onchip', 'external' (memory ports on
    the top) or 'none' (no tracker). 'auto' is on chip up to ONCHIP_MAX_WORDS words, else none."""
    if choice not in TRACKER_CHOICES:
        raise ValueError(f"tracker must be one of {', '.join(TRACKER_CHOICES)}, got {choice!r}")
    if choice == "auto":
        return "onchip" if n_queues * n_positions <= ONCHIP_MAX_WORDS else "none"
    return choice


class ControllerModel:
    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16, tracker="auto", **statics):
        self.n_layers, self.n_kv_heads, self.entries_log2 = n_layers, n_kv_heads, entries_log2
        self.n_queues = n_layers * n_kv_heads
        self.n_positions = 1 << entries_log2
        self.statics = TrackerStatics(**statics)
        self.tracker_placement = tracker_placement(tracker, self.n_queues, self.n_positions)
        self.regs = RegisterFile()
        self.formats = FormatTable(self.n_queues, self.regs)
        self.coldlist = [0] * COLDLIST.entries
        self.regs.external = self
        for field, v in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads)):
            self.regs.set_hw("GEOMETRY", field, v)
        for field, v in (("entries_log2", entries_log2), ("bitags", bitags), ("coldlist_depth", COLDLIST.entries)):
            self.regs.set_hw("GEOMETRY2", field, v)
        self.regs.set_hw("CAPS", "tracker", int(self.has_tracker))
        self.tracker = None                     # a TrackerModel while CONTROL.enable = 1
        self.counts = dict.fromkeys(COUNTER_SOURCES, 0)
        self._publish()

    @property
    def has_tracker(self) -> bool:
        return self.tracker_placement != "none"

    # external window of the register block
    def read(self, name, word):
        if name == COLDLIST.name:
            return (self.coldlist[word // 2] >> (32 * (word % 2))) & 0xFFFFFFFF, True
        return self.formats.read(name, word)

    def write(self, name, data, strb):
        return self.formats.write(name, data, strb)

    # the host's view
    def read32(self, addr: int) -> tuple[int, int]:
        return self.regs.read(addr)

    def write32(self, addr: int, value: int) -> int:
        resp = self.regs.write(addr, value)
        for key in self.regs.pulses:
            if key == ("CONTROL", "counters_clear"):
                self.counts = dict.fromkeys(COUNTER_SOURCES, 0)
        self.regs.pulses.clear()
        enabled = bool(self.regs.get("CONTROL", "enable")) and self.has_tracker
        if not enabled:
            self.tracker = None                 # held cleared while disabled
        elif self.tracker is None:
            self.tracker = T.TrackerModel(self._config(), self.n_queues, self.n_positions,
                                          self.statics.n_buckets)
        self._publish()
        return resp

    def _config(self) -> T.TrackerConfig:
        from cxlkv.models import scoring as S
        rate = S.decay_rate(self.regs.get("TAU", "value"))
        st = self.statics
        return T.TrackerConfig(
            budget=min(self.regs.get("QUEUE_BUDGET", "entries"), self.n_positions),
            pinned=min(self.regs.get("PINS", "first_n"), self.n_positions),
            alpha=self.regs.get("ALPHA", "value"), rate_mant=rate.mant, rate_shift=rate.shift,
            tln_r=st.tln_r, tln_d=st.tln_d, bucket_bits=st.hw_bucket_bits,
            write_sample=st.hw_write_sample, read_credit=st.hw_read_credit)

    def _publish(self):
        for reg, v in self.counts.items():
            self.regs.set_hw(reg, "count", v)
        self.regs.set_hw("FILLS", "count", (self.counts["READS"] - self.counts["READ_HITS"]) % (1 << 64))

    # the event port
    def events(self, records) -> list[tuple[int, int, int, int, int, int]] | None:
        """Feed (layer, head, position, write, sample, step) records; returns one decision per
        record as (hit, inserted, victim_valid, no_victim, error, victim), or None when the
        event port does not accept events (no tracker, or CONTROL.enable = 0)."""
        if self.tracker is None:
            return None
        tm = self.tracker
        tm.cfg = self._config()                 # configuration as the registers hold it now
        before = dict(tm.counters)
        out = []
        for layer, head, pos, write, sample, step in records:
            if layer >= self.n_layers or head >= self.n_kv_heads:
                out.append((0, 0, 0, 0, 1, 0))
                continue
            d = tm.event(T.Event(layer * self.n_kv_heads + head, pos, write, sample, step))
            out.append((d.hit, d.inserted, d.victim_valid, d.no_victim, 0, d.victim))
        for reg, names in COUNTER_SOURCES.items():
            self.counts[reg] += sum(tm.counters.get(n, 0) - before.get(n, 0) for n in names)
        self._publish()
        return out
