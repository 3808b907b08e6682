"""Golden model of the controller top (hdl/controller.py), as the host sees it.

The top holds the register block, the per-queue format table behind FMT_SEL/FMT_DATA,
the cold-list ring memory, the geometry fixed by parameters, and (for geometries whose
per-position memories fit on chip) the access tracker with its event input. The tracker
part is :class:`cxlkv.models.tracker.TrackerModel`, configured from the registers exactly
as the RTL wires them (docs/controller.md, "Configuration"):

* QUEUE_BUDGET.entries -> budget C, PINS.first_n -> pinned, ALPHA.value -> α,
  TAU.value -> τe (decay constants from ``scoring.decay_rate``, the top's divider);
* TLN_R, TLN_D, HW_BUCKET.bits, HW_SAMPLE -> the deadline constants, g, the write sample
  and the read credit (the driver derives them from ``hw_rank_tau``, ``hw_rank_tau_long``,
  ``hw_bucket_bits``, ``hw_write_sample``, ``hw_read_credit``: :func:`hw_registers`). The
  deadline ring is fixed at elaboration (``n_buckets``, read back in HW_RING): a
  configuration needing more buckets sets STATUS.ring_error (and cfg_error) and the event
  port holds events until it fits;
* CONTROL.enable = 0 holds the tracker cleared (state and memories); events are only
  accepted while it is 1; CONTROL.counters_clear zeroes the counters;
* the phase detector (:class:`cxlkv.models.phase.PhaseDetector`, cycle accurate) sees every
  event the port accepts (read or write) and PHASE_CFG, CONTROL.phase_override; its phase is
  STATUS.phase, each change counts in PHASE_CHANGES and sets IRQ_STATUS.phase_change. It is
  not cleared by CONTROL.enable. The model ticks it once per event followed by the idle clocks
  that take the event to the phase (``PH.DRAIN``): the device's idle clocks between events only
  apply an override, and an event's effect does not depend on them; once, idle, after every
  register write;
* the cold list: every eviction (a decision with a victim) is offered to the ring as the
  CHMU hot-list entry ``unit << 16 | count``, unit = (queue << entries_log2) | victim,
  count = the eviction's ordinal since reset mod 2^16 (so a gap shows drops); written at
  COLDLIST_HEAD, which advances, unless 63 entries are pending ((HEAD - TAIL) mod 64): then
  it is dropped, counted in COLDLIST_DROPS, and IRQ_STATUS.coldlist_overflow is set; a
  written entry that makes COLDLIST_THRESHOLD or more pending sets IRQ_STATUS.coldlist_fill;
* the tier mover (``tiers`` 'model' or 'external'; :class:`cxlkv.models.tiermover.TierMoverModel`,
  ``frames_per_queue`` = ``max_budget``): every decision is a command (:func:`tier_command`), in
  event order, granted at once with ``dirty_from_host`` = 0; its counters are TIER_*. While
  CONTROL.enable = 0 it is held cleared with the tracker. TIER_LAT is timing only;
* the prefetch engine (``prefetch``, with a tracker; CAPS.prefetch): with PREFETCH.window = W > 0,
  after every demand decision that is not an error the rule of :mod:`cxlkv.models.prefetch`
  (trigger on misses, or every read with PREFETCH.trigger = 1; window [P-W, P+W] without P,
  clipped to the queue's newest position, ascending) gives the candidates, each one inserted at
  once through :meth:`TrackerModel.prefetch` (a resident one is a no-op there): the order the RTL's
  exact mode (PREFETCH.exact = 1) gives the tracker. A prefetch decision's victim goes to the cold
  list; an inserting one is a tier command (write 0); none goes to the decision port. PREFETCHES and
  PREFETCH_HITS are the tracker's counters. The model does not time the engine: it gives the exact
  mode's answer whatever PREFETCH.exact, overflow_stall and rate_issues say (with exact = 0 the RTL's
  queue, drops and rate limit make it differ; PREFETCH_DROPS reads 0 here).

The model is transaction level: it answers as the RTL does once the device is quiescent.
STATUS.busy (the memory sweep, the divider) is timing and reads 0 here.
"""
from __future__ import annotations

from contextlib import contextmanager

from cxlkv.models import hdm as MH
from cxlkv.models import phase as PH
from cxlkv.models import policy as P
from cxlkv.models import quant as Q
from cxlkv.models import regmap
from cxlkv.models import scoring as S
from cxlkv.models import tiermover as TM
from cxlkv.models import tracker as T
from cxlkv.models.regs import FormatTable, RegisterFile

COLDLIST = regmap.MEMORIES[0]

