"""HDM address decode and attention-hint path: golden model (the one definition of the semantics).

RTL: :mod:`cxlkv.hdl.hdm`. Documentation: ``docs/hdm.md``.

The block sees two streams:

* **accesses**: one per 64-byte line, as the CXL IP hands M2S Req / RwD to user logic:
  ``{addr, write, tag}``. An address in the HDM window decodes, by the configured layout
  (power-of-two strides, so shifts and masks only), to (layer, KV head, position, line)::

      offset = addr - base                    (addr[5:0] ignored: line granularity)
      offset = ((((layer << head_shift) | head) << pos_shift) | position) << entry_shift | byte
      line   = byte >> 6                      (entry_bytes = 2**entry_shift, 64 .. 4096)

  Status OK: a tracker event is produced when the line is line 0 of the entry (the *line-0
  rule*: one trace event = one access that touches line 0). Outside the window (or any
  access while the configuration is refused): status OUTSIDE; in the window but a field
  beyond the configured geometry: status BEYOND. Both pass through on the route output,
  counted in ``decode_errors``; neither is an event.
* **hints**: ``{step, has_sample, layer, head, position, sample}``. A hint's step above the
  current step advances it (every pending sample hint becomes an orphan); below it, it is
  counted in ``step_errors`` and the step stays. A hint with a sample is queued (at most
  ``hint_depth`` pending; a hint arriving when they are all pending is dropped and counted in
  ``hint_drops``) and is consumed by the next *read* event of that entry in the same step
  (the oldest matching hint first). A read event without one takes ``default_sample``; a
  write event takes sample 0 and never consumes a hint.

Order: the model applies hints and accesses in the order the block accepted them; a hint
accepted in the same clock as an access is applied first. :func:`stimulus_from_trace` turns a
contract trace into a hint + access sequence that reproduces the trace's tracker events
exactly (:func:`trace_events`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cxlkv.errors import CxlkvError
from cxlkv.models import scoring as S

LINE_BYTES = 64
LINE_SHIFT = 6
ENTRY_SHIFT_MIN, ENTRY_SHIFT_MAX = 6, 12       # entry_bytes 64 B .. 4 KiB
LINE_BITS = ENTRY_SHIFT_MAX - LINE_SHIFT       # line index within an entry
ENTRY_SHIFT_BITS = 4
POS_SHIFT_BITS = 6
HEAD_SHIFT_BITS = 5
STEP_BITS = S.STEP_BITS                        # 32
STEP_MAX = (1 << STEP_BITS) - 1
SAMPLE_BITS = S.SCORE_BITS                     # 16

OK, OUTSIDE, BEYOND = 0, 1, 2
STATUS_NAMES = {OK: "ok", OUTSIDE: "outside", BEYOND: "beyond"}

#: 32-bit counters; each steps by at most one per clock in the RTL.
COUNTER_NAMES = ("accesses", "events", "decode_errors", "beyond_geometry", "hints", "bad_hints",
                 "hints_used", "default_samples", "hint_drops", "hint_orphans", "step_errors")
COUNTER_MASK = (1 << 32) - 1


class HdmError(CxlkvError, ValueError):
    """A configuration or a trace the HDM decode cannot take (the message says why)."""


def bits_for(n: int) -> int:
    """Bits to index n things (at least 1); the tracker's ``_bits``."""
    return max(1, (n - 1).bit_length())


#: the elaboration parameters' ranges (inclusive; None: no upper bound), refused outside by
#: HdmGeometry and by the RTL's constructor. ``addr_width``: at most the 64-bit window registers
#: (HDM_BASE, HDM_SIZE); 16 is the design's floor, the smallest width elaborated in the tests.
#: ``hint_depth``: the age matrix grows as its square (64: 2,016 bits).
GEOMETRY_BOUNDS = {"n_layers": (1, None), "n_kv_heads": (1, None), "n_positions": (2, None),
                   "addr_width": (16, 64), "tag_width": (1, None), "hint_depth": (1, 64)}


@dataclass(frozen=True)
class HdmGeometry:
    """Elaboration parameters (the tracker's geometry, the address width, the hint queue)."""
    n_layers: int = 4
    n_kv_heads: int = 2
    n_positions: int = 1024
    addr_width: int = 52
    tag_width: int = 16
    hint_depth: int = 8

    def __post_init__(self):
        for name, (lo, hi) in GEOMETRY_BOUNDS.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
                bound = f">= {lo}" if hi is None else f"in {lo} .. {hi}"
                raise HdmError(f"HDM geometry: {name} must be an integer {bound}, got {v!r}")
        if self.n_positions & (self.n_positions - 1):
            raise HdmError(f"HDM geometry: n_positions must be a power of two >= 2 (the tracker's), "
                           f"got {self.n_positions}")

    @property
    def lb(self):
        return bits_for(self.n_layers)

    @property
    def hb(self):
        return bits_for(self.n_kv_heads)

    @property
    def pb(self):
        return bits_for(self.n_positions)

    @property
    def qb(self):
        return bits_for(self.n_layers * self.n_kv_heads)


