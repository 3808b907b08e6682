"""Golden model of the RoPE-aware prefetch engine (``hdl/prefetch.py``, ``docs/prefetch.md``).

Two layers, one definition:

* the **rule** (:func:`triggers`, :func:`window_bounds`, :func:`candidates`): which
  read starts a prefetch and which positions it asks for. The policy simulator
  (``models/policy.py``) compiles these very functions with numba, so the
  simulator's ``ema+prefetch`` and ``hw`` prefetch and the RTL share them;
* the **engine** (:class:`PrefetchEngine`): the cycle-accurate model of the RTL
  (bounded request queue, round-robin service, residency lookup, in-flight
  deduplication, rate limit, fetch tags, completions to tracker inserts). The
  simulator is the engine's ideal limit: unbounded queue, no rate limit, zero
  fetch latency, residency always current.

The rule. On an access of position ``P`` of a queue whose newest position so far
(this access included) is ``N``:

* a prefetch is *triggered* by a read (never a write), when the window ``W`` is
  non-zero, and, with trigger ``miss``, only if the read missed;
* the candidates are the positions of ``[max(0, P - W), min(P + W, N)]`` other than
  ``P``, in ascending order; each candidate that is resident (or already being
  fetched) is skipped, every other one is fetched and inserted like a demand fill.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cxlkv.errors import CxlkvError

TRIGGER_MISS = 0     #: prefetch on demand misses only (the register's reset value)
TRIGGER_READ = 1     #: prefetch on every read (the policy simulator's ema+prefetch and hw)

#: Widths of the configuration inputs (the PREFETCH / PREFETCH_PERIOD register fields).
WINDOW_BITS = 8
RATE_ISSUES_BITS = 8
RATE_PERIOD_BITS = 16


def pop_trigger(params: dict, error=CxlkvError) -> int:
    """The ``prefetch_trigger_all`` entry of ``params`` (``policy replay`` and ``ctl replay`` take it
    beside the policy parameters), popped: 1 (default) every read starts a window, 0 demand misses
    only; anything else raises ``error``."""
    value = params.pop("prefetch_trigger_all", TRIGGER_READ)
    if isinstance(value, bool) or value not in (TRIGGER_MISS, TRIGGER_READ):
        raise error(f"prefetch_trigger_all must be 0 (demand misses) or 1 (every read), got {value!r}")
    return value


def refuse_trigger_without_window(given: bool, window: int, subject: str, error=CxlkvError) -> None:
    """A ``prefetch_trigger_all`` given for a replay whose window is 0 would change nothing: say so
    (``policy replay`` and ``ctl replay``)."""
    if given and not window:
        raise error(f"prefetch_trigger_all: applies only with a prefetch window; {subject} runs with "
                    f"window 0 here (add --param window=W, W > 0)")


def triggers(is_read, hit, trigger_all, window) -> bool:
    """Does this access start a prefetch window? (Reads only; ``miss`` trigger: misses only.)"""
    return bool(window > 0 and is_read and (trigger_all or not hit))


def window_bounds(pos, window, newest):
    """``(lo, hi)``: the window of a read of ``pos``, clipped to ``[0, max(newest, pos)]``."""
    lo = pos - window if pos > window else 0
    top = newest if newest > pos else pos
    hi = pos + window if pos + window < top else top
    return lo, hi


def candidates(pos, window, newest) -> list[int]:
    """The positions a read of ``pos`` asks for, in the order they are considered."""
    lo, hi = window_bounds(pos, window, newest)
    return [p for p in range(lo, hi + 1) if p != pos]


def first_candidate(lo, pos):
    """The first candidate of a window starting at ``lo``: ``lo``, or ``lo + 1`` if that is ``pos``."""
    return lo + 1 if lo == pos else lo


def next_candidate(cur, pos):
    """The candidate after ``cur`` (the read position itself is skipped)."""
    nxt = cur + 1
    return nxt + 1 if nxt == pos else nxt


# ---------------------------------------------------------------------------------------------
# The cycle-accurate engine

@dataclass
class PrefetchConfig:
    """The engine's configuration inputs (sampled every cycle, like the RTL's)."""
    window: int = 0             #: W, 0..255 (0: off)
    trigger_all: int = 0        #: 0: demand misses, 1: every read
    overflow_stall: int = 0     #: 0: drop the oldest request, 1: stall the access input
    rate_issues: int = 0        #: at most this many fetches per period (0: unlimited)
    rate_period: int = 64       #: period in cycles (0 acts as 1)
    enable: int = 1             #: 0: no new requests (prefill phase); queued work still drains


@dataclass
class Inputs:
    """Everything the engine samples in one cycle."""
    acc_valid: int = 0
    acc_queue: int = 0
    acc_pos: int = 0
    acc_write: int = 0
    acc_hit: int = 0
    chk_ready: int = 0          #: the lookup port takes the request
    rsp_valid: int = 0          #: an answer of the lookup port (in request order)
    rsp_resident: int = 0
    fetch_ready: int = 0
    cpl_valid: int = 0
    cpl_tag: int = 0
    ins_ready: int = 0
    clear: int = 0              #: restart the sweep that zeroes the newest-position table


@dataclass
class Outputs:
    acc_ready: int
    chk_valid: int
    chk_queue: int
    chk_pos: int
    rsp_ready: int
    fetch_valid: int
    fetch_queue: int
    fetch_pos: int
    fetch_tag: int
    cpl_ready: int
    ins_valid: int
    ins_queue: int
    ins_pos: int


COUNTERS = ("requests", "drops", "drop_positions", "lookups", "skip_resident", "skip_inflight",
            "prefetches", "inserts", "bad_completions", "bad_responses", "stall_cycles")


@dataclass
class _Slot:
    queue: int
    pos: int        #: the read position (skipped)
    cur: int        #: next candidate to look up
    hi: int         #: last position of the window


@dataclass
class PrefetchEngine:
    """Cycle-accurate model of ``hdl.prefetch.PrefetchEngine``.

    Call :meth:`outputs` with the cycle's inputs (what the RTL drives this
    cycle), then :meth:`tick` with the same inputs (the clock edge).
    """
    n_queues: int = 16
    pos_width: int = 16
    depth: int = 4               #: window requests the queue holds
    tags: int = 4                #: fetches in flight
    lookups: int = 4             #: lookups awaiting their answer
    counter_width: int = 32
    newest: list = field(default=None)
    slots: list = field(default_factory=list)
    rr: int = 0
    c0: tuple | None = None      #: (queue, pos) offered on the lookup port
    lq: list = field(default_factory=list)   #: (queue, pos) looked up, answers pending, oldest first
    s2: tuple | None = None      #: (queue, pos) to fetch, waiting for a token, a tag or the mover
    inflight: list = field(default=None)
    clear_idx: int = 0           #: the table sweep after reset: acc held off until n_queues
    period_count: int = 0
    period_issued: int = 0
    counters: dict = field(default=None)
    held_tag: int | None = None  #: the tag of a fetch offered and not taken: kept until it is taken

    def __post_init__(self):
        if self.newest is None:
            self.newest = [0] * self.n_queues
        if self.inflight is None:
            self.inflight = [None] * self.tags
        if self.counters is None:
            self.counters = {k: 0 for k in COUNTERS}

    @property
    def idle(self) -> int:
        """The RTL's ``idle`` output: no request, no candidate, no lookup, nothing waiting to issue
        or in flight (an insert waiting on ``ins`` still holds its tag)."""
        return int(not self.slots and self.c0 is None and not self.lq and self.s2 is None
                   and all(e is None for e in self.inflight))

    # --- combinational view of one cycle ---------------------------------------------------

    def _comb(self, cfg: PrefetchConfig, i: Inputs):
        c = {}
        n = len(self.slots)
        c["acc_ready"] = int(self.clear_idx == self.n_queues and not (cfg.overflow_stall and n == self.depth))
        token = cfg.rate_issues == 0 or self.period_issued < cfg.rate_issues
        free = [t for t, e in enumerate(self.inflight) if e is None]
        c["fetch_valid"] = int(self.s2 is not None and token and bool(free))
        c["fetch_tag"] = self.held_tag if self.held_tag is not None else free[0] if free else 0
        fire = c["fetch_valid"] and i.fetch_ready
        c["fire"] = fire
        # the lookup port: C0 offered while the lookup queue has room
        c["chk_valid"] = int(self.c0 is not None and len(self.lq) < self.lookups)
        chk_fire = bool(c["chk_valid"] and i.chk_ready)
        c["chk_fire"] = chk_fire
        # the oldest pending lookup's answer: resident, or already on its way?
        head = self.lq[0] if self.lq else None
        dup_res = dup_inf = False
        if head is not None:         # (a function of the payload alone, as in the RTL)
            dup_res = bool(i.rsp_resident)
            dup_inf = not dup_res and (head in self.inflight or head == self.s2)
        s2_free = self.s2 is None or fire
        c["rsp_ready"] = int(head is None or dup_res or dup_inf or s2_free)
        rsp_fire = bool(i.rsp_valid and c["rsp_ready"])
        c["rsp_fire"] = rsp_fire
        c["dup_res"] = rsp_fire and head is not None and dup_res
        c["dup_inf"] = rsp_fire and head is not None and dup_inf
        c["moves"] = rsp_fire and head is not None and not (dup_res or dup_inf)
        c["bad_rsp"] = rsp_fire and head is None
        serve = n > 0 and (self.c0 is None or chk_fire)
        c["serve"] = serve
        if self.c0 is not None:
            c["chk"] = self.c0
        tag_entry = self.inflight[i.cpl_tag] if i.cpl_tag < self.tags else None
        c["cpl_good"] = tag_entry is not None
        c["ins_valid"] = int(bool(i.cpl_valid) and tag_entry is not None)
        c["ins"] = tag_entry if tag_entry is not None else (0, 0)
        c["cpl_ready"] = int(bool(i.ins_ready) or tag_entry is None)
        return c

    def outputs(self, cfg: PrefetchConfig, i: Inputs) -> Outputs:
        c = self._comb(cfg, i)
        chk = c.get("chk", (0, 0))
        s2 = self.s2 or (0, 0)
        return Outputs(acc_ready=c["acc_ready"], chk_valid=c["chk_valid"], chk_queue=chk[0], chk_pos=chk[1],
                       rsp_ready=c["rsp_ready"],
                       fetch_valid=c["fetch_valid"], fetch_queue=s2[0], fetch_pos=s2[1], fetch_tag=c["fetch_tag"],
                       cpl_ready=c["cpl_ready"], ins_valid=c["ins_valid"], ins_queue=c["ins"][0],
                       ins_pos=c["ins"][1])

    # --- the clock edge ----------------------------------------------------------------------

    def _count(self, name, by=1):
        self.counters[name] = (self.counters[name] + by) & ((1 << self.counter_width) - 1)

    def tick(self, cfg: PrefetchConfig, i: Inputs):
        c = self._comb(cfg, i)
        n = len(self.slots)

        # completions: free the tag, forward the insert (or count a completion of a free tag)
        if i.cpl_valid and c["cpl_ready"]:
            if c["cpl_good"]:
                self.inflight[i.cpl_tag] = None
                self._count("inserts")
            else:
                self._count("bad_completions")
        # issue stage
        if c["fire"]:
            self.inflight[c["fetch_tag"]] = self.s2
            self._count("prefetches")
        self.held_tag = c["fetch_tag"] if c["fetch_valid"] and not c["fire"] else None
        if c["dup_res"]:
            self._count("skip_resident")
        if c["dup_inf"]:
            self._count("skip_inflight")
        if c["bad_rsp"]:
            self._count("bad_responses")
        if c["moves"]:
            self.s2 = self.lq[0]
        elif c["fire"]:
            self.s2 = None
        # the lookup queue: the answered one leaves, the one just taken by the port joins
        if c["rsp_fire"] and self.lq:
            self.lq.pop(0)
        if c["chk_fire"]:
            self.lq.append(self.c0)
            self.c0 = None
        # rate-limit period
        period = max(cfg.rate_period, 1)
        if self.period_count >= period - 1:
            self.period_count = 0
            self.period_issued = 0
        else:
            self.period_count += 1
            if c["fire"]:
                self.period_issued = min(self.period_issued + 1, (1 << RATE_ISSUES_BITS) - 1)

        # lookup stage: serve slot rr
        finished = False
        rr_next = self.rr
        if c["serve"]:
            sl = self.slots[self.rr]
            self.c0 = (sl.queue, sl.cur)
            self._count("lookups")
            nxt = next_candidate(sl.cur, sl.pos)
            if nxt > sl.hi:
                finished = True
            else:
                sl.cur = nxt
                rr_next = self.rr + 1
        if finished:
            del self.slots[self.rr]
        n_after = len(self.slots)

        # the access input: newest position, trigger, enqueue (dropping the oldest if full)
        if i.acc_valid and c["acc_ready"]:
            q, p = i.acc_queue, i.acc_pos
            newest = max(self.newest[q], p)
            self.newest[q] = newest
            lo, hi = window_bounds(p, cfg.window, newest)
            if cfg.enable and triggers(not i.acc_write, i.acc_hit, cfg.trigger_all, cfg.window) and hi > lo:
                self._count("requests")
                if n_after == self.depth:
                    old = self.slots.pop(0)
                    self._count("drops")
                    self._count("drop_positions", old.hi - old.cur + 1 - (1 if old.pos >= old.cur else 0))
                    if rr_next > 0:
                        rr_next -= 1
                    n_after -= 1
                self.slots.append(_Slot(q, p, first_candidate(lo, p), hi))
        elif i.acc_valid:
            self._count("stall_cycles")
        if rr_next >= n_after:
            rr_next = 0
        self.rr = rr_next
        if self.clear_idx < self.n_queues:
            self.newest[self.clear_idx] = 0
        if i.clear:
            self.clear_idx = 0
        elif self.clear_idx < self.n_queues:
            self.clear_idx += 1