#: on-chip tracker memories up to this many words per region (queues x positions)
ONCHIP_MAX_WORDS = 1 << 16
TRACKER_CHOICES = ("auto", "onchip", "external", "none")

#: counter register <- tracker counter(s) it counts (each steps by at most one per cycle)
COUNTER_SOURCES = {
    "READS": ("reads",), "READ_HITS": ("read_hits",), "WRITES": ("writes",), "EVICTIONS": ("evictions",),
    "NO_VICTIM": ("no_victim",), "VICTIM_NONE": ("victim_none",),
    "STEP_ERRORS": ("step_errors",), "BAD_EVENTS": ("bad_events",),
}

#: counter register <- tracker counter, with the prefetch engine in the top
PREFETCH_SOURCES = {"PREFETCHES": ("prefetches",), "PREFETCH_HITS": ("prefetch_hits",)}
#: counter register <- the prefetch engine's counter (the RTL's; the model's exact order drops nothing)
PREFETCH_ENGINE_COUNTERS = {"PREFETCH_DROPS": "drop_positions"}
#: the prefetch engine's elaboration parameters in the top (queue = {layer, head} bits, positions as the tracker's)
PREFETCH_PARAMS = {"depth": 4, "tags": 4, "lookups": 2}

#: counter register <- the HDM decode's counter (models/hdm.py COUNTER_NAMES)
HDM_COUNTERS = {
    "HDM_ACCESSES": "accesses", "HDM_EVENTS": "events", "DECODE_ERRORS": "decode_errors",
    "BEYOND_GEOMETRY": "beyond_geometry", "HINTS": "hints", "BAD_HINTS": "bad_hints", "HINTS_USED": "hints_used",
    "DEFAULT_SAMPLES": "default_samples", "HINT_DROPS": "hint_drops", "HINT_ORPHANS": "hint_orphans",
    "HDM_STEP_ERRORS": "step_errors",
}
#: the HDM decode's elaboration parameters in the top (besides the geometry)
HDM_PARAMS = {"addr_width": 52, "tag_width": 16, "hint_depth": 8}

#: counters the top counts itself
#: (STALL_CYCLES: cycles a request of the tracker on a memory port waited for ``ready``; the
#: on-chip TrackerMemory never makes it wait once swept, so 0 here; with 'external' memory it
#: is the memory's backpressure, which the model does not know)
OWN_COUNTERS = ("STALL_CYCLES", "PHASE_CHANGES", "COLDLIST_DROPS", "HINT_PUSH_DROPS", *HDM_COUNTERS)
#: the count field of a cold-list entry (CHMU counter_width)
COLDLIST_COUNT_BITS = 16

#: where the tier mover's DRAM and flash are: memory models in the top, ports of the top, no mover
TIER_CHOICES = ("model", "external", "none")
#: the tier memories' entry geometry in the top (small, so the harness stays fast)
TIER_DEFAULTS = {"tier_lines": 2, "tier_line_bits": 32, "tier_depth": 8}
#: lines per entry with the host data path (the HDM decode's default entry: 512 B)
HOST_DATA_LINES = 8
#: counter register <- the tier mover's counter (models/tiermover.py COUNTERS); each steps by at most one per cycle
TIER_COUNTERS = {
    "TIER_COMMANDS": "commands", "TIER_HITS": "hits", "TIER_FILLS": "fills", "TIER_WRITEBACKS": "writebacks",
    "TIER_CLEAN_DROPS": "clean_drops", "TIER_BYPASSES": "bypasses", "TIER_BAD_COMMANDS": "bad_commands",
    "TIER_LINES_TO_FLASH": "lines_to_flash", "TIER_LINES_TO_DRAM": "lines_to_dram",
}
#: TIER_PROTO_ERRORS <- the sum of these RTL counters (the model never sees a protocol error: 0)
TIER_PROTO = ("grant_unexpected", "grant_mismatch", "resp_unexpected")


def tier_placement(choice: str, tracker_placement_: str) -> str:
    """The tier mover's memories: 'model' (RAM models with TIER_LAT latencies inside the top),
    'external' (its memory ports are ports of the top) or 'none'. A top without a tracker has no
    tier mover (its commands are the tracker's decisions): 'none' then, whatever was asked."""
    if choice not in TIER_CHOICES:
        raise ValueError(f"tiers must be one of {', '.join(TIER_CHOICES)}, got {choice!r}")
    return "none" if tracker_placement_ == "none" else choice