@dataclass(frozen=True)
class HdmConfig:
    """Run-time configuration (registers). ``size`` bytes from ``base``; see the module docstring."""
    base: int = 0
    size: int = 0
    entry_shift: int = 9
    pos_shift: int = 10
    head_shift: int = 1
    n_layers: int = 4
    n_kv_heads: int = 2
    n_positions: int = 1024
    default_sample: int = 0

    @classmethod
    def packed(cls, geom: HdmGeometry, base: int = 0, entry_bytes: int = 512, default_sample: int = 0,
               n_layers=None, n_kv_heads=None, n_positions=None):
        """The dense layout for a geometry: strides the next powers of two, size exactly the
        layers' span (e.g. Llama-70B: 80 × 8 × 131,072 × 512 B = 40 GiB)."""
        nl = geom.n_layers if n_layers is None else n_layers
        nh = geom.n_kv_heads if n_kv_heads is None else n_kv_heads
        npos = geom.n_positions if n_positions is None else n_positions
        if entry_bytes < 1 or entry_bytes & (entry_bytes - 1):
            raise HdmError(f"entry_bytes must be a power of two, got {entry_bytes}")
        es = entry_bytes.bit_length() - 1
        ps, hs = (npos - 1).bit_length(), (nh - 1).bit_length()
        return cls(base=base, size=nl << (hs + ps + es), entry_shift=es, pos_shift=ps, head_shift=hs,
                   n_layers=nl, n_kv_heads=nh, n_positions=npos, default_sample=default_sample)

    @property
    def entry_bytes(self) -> int:
        return 1 << self.entry_shift

    @property
    def lines_per_entry(self) -> int:
        return self.entry_bytes // LINE_BYTES

    def problems(self, geom: HdmGeometry) -> list[str]:
        """Why the block refuses this configuration (``cfg_error``); empty when it is taken."""
        out = []
        amask = (1 << geom.addr_width) - 1
        if not 0 <= self.base <= amask or not 0 <= self.size <= amask:
            out.append(f"base and size must fit {geom.addr_width} bits")
        if self.base % LINE_BYTES or self.size % LINE_BYTES:
            out.append("base and size must be multiples of 64 bytes")
        if not ENTRY_SHIFT_MIN <= self.entry_shift <= ENTRY_SHIFT_MAX:
            out.append(f"entry_shift must be {ENTRY_SHIFT_MIN}..{ENTRY_SHIFT_MAX} (64 B .. 4 KiB entries)")
        for name, v, mx in (("n_layers", self.n_layers, geom.n_layers),
                            ("n_kv_heads", self.n_kv_heads, geom.n_kv_heads),
                            ("n_positions", self.n_positions, geom.n_positions)):
            if not 1 <= v <= mx:
                out.append(f"{name} must be 1..{mx} (the elaborated geometry), got {v}")
        if not 0 <= self.pos_shift < (1 << POS_SHIFT_BITS) or not 0 <= self.head_shift < (1 << HEAD_SHIFT_BITS):
            out.append("pos_shift must be 0..63 and head_shift 0..31")
        else:
            if self.n_positions > (1 << self.pos_shift):
                out.append(f"n_positions {self.n_positions} exceeds the position stride 2**{self.pos_shift}")
            if self.n_kv_heads > (1 << self.head_shift):
                out.append(f"n_kv_heads {self.n_kv_heads} exceeds the head stride 2**{self.head_shift}")
        if not 0 <= self.default_sample <= S.SCORE_MAX:
            out.append("default_sample must be a UQ0.16 value")
        return out

    def address(self, layer: int, head: int, position: int, line: int = 0) -> int:
        """The byte address of a line of an entry (the inverse of the decode)."""
        lh = (layer << self.head_shift) | head
        return self.base + (((((lh << self.pos_shift) | position) << self.entry_shift)) | (line << LINE_SHIFT))


@dataclass(frozen=True)
class Access:
    addr: int
    write: int = 0
    tag: int = 0


@dataclass(frozen=True)
class Hint:
    step: int
    has_sample: int = 0
    layer: int = 0
    head: int = 0
    position: int = 0
    sample: int = 0


