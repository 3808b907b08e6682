"""Access tracker and eviction selector: the golden model at the RTL's transaction level.

The tracker (``cxlkv.hdl.tracker``, ``docs/tracker.md``) implements the ``hw`` policy of
``docs/policy.md`` bit for bit. This model keeps exactly the RTL's structures, so that a
divergence can be located in a structure and not only in a victim:

* per position (the *metadata* region, device DRAM, one 64-bit word): ``ema`` (16),
  ``t_last`` (32) and ``slot`` (16): the fast-tier slot the position was last inserted into.
  A position is resident iff ``slot < nres`` and ``pos[slot] == position`` (a slot is only ever
  reassigned by an insert, which rewrites the inserted position's ``slot``), so an eviction
  needs no write to the victim's metadata;
* per slot (on chip, ``max_budget`` per queue): ``pos``, the bucket ``key`` and the
  ``prev``/``next`` pointers of the doubly linked list the slot sits in; a victim's slot is
  reused by the entry that evicts it, a free slot is ``nres`` (slots are never freed);
* per queue (on chip): ``started``, ``cur_step``, ``step_reads``, ``dense`` (the step stage),
  and the key cursor ``kc``, the expired list (head, tail), the resident count ``nres``, a
  ring of ``n_buckets`` deadline buckets (head, tail) and their occupancy bitmap (the list
  stage).

**Lazy splicing.** ``hw`` moves every bucket whose key falls below the cursor onto the expired
list when the step advances. The ring here keeps such buckets in place while their ring index
cannot alias a live key: with ``NB`` the policy's bucket count and ``R`` the ring size, live
keys lie in ``[kc, kc + NB)`` and the ring holds ``L = R - NB`` further expired keys below
``kc``. Only a bucket whose key falls below ``kc - L`` is spliced onto the expired list (one
operation per non-empty bucket). The victim is the expired list's head, else the head of the
lowest non-empty ring bucket counted from ``kc - L``: the same entry as ``hw``'s, because the
buckets left in place below ``kc`` are exactly the tail of ``hw``'s expired list, in key order.

**Prefetch inserts.** ``hw`` with a prefetch window (``--param window=W``) inserts the missing
neighbours of a read at once, after the read: a *prefetch insert* of position p into queue q at
the queue's current step (``TrackerModel.prefetch``). A resident p is left exactly as it is; any
other p is inserted like a read miss (free slot, victim, or nothing evictable) with its EMA decayed
and nothing folded in. Per slot a ``pf`` bit marks an entry a prefetch brought in and no access has
touched since, for ``prefetch_hits`` and ``prefetch_evicted_unused``. ``prefetch_after`` applies
the rule of ``models/prefetch.py`` to a demand decision. The two default to different triggers:
``replay_model(..., window=W, trigger_all=1)`` equals ``policy.replay(..., "hw", window=W)``
(every read), and ``replay_model(..., window=W)`` (``trigger_all=0``, demand misses) equals
``policy.replay(..., "hw", window=W, prefetch_trigger=prefetch.TRIGGER_MISS)``.

**Lookups.** A lookup of (queue, position) answers, in order with the events, whether the
position is resident and in which slot, and changes nothing (``TrackerModel.lookup``): the way
a data path finds the frame of a line access that made no event (docs/architecture.md, "Next").

Beyond ``policy.replay`` the tracker has: a "victim for queue q" request (what the queue's
next miss would evict; ``none`` for an empty, unstarted or decode-locked queue), a step that
goes backwards (applied as the queue's current step, counted in ``step_errors``), and a
configuration check (``cfg_error``: the ring is smaller than NB, or the budget exceeds
``max_budget``).

**The ports.** The RTL's ports address a queue as (layer, head) (queue = layer x n_kv_heads +
head); ``port_event``, ``port_prefetch``, ``port_lookup`` and ``port_victim_request`` take them
so: a layer or head beyond the geometry is refused (``error``) and counted in ``bad_events``
(an event also in ``events``; a victim request in ``victim_requests`` and ``victim_none``
instead), as is a prefetch insert into a queue without an event yet.

**Two selection structures, one order.** The RTL selects victims either with the ring above
(``select="ring"``, any budget) or with a precedence matrix per queue (``select="matrix"``,
small ``max_budget``: docs/tracker.md, "Matrix selection"). Both pick the first resident entry
in ``hw``'s ``(key, tie)`` order. With ``select="matrix"`` this model keeps its ring (made at least
as large as NB, so it never aliases; ``cfg_error`` still checks the given ``n_buckets``, so the
two selections take the same configurations) and counts no ``splices``: the matrix has none.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cxlkv.errors import CxlkvError
from cxlkv.models import policy as P
from cxlkv.models import prefetch as PF
from cxlkv.models import scoring as S

KEY_BITS = 33            # (step + F) >> g, step < 2^32, F < 2^24: fits 33 bits
STEP_BITS = S.STEP_BITS
STEP_READS_BITS = 25     # saturating per-step read counter (C <= 2^24)
SLOT_BITS = 16           # the metadata word's slot field: max_budget <= 2^16
MAX_BUDGET_LIMIT = 1 << SLOT_BITS
NONE = -1                # decision: no victim needed (hit, or a free entry)
NO_VICTIM = -2           # decision: a miss with nothing evictable (bypass)
#: the RTL's victim selection structures (docs/tracker.md): the same decisions, different counters
SELECTS = ("ring", "matrix")
#: largest slots per queue of the matrix selection (its matrix is max_budget^2 bits per queue)
MATRIX_MAX_SLOTS = 64


def check_select(select: str, max_budget: int) -> str:
    """``select`` if it is a selection structure that takes ``max_budget`` slots per queue, else
    ValueError (the one check of the tracker, its model, the controller and its model)."""
    if select not in SELECTS:
        raise ValueError(f"select must be one of {SELECTS}, got {select!r}")
    if select == "matrix" and max_budget > MATRIX_MAX_SLOTS:
        raise ValueError(f"select='matrix' keeps a {max_budget} x {max_budget} bit matrix per queue: "
                         f"max_budget must be <= {MATRIX_MAX_SLOTS} (use select='ring')")
    return select


@dataclass(frozen=True)
class TrackerConfig:
    """The tracker's configuration inputs (per-configuration constants derived by software)."""
    budget: int            # C: resident entries per queue
    pinned: int = 0        # positions 0 .. pinned-1 are never victims
    alpha: int = 16384     # EMA weight UQ0.16 (0 applied as 1)
    rate_mant: int = 0     # scoring.decay_rate(τe).mant
    rate_shift: int = 0    # scoring.decay_rate(τe).shift
    tln_r: int = 0         # round(τr·ln2·256), normal mode
    tln_d: int = 0         # round(τd·ln2·256), dense mode (0: no dense mode)
    bucket_bits: int = 3   # g
    write_sample: int = 0
    read_credit: int = 0

    @classmethod
    def from_params(cls, params: P.PolicyParams, budget: int) -> "TrackerConfig":
        """The tracker inputs of ``hw`` with ``params``; the prefetch window is not one of them
        (whoever sends prefetch inserts applies it: ``prefetch_after``)."""
        _, tau_e, _ = S.sanitize_config(params.hw_alpha, params.hw_tau)
        rate = S.decay_rate(tau_e)
        tl = P.hw_rank_tau_long(params)
        return cls(budget=budget, pinned=params.hw_pinned, alpha=params.hw_alpha, rate_mant=rate.mant,
                   rate_shift=rate.shift, tln_r=P.hw_tau_ln2_q8(P.hw_rank_tau(params)),
                   tln_d=P.hw_tau_ln2_q8(tl) if tl else 0, bucket_bits=params.hw_bucket_bits,
                   write_sample=params.hw_write_sample, read_credit=params.hw_read_credit)