def check_tier_geometry(tier_lines, tier_line_bits, tier_depth):
    for name, v in (("tier_lines", tier_lines), ("tier_line_bits", tier_line_bits)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if isinstance(tier_depth, bool) or not isinstance(tier_depth, int) or tier_depth < 2 or tier_depth & (tier_depth - 1):
        raise ValueError(f"tier_depth must be a power of two >= 2, got {tier_depth!r}")


def check_host_data(host_data, tiers: str) -> bool:
    """``host_data``: the host line data path (HDM routes -> tracker events and lookups -> the tier
    mover's host line operations, through the quantizer); it needs the tier mover."""
    if host_data not in (False, True):              # 0 and 1 too
        raise ValueError(f"host_data must be True or False, got {host_data!r}")
    if host_data and tiers == "none":
        raise ValueError("host_data needs the tier mover (tiers 'model' or 'external', with a tracker)")
    return bool(host_data)


#: the BI-snoop engine in the top (``bisnoop``): M2S Req/RwD accesses buffered for the data path (so
#: BIRsp and BIConflict keep flowing while it waits on a snoop); the engine's time base (cycles per
#: tick: BI_TIMEOUT.cycles is ceil(cycles / BI_TICK_CYCLES) + 1 ticks, the extra one because the
#: time base runs free, at most 2^16 - 1; 0 is never); its park depth;
#: the engine's error kinds that count as PROTO_ERRORS (all but the timeout)
BI_ACCESS_DEPTH = 16
BI_TICK_CYCLES = 16
BI_PARK_DEPTH = 2
BI_PROTO_KINDS = ("unknown_tag", "illegal_rsp", "conflict_none", "bad_addr", "bad_msg")


#: the BI-snoop engine's filter is one register (and a read mux leg) per line: built up to this many
#: lines; a larger window needs a filter in memory or an inclusive filter (docs/controller.md)
BI_MAX_LINES = 4096


def check_bisnoop(bisnoop, host_data: bool, n_layers=1, n_kv_heads=1, entries_log2=1, lines_per_entry=1) -> bool:
    """``bisnoop``: the BI-snoop engine on the CXL.mem side of the host data path."""
    if bisnoop not in (False, True):                # 0 and 1 too
        raise ValueError(f"bisnoop must be True or False, got {bisnoop!r}")
    if bisnoop and not host_data:
        raise ValueError("bisnoop needs the host data path (host_data=True)")
    lines = bisnoop_lines(n_layers, n_kv_heads, entries_log2, lines_per_entry)
    if bisnoop and lines > BI_MAX_LINES:
        raise ValueError(f"bisnoop: the snoop filter is one register per line, built up to {BI_MAX_LINES} lines; "
                         f"this geometry's window has {lines} (n_layers x n_kv_heads x 2^entries_log2 x "
                         f"{lines_per_entry}, strides rounded up to powers of two)")
    return bool(bisnoop)


def bisnoop_lines(n_layers: int, n_kv_heads: int, entries_log2: int, lines_per_entry: int) -> int:
    """Lines the snoop filter tracks: the HDM window's packed layout of the built geometry (strides the
    next powers of two), line = (address - HDM_BASE) / 64."""
    return (1 << (n_layers - 1).bit_length()) << ((n_kv_heads - 1).bit_length() + entries_log2 +
                                                  (lines_per_entry - 1).bit_length())


def tier_entry(host_data: bool, tier_lines=None, tier_line_bits=None) -> tuple:
    """The tier memories' (lines per entry, bits per line). Without the host data path the small
    TIER_DEFAULTS (the mover moves whatever the memories hold); with it a line is a quantizer record
    (``RECORD_BITS``) and an entry has HOST_DATA_LINES lines (HDM_LAYOUT's default 512 B entry)."""
    if tier_lines is None:
        tier_lines = HOST_DATA_LINES if host_data else TIER_DEFAULTS["tier_lines"]
    if tier_line_bits is None:
        tier_line_bits = Q.RECORD_BITS if host_data else TIER_DEFAULTS["tier_line_bits"]
    elif host_data and tier_line_bits != Q.RECORD_BITS:
        raise ValueError(f"with host_data a tier line is a quantizer record: tier_line_bits must be "
                         f"{Q.RECORD_BITS} (or left out), got {tier_line_bits!r}")
    return tier_lines, tier_line_bits


def tier_command(n_kv_heads: int, layer: int, head: int, position: int, write: int, error: int,
                 decision: "T.Decision | None") -> TM.Command:
    """The tier mover's command for a tracker decision (docs/tiermover.md "Integration"):
    queue = layer x n_kv_heads + head; a ``no_victim`` or ``error`` decision carries neither hit
    nor inserted (a bypass; an errored one names queue 0, slot 0, so it is not refused as out of range)."""
    if error or decision is None:
        return TM.Command(queue=0, position=position, slot=0, write=write)
    d = decision
    moves = d.hit or d.inserted
    return TM.Command(queue=layer * n_kv_heads + head, position=position, slot=d.slot if moves else 0,
                      hit=d.hit, inserted=d.inserted, victim_valid=d.victim_valid if moves else 0,
                      victim=d.victim if moves else 0, write=write)


def coldlist_entry(queue: int, position: int, count: int, entries_log2: int) -> int:
    """A cold-list entry: unit index {queue, position} in the high bits, the count in the low 16."""
    return (((queue << entries_log2) | position) << COLDLIST_COUNT_BITS) | (count & ((1 << COLDLIST_COUNT_BITS) - 1))


def decode_coldlist_entry(entry: int, entries_log2: int, n_kv_heads: int) -> dict:
    unit = entry >> COLDLIST_COUNT_BITS
    queue, position = unit >> entries_log2, unit & ((1 << entries_log2) - 1)
    return {"queue": queue, "layer": queue // n_kv_heads, "head": queue % n_kv_heads, "position": position,
            "count": entry & ((1 << COLDLIST_COUNT_BITS) - 1)}

#: the deadline ring of the default build: holds the NB of the policy's defaults (90 -> 128)
DEFAULT_N_BUCKETS = 128


def hw_registers(params: P.PolicyParams) -> dict:
    """The tracker registers for ``hw`` policy parameters: {(register, field): value}."""
    tl = P.hw_rank_tau_long(params)
    return {("TLN_R", "value"): P.hw_tau_ln2_q8(P.hw_rank_tau(params)),
            ("TLN_D", "value"): P.hw_tau_ln2_q8(tl) if tl else 0,
            ("HW_BUCKET", "bits"): params.hw_bucket_bits,
            ("HW_SAMPLE", "write_sample"): params.hw_write_sample,
            ("HW_SAMPLE", "read_credit"): params.hw_read_credit}


def buckets_needed(tln_r: int, tln_d: int, bucket_bits: int) -> int:
    """Deadline buckets a configuration needs so that live keys never alias (tracker.buckets_needed)."""
    return (T.retention(S.SCORE_MAX, max(tln_r, tln_d)) >> bucket_bits) + 2


#: positions travel as 32-bit words (the event and access records, the decision's victim)
MAX_ENTRIES_LOG2 = 32


def check_geometry(n_layers, n_kv_heads, entries_log2, bitags) -> None:
    """The elaborated geometry as GEOMETRY and GEOMETRY2 report it: each value must fit its field
    (and positions a 32-bit word), or the device would report another geometry than it has."""
    width = lambda reg, f: (1 << regmap.BY_NAME[reg].field(f).width) - 1     # noqa: E731
    for name, v, hi in (("n_layers", n_layers, width("GEOMETRY", "n_layers")),
                        ("n_kv_heads", n_kv_heads, width("GEOMETRY", "n_kv_heads")),
                        ("entries_log2", entries_log2, min(width("GEOMETRY2", "entries_log2"), MAX_ENTRIES_LOG2)),
                        ("bitags", bitags, width("GEOMETRY2", "bitags"))):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"{name} must be an integer in 1 .. {hi}, got {v!r}")