@dataclass(frozen=True)
class Event:
    """The tracker's event port payload."""
    layer: int
    head: int
    position: int
    write: int
    sample: int
    step: int


@dataclass(frozen=True)
class Route:
    """Per-access metadata for the data path (every access, in order)."""
    addr: int
    tag: int
    write: int
    status: int
    event: int
    hinted: int
    layer: int
    head: int
    queue: int
    position: int
    line: int


def decode(geom: HdmGeometry, cfg: HdmConfig, addr: int, cfg_error: bool | None = None):
    """(status, layer, head, position, line) of an address; the fields are 0 unless status is OK."""
    if cfg_error is None:
        cfg_error = bool(cfg.problems(geom))
    a = (addr & ((1 << geom.addr_width) - 1)) & ~(LINE_BYTES - 1)
    off = a - cfg.base
    if cfg_error or off < 0 or off >= cfg.size:
        return OUTSIDE, 0, 0, 0, 0
    line = (off >> LINE_SHIFT) & ((1 << (cfg.entry_shift - LINE_SHIFT)) - 1)
    idx = off >> cfg.entry_shift
    pos = idx & ((1 << cfg.pos_shift) - 1)
    lh = idx >> cfg.pos_shift
    head = lh & ((1 << cfg.head_shift) - 1)
    layer = lh >> cfg.head_shift
    if layer >= cfg.n_layers or head >= cfg.n_kv_heads or pos >= cfg.n_positions:
        return BEYOND, 0, 0, 0, 0
    return OK, layer, head, pos, line


@dataclass
class HdmModel:
    """Transaction-level golden model: call :meth:`hint` and :meth:`access` in acceptance order."""
    geom: HdmGeometry
    cfg: HdmConfig
    step: int = 0
    pending: list = field(default_factory=list)     # live sample hints, oldest first: (layer, head, pos, sample)
    counters: dict = field(default_factory=lambda: dict.fromkeys(COUNTER_NAMES, 0))

    def __post_init__(self):
        self.cfg_error = bool(self.cfg.problems(self.geom))

    def _count(self, name):
        self.counters[name] = (self.counters[name] + 1) & COUNTER_MASK

    def configure(self, cfg: HdmConfig):
        """New configuration (the RTL's inputs are static while traffic flows; state is kept)."""
        self.cfg = cfg
        self.cfg_error = bool(cfg.problems(self.geom))

    def hint(self, h: Hint):
        self._count("hints")
        cfg = self.cfg
        if self.cfg_error or (h.has_sample and (h.layer >= cfg.n_layers or h.head >= cfg.n_kv_heads
                                                 or h.position >= cfg.n_positions)):
            self._count("bad_hints")
            return
        if h.step > self.step:
            self.step = h.step
            for _ in self.pending:
                self._count("hint_orphans")
            self.pending = []
        elif h.step < self.step:
            self._count("step_errors")
        if h.has_sample:
            if len(self.pending) >= self.geom.hint_depth:
                self._count("hint_drops")
            else:
                self.pending.append((h.layer, h.head, h.position, h.sample))

    def access(self, a: Access):
        """One line access: its route record and the tracker event it produces (or None)."""
        g, cfg = self.geom, self.cfg
        self._count("accesses")
        status, layer, head, pos, line = decode(g, cfg, a.addr, self.cfg_error)
        ev, hinted = None, 0
        if status != OK:
            self._count("decode_errors")
            if status == BEYOND:
                self._count("beyond_geometry")
        elif line == 0:
            sample = 0
            if not a.write:
                for i, (pl, ph, pp, ps) in enumerate(self.pending):
                    if (pl, ph, pp) == (layer, head, pos):
                        del self.pending[i]
                        sample, hinted = ps, 1
                        self._count("hints_used")
                        break
                else:
                    sample = cfg.default_sample
                    self._count("default_samples")
            ev = Event(layer, head, pos, int(bool(a.write)), sample, self.step)
            self._count("events")
        route = Route(addr=a.addr & ((1 << g.addr_width) - 1), tag=a.tag, write=int(bool(a.write)),
                      status=status, event=int(ev is not None), hinted=hinted, layer=layer, head=head,
                      queue=layer * g.n_kv_heads + head,
                      position=pos, line=line)
        return route, ev

    def run(self, items):
        """Apply a ("hint", Hint) / ("access", Access) sequence; returns (routes, events)."""
        routes, events = [], []
        for kind, x in items:
            if kind == "hint":
                self.hint(x)
            else:
                r, e = self.access(x)
                routes.append(r)
                if e is not None:
                    events.append(e)
        return routes, events