def retention(ema: int, tln: int) -> int:
    """F(ema) = (log2_q8(ema) · TLN) >> 16, F(0) = 0 (docs/policy.md)."""
    return 0 if ema == 0 else (P.hw_log2_q8(ema) * tln) >> 16


def buckets_needed(cfg: TrackerConfig) -> int:
    """The policy's NB for this configuration: (F(65535) of the longest τ >> g) + 2."""
    return (retention(S.SCORE_MAX, max(cfg.tln_r, cfg.tln_d)) >> cfg.bucket_bits) + 2


def ring_size(nb: int) -> int:
    """The smallest power of two >= nb."""
    return 1 << max(0, (nb - 1).bit_length())


def decayed_ema(ema: int, t_last: int, step: int, cfg: TrackerConfig) -> int:
    """decay(ema, step_age(t_last, step)) with the configuration's decay constants."""
    age = S.step_age(t_last, step)
    return (ema * (S.SCORE_ONE - S.recency_fixed(age, _Rate(cfg))) + 0x8000) >> 16


@dataclass
class Event:
    queue: int
    position: int
    write: int
    sample: int          # UQ0.16 (policy.score_to_uq16 of the float score)
    step: int


@dataclass(frozen=True)
class Decision:
    queue: int
    position: int
    hit: int
    inserted: int
    victim_valid: int
    no_victim: int
    victim: int          # position when victim_valid, else 0
    slot: int = 0        # the slot the position occupies after the event (0 for no_victim)
    prefetch: int = 0    # 1: the answer to a prefetch insert (hit is then 0; a resident position: all 0)
    error: int = 0       # 1: refused, nothing but counters changes: a layer or head beyond the
    #                      geometry (``port_*``), or a prefetch insert into a queue without an event yet
    lookup: int = 0      # 1: the answer to a lookup (hit = resident, slot = its slot; nothing changes)

    @property
    def code(self) -> int:
        """policy.replay's record_victims code: position, -1 none, -2 nothing evictable."""
        return self.victim if self.victim_valid else (NO_VICTIM if self.no_victim else NONE)