def check_n_buckets(n_buckets) -> int:
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, int) or n_buckets < 2 or \
            n_buckets & (n_buckets - 1) or n_buckets > 1 << 16:
        raise ValueError(f"n_buckets must be a power of two in 2 .. 65536, got {n_buckets!r}")
    return n_buckets


def max_slots(n_positions: int, max_budget=None) -> int:
    """The tracker's slots per queue: the largest budget it runs (tracker.Geometry's default)."""
    slots = min(n_positions, T.MAX_BUDGET_LIMIT) if max_budget is None else max_budget
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 2 or slots & (slots - 1) or \
            slots > min(n_positions, T.MAX_BUDGET_LIMIT):
        raise ValueError(f"max_budget must be a power of two in 2 .. {min(n_positions, T.MAX_BUDGET_LIMIT)}, "
                         f"got {max_budget!r}")
    return slots


def tracker_placement(choice: str, n_queues: int, n_positions: int) -> str:
    """Where the tracker's per-position memories live: 'onchip', 'external' (memory ports on
    the top) or 'none' (no tracker). 'auto' is on chip up to ONCHIP_MAX_WORDS words, else none."""
    if choice not in TRACKER_CHOICES:
        raise ValueError(f"tracker must be one of {', '.join(TRACKER_CHOICES)}, got {choice!r}")
    if choice == "auto":
        return "onchip" if n_queues * n_positions <= ONCHIP_MAX_WORDS else "none"
    return choice