# ------------------------------------------------------------------------------------------
# Trace replay: a contract trace as the host's accesses and hints
# ------------------------------------------------------------------------------------------

def trace_samples(trace):
    """``policy.score_to_uq16`` of every event's score, vectorised (the same float64 arithmetic)."""
    x = np.floor(np.asarray(trace.score, dtype=np.float32).astype(np.float64) * 65536.0 + 0.5)
    return np.minimum(x, S.SCORE_MAX).astype(np.int64)


def trace_events(trace) -> list[Event]:
    """The tracker events a trace describes, in file order (sample = policy.score_to_uq16(score))."""
    smp = trace_samples(trace)
    return [Event(int(trace.layer[i]), int(trace.head[i]), int(trace.pos[i]), int(trace.op[i] != 0),
                  int(smp[i]), int(trace.step[i])) for i in range(len(trace))]


def check_trace(trace, geom: HdmGeometry, cfg: HdmConfig):
    """Refuse (HdmError) a trace the device cannot replay exactly under this configuration."""
    probs = cfg.problems(geom)
    if probs:
        raise HdmError("configuration refused: " + "; ".join(probs))
    for key, arr, lim in (("layer", trace.layer, cfg.n_layers), ("head", trace.head, cfg.n_kv_heads),
                          ("pos", trace.pos, cfg.n_positions)):
        bad = np.flatnonzero(np.asarray(arr, dtype=np.int64) >= lim)
        if bad.size:
            i = int(bad[0])
            raise HdmError(f"trace key '{key}', event {i}: {int(arr[i])} is beyond the "
                           f"configured geometry ({key} < {lim})")
    bad = np.flatnonzero(np.asarray(trace.step, dtype=np.int64) < 0)
    if bad.size:
        i = int(bad[0])
        raise HdmError(f"trace key 'step', event {i}: negative step {int(trace.step[i])} (the device's step is unsigned)")
    bad = np.flatnonzero((np.asarray(trace.op) != 0) & (np.asarray(trace.score) != 0))
    if bad.size:
        raise HdmError(f"trace key 'score', event {int(bad[0])}: a write with a nonzero score cannot be "
                       "reproduced (write events carry sample 0; the tracker uses write_sample)")


def stimulus_from_trace(trace, geom: HdmGeometry, cfg: HdmConfig, *, lines="all", hint_every_read=False,
                        tag_base=0):
    """The host's hint and access sequence that makes the block emit exactly ``trace_events(trace)``.

    Per event, in file order: a step-only hint when the step advances and the event brings no
    hint of its own; a sample hint before a read whose sample differs from ``default_sample``
    (every read with ``hint_every_read``); then the entry's line accesses, line 0 first
    (``lines="all"``: every line of the entry; ``"first"``: line 0 only; or a list of line
    indices, which must contain 0).
    """
    check_trace(trace, geom, cfg)
    n_lines = cfg.lines_per_entry
    if lines == "all":
        order = list(range(n_lines))
    elif lines == "first":
        order = [0]
    else:
        order = list(lines)
        if 0 not in order or any(not 0 <= x < n_lines for x in order):
            raise HdmError(f"lines must include 0 and lie in 0..{n_lines - 1}, got {order}")
        order = [0] + [x for x in order if x != 0]
    items, step, tag = [], 0, tag_base
    tmask = (1 << geom.tag_width) - 1
    for ev in trace_events(trace):
        wants_hint = not ev.write and (hint_every_read or ev.sample != cfg.default_sample)
        if wants_hint:
            items.append(("hint", Hint(ev.step, 1, ev.layer, ev.head, ev.position, ev.sample)))
        elif ev.step != step:
            items.append(("hint", Hint(ev.step)))
        step = ev.step
        for ln in order:
            items.append(("access", Access(cfg.address(ev.layer, ev.head, ev.position, ln), ev.write, tag & tmask)))
            tag += 1
    return items


def replay(trace, geom: HdmGeometry, cfg: HdmConfig, **kw):
    """trace -> accesses and hints -> model -> events (equal to ``trace_events(trace)``)."""
    model = HdmModel(geom, cfg)
    routes, events = model.run(stimulus_from_trace(trace, geom, cfg, **kw))
    return events, routes, model


__all__ = ["HdmGeometry", "HdmConfig", "HdmModel", "Access", "Hint", "Event", "Route", "decode",
           "trace_events", "trace_samples", "stimulus_from_trace", "check_trace", "replay", "HdmError"]