@dataclass(frozen=True)
class VictimAnswer:
    queue: int
    valid: int
    locked: int
    victim: int
    error: int = 0       # 1: a layer or head beyond the geometry (``port_victim_request``)


@dataclass
class _Queue:
    # step stage
    started: bool = False
    cur_step: int = 0
    step_reads: int = 0
    dense: bool = False
    # list stage
    kc: int = 0
    ehead: int | None = None      # slots
    etail: int | None = None
    nres: int = 0
    bitmap: int = 0
    bhead: dict = field(default_factory=dict)
    btail: dict = field(default_factory=dict)


@dataclass
class _Slot:
    pos: int = 0
    key: int = 0
    prev: int | None = None
    next: int | None = None
    pf: bool = False     # inserted by a prefetch and not accessed since


COUNTER_NAMES = ("events", "reads", "read_hits", "writes", "evictions", "no_victim", "victim_requests",
                 "victim_none", "victim_locked", "step_errors", "splices", "prefetches", "prefetch_hits",
                 "prefetch_evicted_unused", "lookups", "bad_events")
#: ``Decision.queue`` of a request refused for its layer or head
NO_QUEUE = -1


class TrackerModel:
    """The tracker's state and decisions, event by event (queues are independent)."""

    def __init__(self, cfg: TrackerConfig, n_queues: int, n_positions: int, n_buckets: int,
                 max_budget: int | None = None, select: str = "ring", n_kv_heads: int = 1):
        if n_buckets & (n_buckets - 1):
            raise ValueError("n_buckets must be a power of two")
        if n_kv_heads < 1 or n_queues % n_kv_heads:
            raise ValueError(f"n_queues ({n_queues}) must be a multiple of n_kv_heads ({n_kv_heads})")
        # the ports address a queue as (layer, head): queue = layer x n_kv_heads + head
        self.n_layers, self.n_kv_heads = n_queues // n_kv_heads, n_kv_heads
        self.cfg = cfg
        self.max_budget = min(max_budget or n_positions, MAX_BUDGET_LIMIT)
        self.select = check_select(select, self.max_budget)
        self.nb = buckets_needed(cfg)
        self.cfg_error = self.nb > n_buckets or cfg.budget > self.max_budget
        if select == "matrix":
            # no ring in the RTL: the model's ring only has to be exact (never alias)
            n_buckets = max(n_buckets, ring_size(self.nb))
        self.n_queues, self.n_positions, self.n_buckets = n_queues, n_positions, n_buckets
        self.lazy = n_buckets - self.nb           # L: expired keys the ring holds below kc
        self.meta: dict = {}                      # (q, p) -> (ema, t_last, slot)
        self.slots: dict = {}                     # (q, slot) -> _Slot
        self.queues = [_Queue() for _ in range(n_queues)]
        self.counters = dict.fromkeys(COUNTER_NAMES, 0)

    # -- helpers --------------------------------------------------------------------------------
    def _slot(self, q, s) -> _Slot:
        return self.slots.setdefault((q, s), _Slot())

    def _base(self, qs: _Queue) -> int:
        """Lowest key the ring may hold: kc - L."""
        return qs.kc - self.lazy

    def _ffs(self, qs: _Queue) -> int | None:
        """Key of the lowest non-empty ring bucket (keys lie in [kc - L, kc - L + R)), or None."""
        bitmap, nbr = qs.bitmap, self.n_buckets
        if not bitmap:
            return None
        base = self._base(qs)
        b0 = base % nbr
        high = bitmap >> b0
        if high:
            off = (high & -high).bit_length() - 1
        else:
            low = bitmap & ((1 << b0) - 1)
            off = (low & -low).bit_length() - 1 + nbr - b0
        return base + off

    def resident_slot(self, q, p) -> int | None:
        """The slot ``p`` occupies, or None: the metadata's slot, checked against the slot's owner."""
        s = self.meta.get((q, p), (0, 0, 0))[2]
        qs = self.queues[q]
        return s if s < qs.nres and self._slot(q, s).pos == p else None

    def key_of(self, q, p) -> int | None:
        """The bucket key of resident position ``p`` (None when not resident)."""
        s = self.resident_slot(q, p)
        return None if s is None else self._slot(q, s).key

    def _pop_head(self, q, qs: _Queue, bucket: int | None) -> int:
        """Remove and return the head slot of the expired list (bucket None) or of a ring bucket."""
        if bucket is None:
            v = qs.ehead
            nxt = self._slot(q, v).next
            qs.ehead = nxt
            if nxt is None:
                qs.etail = None
            else:
                self._slot(q, nxt).prev = None
        else:
            v = qs.bhead[bucket]
            nxt = self._slot(q, v).next
            qs.bhead[bucket] = nxt
            if nxt is None:
                qs.btail[bucket] = None
                qs.bitmap &= ~(1 << bucket)
            else:
                self._slot(q, nxt).prev = None
        return v

    def _advance(self, q, qs: _Queue, kn: int):
        """Move the cursor to kn: splice the ring buckets that fall below kn - L, in key order."""
        nbr = self.n_buckets
        while kn > qs.kc:
            d = self._ffs(qs)
            if d is None or d >= kn - self.lazy:
                break
            b = d % nbr
            h, t = qs.bhead[b], qs.btail[b]
            if qs.etail is None:
                qs.ehead = h
            else:
                self._slot(q, qs.etail).next = h
                self._slot(q, h).prev = qs.etail
            qs.etail = t
            qs.bitmap &= ~(1 << b)
            if self.select == "ring":
                self.counters["splices"] += 1
        qs.kc = max(qs.kc, kn)

    # -- the ports: (layer, head) addresses -------------------------------------------------------
    def queue(self, layer: int, head: int) -> int | None:
        """The queue of (layer, head), or None when either is beyond the geometry."""
        if 0 <= layer < self.n_layers and 0 <= head < self.n_kv_heads:
            return layer * self.n_kv_heads + head
        return None

    def _refused(self, p: int, **kind) -> Decision:
        self.counters["bad_events"] += 1
        return Decision(NO_QUEUE, p, 0, 0, 0, 0, 0, 0, error=1, **kind)

    def port_event(self, layer: int, head: int, position: int, write: int, sample: int, step: int) -> Decision:
        """An event as the event port takes it: beyond the geometry it is refused (``error``),
        counted in ``events`` and ``bad_events``, and changes nothing else."""
        q = self.queue(layer, head)
        if q is None:
            self.counters["events"] += 1
            return self._refused(position)
        return self.event(Event(q, position, write, sample, step))

    def port_prefetch(self, layer: int, head: int, position: int) -> Decision:
        """A prefetch insert as its port takes it (refused beyond the geometry: ``bad_events``)."""
        q = self.queue(layer, head)
        return self._refused(position, prefetch=1) if q is None else self.prefetch(q, position)

    def port_lookup(self, layer: int, head: int, position: int) -> Decision:
        """A lookup as its port takes it (refused beyond the geometry: ``bad_events``, not
        ``lookups``)."""
        q = self.queue(layer, head)
        return self._refused(position, lookup=1) if q is None else self.lookup(q, position)

    def port_victim_request(self, layer: int, head: int, decode_lock: int = 0) -> VictimAnswer:
        """A "victim for (layer, head)" request; ``decode_lock`` has a bit per queue. Beyond the
        geometry the answer is none with ``error`` (``victim_requests``, ``victim_none``)."""
        q = self.queue(layer, head)
        if q is None:
            self.counters["victim_requests"] += 1
            self.counters["victim_none"] += 1
            return VictimAnswer(NO_QUEUE, 0, 0, 0, error=1)
        return self.victim_request(q, locked=bool(decode_lock >> q & 1))

    # -- one event ------------------------------------------------------------------------------
    def event(self, ev: Event) -> Decision:
        cfg, nbr = self.cfg, self.n_buckets
        q, p, s = ev.queue, ev.position, ev.step
        qs = self.queues[q]
        c = self.counters
        c["events"] += 1
        is_read = not ev.write
        g = cfg.bucket_bits
        # 1. step boundary (the step stage)
        first = not qs.started
        if first:
            qs.started, qs.cur_step, qs.step_reads, qs.dense = True, s, 0, False
        if s < qs.cur_step:
            c["step_errors"] += 1
            s = qs.cur_step
        if s != qs.cur_step:
            qs.dense = cfg.tln_d != 0 and qs.step_reads > cfg.budget
            qs.step_reads = 0
            qs.cur_step = s
        if is_read:
            c["reads"] += 1
            qs.step_reads = min(qs.step_reads + 1, (1 << STEP_READS_BITS) - 1)
        else:
            c["writes"] += 1
        # 2. metadata (ema, t_last) and 3. key
        ema0, t0, slot0 = self.meta.get((q, p), (0, 0, 0))
        smp = min(ev.sample + cfg.read_credit, S.SCORE_MAX) if is_read else cfg.write_sample
        ema = S.ema_update(decayed_ema(ema0, t0, s, cfg), smp, max(cfg.alpha, 1))
        key = (s + retention(ema, cfg.tln_d if qs.dense else cfg.tln_r)) >> g
        # 4. the list stage: cursor, residency, victim, insert
        if first:
            qs.kc, qs.ehead, qs.etail, qs.nres, qs.bitmap = s >> g, None, None, 0, 0
        self._advance(q, qs, s >> g)
        slot = self.resident_slot(q, p)
        if slot is not None:
            node = self._slot(q, slot)
            if is_read:
                c["read_hits"] += 1
                if node.pf:
                    c["prefetch_hits"] += 1
            node.pf = False
        return self._place(q, qs, p, s, ema, key, slot0, slot, prefetch=False)

    def prefetch(self, q: int, p: int) -> Decision:
        """``hw``'s prefetch insert of position ``p`` into queue ``q`` at the queue's current step:
        a resident ``p`` is left as it is (an all-zero decision but ``prefetch`` and ``slot``); any
        other is inserted like a read miss, its EMA decayed with nothing folded in. A queue without
        an event yet has no step: the insert is refused (``error``, ``bad_events``), nothing else
        changes."""
        cfg, qs, c = self.cfg, self.queues[q], self.counters
        if not qs.started:
            c["bad_events"] += 1
            return Decision(q, p, 0, 0, 0, 0, 0, 0, prefetch=1, error=1)
        slot = self.resident_slot(q, p)
        if slot is not None:
            return Decision(q, p, 0, 0, 0, 0, 0, slot, prefetch=1)
        c["prefetches"] += 1
        s = qs.cur_step
        ema0, t0, slot0 = self.meta.get((q, p), (0, 0, 0))
        ema = decayed_ema(ema0, t0, s, cfg)
        key = (s + retention(ema, cfg.tln_d if qs.dense else cfg.tln_r)) >> cfg.bucket_bits
        self._advance(q, qs, s >> cfg.bucket_bits)         # the cursor is there already: no splice
        return self._place(q, qs, p, s, ema, key, slot0, None, prefetch=True)

    def lookup(self, q: int, p: int) -> Decision:
        """Is ``p`` resident in queue ``q``, and in which slot: ``hit`` and ``slot`` of the answer
        (0 and 0 when not; also for a queue without an event yet). Nothing changes."""
        self.counters["lookups"] += 1
        slot = self.resident_slot(q, p) if self.queues[q].started else None
        return Decision(q, p, int(slot is not None), 0, 0, 0, 0, slot or 0, lookup=1)

    def _place(self, q, qs: _Queue, p, s, ema, key, slot0, slot, *, prefetch) -> Decision:
        """The list stage after the residency check: move a resident ``slot`` (a hit) or insert
        ``p`` (free slot, victim, or nothing evictable); write the metadata word."""
        cfg, nbr, c = self.cfg, self.n_buckets, self.counters
        pinned = p < cfg.pinned
        hit = inserted = victim_valid = 0
        victim = 0
        if slot is not None:
            hit = 1
            if not pinned:
                self._unlink(q, qs, slot)
        else:
            if qs.nres < min(cfg.budget, self.max_budget):     # beyond max_budget (cfg_error): as max_budget
                slot = qs.nres
                qs.nres += 1
            else:
                if qs.ehead is not None:
                    slot = self._pop_head(q, qs, None)
                else:
                    d = self._ffs(qs)
                    slot = None if d is None else self._pop_head(q, qs, d % nbr)
                if slot is None:
                    c["no_victim"] += 1
                    self.meta[(q, p)] = (ema, s, slot0)
                    return Decision(q, p, 0, 0, 0, 1, 0, 0, prefetch=int(prefetch))
                c["evictions"] += 1
                vnode = self._slot(q, slot)
                victim_valid, victim = 1, vnode.pos
                if vnode.pf:
                    c["prefetch_evicted_unused"] += 1
            inserted = 1
            self._slot(q, slot).pf = prefetch
        self.meta[(q, p)] = (ema, s, slot)
        node = self._slot(q, slot)
        node.pos, node.key = p, key
        if pinned:
            node.prev = node.next = None
        else:
            b = key % nbr
            if qs.dense:          # push front
                h = qs.bhead.get(b) if qs.bitmap >> b & 1 else None
                node.prev, node.next = None, h
                if h is None:
                    qs.btail[b] = slot
                else:
                    self._slot(q, h).prev = slot
                qs.bhead[b] = slot
            else:                 # append at the tail
                t = qs.btail.get(b) if qs.bitmap >> b & 1 else None
                node.prev, node.next = t, None
                if t is None:
                    qs.bhead[b] = slot
                else:
                    self._slot(q, t).next = slot
                qs.btail[b] = slot
            qs.bitmap |= 1 << b
        return Decision(q, p, hit, inserted, victim_valid, 0, victim, slot, prefetch=int(prefetch))

    def _unlink(self, q, qs: _Queue, s: int):
        node = self._slot(q, s)
        a, b2 = node.prev, node.next
        if node.key < self._base(qs):       # spliced: on the expired list
            if a is None:
                qs.ehead = b2
            else:
                self._slot(q, a).next = b2
            if b2 is None:
                qs.etail = a
            else:
                self._slot(q, b2).prev = a
        else:
            bk = node.key % self.n_buckets
            if a is None:
                qs.bhead[bk] = b2
            else:
                self._slot(q, a).next = b2
            if b2 is None:
                qs.btail[bk] = a
            else:
                self._slot(q, b2).prev = a
            if qs.bhead[bk] is None:
                qs.bitmap &= ~(1 << bk)

    # -- victim request -------------------------------------------------------------------------
    def victim_request(self, q: int, locked: bool = False) -> VictimAnswer:
        c = self.counters
        c["victim_requests"] += 1
        qs = self.queues[q]
        if locked:
            c["victim_none"] += 1
            c["victim_locked"] += 1
            return VictimAnswer(q, 0, 1, 0)
        if qs.started and qs.ehead is not None:
            return VictimAnswer(q, 1, 0, self._slot(q, qs.ehead).pos)
        d = self._ffs(qs) if qs.started else None
        if d is None:
            c["victim_none"] += 1
            return VictimAnswer(q, 0, 0, 0)
        return VictimAnswer(q, 1, 0, self._slot(q, qs.bhead[d % self.n_buckets]).pos)