class ControllerModel:
    def __init__(self, n_layers=4, n_kv_heads=2, entries_log2=10, bitags=16, tracker="auto",
                 n_buckets=DEFAULT_N_BUCKETS, max_budget=None, tiers="model", tier_lines=None,
                 tier_line_bits=None, tier_depth=TIER_DEFAULTS["tier_depth"],
                 prefetch=True, host_data=False, bisnoop=False, tracker_select="ring"):
        check_geometry(n_layers, n_kv_heads, entries_log2, bitags)
        self.n_layers, self.n_kv_heads, self.entries_log2 = n_layers, n_kv_heads, entries_log2
        self.n_queues = n_layers * n_kv_heads
        self.n_positions = 1 << entries_log2
        self.n_buckets = check_n_buckets(n_buckets)
        self.max_budget = max_slots(self.n_positions, max_budget)
        self.tracker_select = T.check_select(tracker_select, self.max_budget)
        self.tracker_placement = tracker_placement(tracker, self.n_queues, self.n_positions)
        self.tiers = tier_placement(tiers, self.tracker_placement)
        self.host_data = check_host_data(host_data, self.tiers)
        tier_lines, tier_line_bits = tier_entry(self.host_data, tier_lines, tier_line_bits)
        self.bisnoop = check_bisnoop(bisnoop, self.host_data, n_layers, n_kv_heads, entries_log2, tier_lines)
        check_tier_geometry(tier_lines, tier_line_bits, tier_depth)
        self.tier_cfg = TM.TierMoverConfig(self.n_queues, self.n_positions, self.max_budget, tier_lines,
                                           tier_line_bits) if self.tiers != "none" else None
        self.tiermover = None                   # a TierMoverModel while CONTROL.enable = 1 (with a tier mover)
        self.regs = RegisterFile()
        self.formats = FormatTable(self.n_queues, self.regs)
        self.coldlist = [0] * COLDLIST.entries
        self.cold_head = 0
        self.cold_seq = 0
        self.regs.external = self
        for field, v in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads)):
            self.regs.set_hw("GEOMETRY", field, v)
        for field, v in (("entries_log2", entries_log2), ("bitags", bitags), ("coldlist_depth", COLDLIST.entries)):
            self.regs.set_hw("GEOMETRY2", field, v)
        self.regs.set_hw("CAPS", "tracker", int(self.has_tracker))
        self.regs.set_hw("CAPS", "phase", int(self.has_tracker))
        self.phase = PH.PhaseDetector() if self.has_tracker else None
        self.regs.set_hw("CAPS", "hdm", int(self.has_tracker))
        self.regs.set_hw("CAPS", "tiermover", int(self.tiers != "none"))
        self.regs.set_hw("CAPS", "quant", int(self.host_data))
        self.regs.set_hw("CAPS", "bisnoop", int(self.bisnoop))
        if prefetch not in (False, True):             # 0 and 1 too
            raise ValueError(f"prefetch must be True or False, got {prefetch!r}")
        self.has_prefetch = bool(prefetch) and self.has_tracker
        self.regs.set_hw("CAPS", "prefetch", int(self.has_prefetch))
        self.newest = [0] * self.n_queues       # the engine's newest position per queue (cleared on enable)
        #: the tracker model's Decision of each event of the last events() / accesses() / lines()
        #: call, in order (a bench reads the slot the decision port carries from it)
        self.tracker_decisions: list[T.Decision] = []
        self.hdm_geom = MH.HdmGeometry(n_layers, n_kv_heads, self.n_positions, **HDM_PARAMS)
        self.hdm = MH.HdmModel(self.hdm_geom, self._hdm_config()) if self.has_tracker else None
        self.regs.set_hw("HW_RING", "buckets_log2", n_buckets.bit_length() - 1)
        self.regs.set_hw("HW_RING", "slots_log2", self.max_budget.bit_length() - 1)
        self.tracker = None                     # a TrackerModel while CONTROL.enable = 1
        self._host = None                       # the host line op of the access being served (lines)
        self._host_rsp = None
        self.counts = dict.fromkeys((*COUNTER_SOURCES, *OWN_COUNTERS, *TIER_COUNTERS, "TIER_PROTO_ERRORS", "QUANT_RAW_LINES",
                                     *PREFETCH_SOURCES, *PREFETCH_ENGINE_COUNTERS), 0)
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
        pushed = False
        for key in self.regs.pulses:
            if key == ("CONTROL", "counters_clear"):
                self.counts = dict.fromkeys(self.counts, 0)
            pushed |= key == ("HINT_PUSH", "push")
        self.regs.pulses.clear()
        if pushed:
            self._hint_push()
        enabled = bool(self.regs.get("CONTROL", "enable")) and self.has_tracker
        if not enabled:
            self.tracker = None                 # held cleared while disabled
            self.tiermover = None
            if self.has_tracker:
                self.hdm = MH.HdmModel(self.hdm_geom, self._hdm_config())
        elif self.tracker is None:
            self.tracker = T.TrackerModel(self._config(), self.n_queues, self.n_positions, self.n_buckets,
                                          max_budget=self.max_budget, select=self.tracker_select,
                                          n_kv_heads=self.n_kv_heads)
            self.newest = [0] * self.n_queues
            if self.tier_cfg is not None:
                self.tiermover = TM.TierMoverModel(self.tier_cfg, host_ops=self.host_data)
        self._phase_tick(0, 0)                  # idle clocks: an override write takes effect
        self._publish()
        return resp

    def _config(self) -> T.TrackerConfig:
        g = self.regs.get
        rate = S.decay_rate(g("TAU", "value"))
        return T.TrackerConfig(
            budget=min(g("QUEUE_BUDGET", "entries"), self.n_positions),
            pinned=min(g("PINS", "first_n"), self.n_positions),
            alpha=g("ALPHA", "value"), rate_mant=rate.mant, rate_shift=rate.shift,
            tln_r=g("TLN_R", "value"), tln_d=g("TLN_D", "value"), bucket_bits=g("HW_BUCKET", "bits"),
            write_sample=g("HW_SAMPLE", "write_sample"), read_credit=g("HW_SAMPLE", "read_credit"))

    def _hint_push(self):
        """HINT_PUSH.push: one hint to the HDM decode (taken at once at transaction level), or a
        counted drop while disabled or for an entry wider than the built geometry."""
        g = self.regs.get
        layer, head, pos = g("HINT_ENTRY", "layer"), g("HINT_ENTRY", "head"), g("HINT_ENTRY", "position")
        geo = self.hdm_geom
        if self.hdm is None or not g("CONTROL", "enable") or layer >> geo.lb or head >> geo.hb or pos >> geo.pb:
            self.counts["HINT_PUSH_DROPS"] += 1
            return
        before = dict(self.hdm.counters)
        self.hdm.configure(self._hdm_config())
        self.hdm.hint(MH.Hint(g("HINT_STEP", "step"), g("HINT_PUSH", "has_sample"), layer, head, pos,
                              g("HINT_PUSH", "sample")))
        for reg, name in HDM_COUNTERS.items():
            self.counts[reg] += (self.hdm.counters[name] - before[name]) % (1 << 32)

    def _hdm_config(self) -> MH.HdmConfig:
        g = self.regs.get

        def in_use(v, built):                   # 0: the built value; beyond it: refused
            return built if v == 0 else min(v, built + 1)
        return MH.HdmConfig(
            base=g("HDM_BASE_LO", "value") | g("HDM_BASE_HI", "value") << 32,
            size=g("HDM_SIZE_LO", "value") | g("HDM_SIZE_HI", "value") << 32,
            entry_shift=g("HDM_LAYOUT", "entry_shift"), pos_shift=g("HDM_LAYOUT", "pos_shift"),
            head_shift=g("HDM_LAYOUT", "head_shift"),
            n_layers=in_use(g("HDM_GEOMETRY", "n_layers"), self.n_layers),
            n_kv_heads=in_use(g("HDM_GEOMETRY", "n_kv_heads"), self.n_kv_heads),
            n_positions=in_use(g("HDM_POSITIONS", "n_positions"), self.n_positions),
            default_sample=g("HINT_DEFAULT", "sample"))

    def _phase_config(self) -> PH.PhaseConfig:
        g = self.regs.get
        return PH.PhaseConfig(ratio=g("PHASE_CFG", "ratio"), window_log2=g("PHASE_CFG", "window_log2"),
                              hysteresis=g("PHASE_CFG", "hysteresis"), override=g("CONTROL", "phase_override"))

    def _phase_tick(self, valid: int, write: int):
        if self.phase is None:
            return
        cfg = self._phase_config()
        # an event, then the idle clocks that take it to the phase (models.phase.DRAIN): the phase
        # after the event, as the quiescent device and the prefetch engine (>= 12 clocks on) see it
        for v, w in [(valid, write)] + [(0, 0)] * (PH.DRAIN if valid else 0):
            self.phase.tick(cfg, v, w)
            if self.phase.phase_change:
                self.counts["PHASE_CHANGES"] += 1
                self.regs.hw_set("IRQ_STATUS", "phase_change")

    def _cold_push(self, queue: int, position: int):
        depth = COLDLIST.entries
        pending = (self.cold_head - self.regs.get("COLDLIST_TAIL", "index")) % depth
        if pending == depth - 1:
            self.counts["COLDLIST_DROPS"] += 1
            self.regs.hw_set("IRQ_STATUS", "coldlist_overflow")
        else:
            self.coldlist[self.cold_head] = coldlist_entry(queue, position, self.cold_seq, self.entries_log2)
            self.cold_head = (self.cold_head + 1) % depth
            if pending + 1 >= self.regs.get("COLDLIST_THRESHOLD", "entries"):
                self.regs.hw_set("IRQ_STATUS", "coldlist_fill")
        self.cold_seq = (self.cold_seq + 1) % (1 << COLDLIST_COUNT_BITS)

    @property
    def ring_error(self) -> bool:
        cfg = self._config()
        return self.has_tracker and (T.buckets_needed(cfg) > self.n_buckets or cfg.budget > self.max_budget)

    def _publish(self):
        for reg, v in self.counts.items():
            self.regs.set_hw(reg, "count", v)
        self.regs.set_hw("COLDLIST_HEAD", "index", self.cold_head)
        self.regs.set_hw("FILLS", "count", (self.counts["READS"] - self.counts["READ_HITS"]) % (1 << 64))
        phase_error = self.phase is not None and PH.sanitize(self._phase_config())[1]
        self.regs.set_hw("STATUS", "ring_error", int(self.ring_error))
        self.regs.set_hw("STATUS", "cfg_error", int(self.ring_error or phase_error))
        self.regs.set_hw("STATUS", "phase", self.phase.phase if self.phase is not None else 0)
        if self.hdm is not None:
            self.regs.set_hw("STATUS", "hdm_cfg_error", int(bool(self._hdm_config().problems(self.hdm_geom))))
            self.regs.set_hw("HDM_STEP", "step", self.hdm.step)
            self.regs.set_hw("HINTS_PENDING", "count", len(self.hdm.pending))
            self.regs.set_hw("HINTS_PENDING", "depth", HDM_PARAMS["hint_depth"])

    # the event port
    def events(self, records) -> list[tuple[int, int, int, int, int, int]] | None:
        """Feed (layer, head, position, write, sample, step) records to the direct event port;
        returns one decision per record as (hit, inserted, victim_valid, no_victim, error,
        victim), or None when the port does not accept events (no tracker, CONTROL.enable = 0,
        STATUS.ring_error)."""
        if self.tracker is None or self.ring_error:
            return None
        with self._counting():
            return [self._event(*r) for r in records]

    def accesses(self, items) -> tuple[list, list] | None:
        """Feed the HDM decode, in order, ("hint", models.hdm.Hint) and ("access",
        models.hdm.Access) items; returns (routes, decisions): one route per access, one decision
        per event it made (as :meth:`events`), or None when events are not accepted."""
        if self.tracker is None or self.ring_error:
            return None
        self.hdm.configure(self._hdm_config())
        routes, decisions = [], []
        with self._counting():
            for kind, x in items:
                if kind == "hint":
                    self.hdm.hint(x)
                    continue
                route, ev = self.hdm.access(x)
                routes.append(route)
                if ev is not None:
                    decisions.append(self._event(ev.layer, ev.head, ev.position, ev.write, ev.sample, ev.step))
        return routes, decisions

    def lines(self, items) -> tuple[list, list, list] | None:
        """The host data path (``host_data``): feed the HDM decode, in order, ("hint", Hint) and
        ("access", Access, data) items, ``data`` a write's FP16 line as an int (lane i at bit 16 i;
        ignored for reads). Each access in the window is served where its entry is at its point of
        the stream: line 0 is a tracker event whose decision is the tier command, lines 1 ... are
        tracker lookups (``hit`` = resident) whose answer is a command that moves nothing; the
        command carries the access as the mover's host line operation, a write quantized into the
        queue's format (FMT table) and a read dequantized back. Returns None when events are not
        accepted, else (routes, decisions, responses): as :meth:`accesses`, and one response per
        access {tag, write, status, resident, bad, data}: ``status`` the route's; a line beyond the
        mover's entry (HDM_LAYOUT wider than ``tier_lines``) is answered ``bad`` without an operation."""
        if not self.host_data:
            raise ValueError("this controller has no host data path (host_data=False)")
        if self.tracker is None or self.ring_error:
            return None
        self.hdm.configure(self._hdm_config())
        routes, decisions, responses = [], [], []
        with self._counting():
            for item in items:
                if item[0] == "hint":
                    self.hdm.hint(item[1])
                    continue
                _, acc, data = item
                route, ev = self.hdm.access(acc)
                routes.append(route)
                rsp = dict(tag=route.tag, write=route.write, status=route.status, resident=0, bad=0, data=0)
                responses.append(rsp)
                if route.status != MH.OK:
                    continue
                if route.line >= self.tier_cfg.lines_per_entry:
                    rsp["bad"] = 1
                    continue
                wdata = None
                if route.write:
                    fmt = self.formats.formats[route.queue]
                    rec = Q.quantize_records(Q.line_bits(data or 0)[None, :], fmt)
                    self.counts["QUANT_RAW_LINES"] += int(rec.raw[0])
                    wdata = Q.record_words(rec)[0]
                self._host = (route.line, wdata)
                if ev is not None:
                    decisions.append(self._event(ev.layer, ev.head, ev.position, ev.write, ev.sample, ev.step))
                else:
                    d = self.tracker.lookup(route.queue, route.position)
                    self._tier(tier_command(self.n_kv_heads, route.layer, route.head, route.position,
                                            route.write, 0, d))
                hr = self._host_rsp
                rsp.update(resident=hr["resident"], bad=hr["bad"])
                if not route.write and not hr["bad"]:
                    out, bad = Q.dequantize_records(Q.word_records([hr["data"]]))
                    rsp.update(data=Q.bits_line(out[0]), bad=int(bad[0]))
        return routes, decisions, responses

    @contextmanager
    def _counting(self):
        tm, hdm = self.tracker, self.hdm
        tm.cfg = self._config()                 # configuration as the registers hold it now
        before, hdm_before = dict(tm.counters), dict(hdm.counters)
        self.tracker_decisions = []
        try:
            yield
        finally:
            sources = {**COUNTER_SOURCES, **(PREFETCH_SOURCES if self.has_prefetch else {})}
            for reg, names in sources.items():
                self.counts[reg] += sum(tm.counters[n] - before[n] for n in names)
            for reg, name in HDM_COUNTERS.items():
                self.counts[reg] += (hdm.counters[name] - hdm_before[name]) % (1 << 32)
            self._publish()

    def _event(self, layer, head, pos, write, sample, step):
        self._phase_tick(1, write)
        d = self.tracker.port_event(layer, head, pos, write, sample, step)
        self.tracker_decisions.append(d)
        if d.error:
            self._tier(tier_command(self.n_kv_heads, layer, head, pos, write, 1, None))
            return (0, 0, 0, 0, 1, 0)
        q = d.queue
        ev = T.Event(q, pos, write, sample, step)
        if d.victim_valid:
            self._cold_push(q, d.victim)
        self._tier(tier_command(self.n_kv_heads, layer, head, pos, write, 0, d))
        if self.has_prefetch:
            self._prefetch(layer, head, ev, d)
        return (d.hit, d.inserted, d.victim_valid, d.no_victim, 0, d.victim)

    def _prefetch(self, layer, head, ev: T.Event, d: T.Decision):
        """The engine after demand event ``ev`` decided ``d``, in exact mode's order: the rule's
        candidates inserted at once (``models.tracker.prefetch_after``); victims to the cold list,
        inserts to the tier mover (write 0)."""
        g = self.regs.get
        q = ev.queue
        self.newest[q] = newest = max(self.newest[q], ev.position)
        if g("PREFETCH", "decode_only") and self.phase.phase != PH.DECODE:
            return                              # the engine's enable: the phase after this event
        for pd in T.prefetch_after(self.tracker, ev, d, newest, g("PREFETCH", "window"), g("PREFETCH", "trigger")):
            if pd.victim_valid:
                self._cold_push(q, pd.victim)
            if pd.inserted:
                self._tier(tier_command(self.n_kv_heads, layer, head, pd.position, 0, 0, pd))

    def _tier(self, cmd: TM.Command):
        """One command to the tier mover (granted at once, dirty_from_host = 0), its counters into TIER_*."""
        if self.tiermover is None:
            return
        before = dict(self.tiermover.counters)
        host, self._host = self._host, None     # the access's host line op rides on its own command only
        if host is None:
            self.tiermover.command(cmd)
        else:
            line, wdata = host
            res = self.tiermover.command(cmd, host=1, line=line, wdata=wdata)
            self._host_rsp = res.host_rsp
        for reg, name in TIER_COUNTERS.items():
            self.counts[reg] += self.tiermover.counters[name] - before[name]