class _Rate:
    """A DecayRate-like view of the configuration's (mant, shift)."""

    def __init__(self, cfg: TrackerConfig):
        self.mant = cfg.rate_mant
        self.shift = cfg.rate_shift


def events_from_trace(trace) -> list[Event]:
    """The tracker's input events of a trace, in file order (sample = policy.score_to_uq16)."""
    import numpy as np
    x = np.floor(trace.score.astype(np.float64) * 65536.0 + 0.5)
    smp = np.minimum(x, S.SCORE_MAX).astype(np.int64)
    q = trace.layer.astype(np.int64) * trace.n_kv_heads + trace.head
    return [Event(int(q[i]), int(trace.pos[i]), int(trace.op[i] != 0), int(smp[i]), int(trace.step[i]))
            for i in range(len(trace))]


def prefetch_after(model: TrackerModel, ev: Event, d: Decision, newest: int, window: int,
                   trigger_all: int) -> list[Decision]:
    """The prefetch inserts the rule of ``models/prefetch.py`` makes after demand event ``ev``
    decided ``d`` (``newest``: the queue's largest position so far, this event's included),
    applied to ``model`` in the rule's order; their decisions."""
    out = []
    if PF.triggers(not ev.write, d.hit, trigger_all, window):
        lo, hi = PF.window_bounds(ev.position, window, newest)
        pp = PF.first_candidate(lo, ev.position)
        while pp <= hi:
            out.append(model.prefetch(ev.queue, pp))
            pp = PF.next_candidate(pp, ev.position)
    return out


def replay_model(trace, cfg: TrackerConfig, n_buckets: int | None = None, window: int = 0,
                 trigger_all: int = 0) -> list[Decision]:
    """Every event of ``trace`` through a fresh model (with ``window`` > 0, each followed by the
    prefetch inserts of the rule): the demand events' decisions. n_buckets defaults to the ring
    the config needs; the model needs positions up to the last prefetch candidate."""
    nbr = n_buckets or ring_size(buckets_needed(cfg))
    n_pos = int(trace.pos.max()) + 1 + window if len(trace) else 1
    m = TrackerModel(cfg, trace.n_queues, n_pos, nbr)
    newest = [-1] * trace.n_queues
    out = []
    for e in events_from_trace(trace):
        d = m.event(e)
        out.append(d)
        newest[e.queue] = max(newest[e.queue], e.position)
        prefetch_after(m, e, d, newest[e.queue], window, trigger_all)
    return out
