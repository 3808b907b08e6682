"""Access tracker and eviction selector: the ``hw`` policy, bit for bit, one event per clock.

Golden model: :mod:`cxlkv.models.tracker` (equal to ``policy.replay(..., "hw")`` event for
event). Documentation: ``docs/tracker.md``.

Per event in {layer, head, position, write, sample, step}; per event out {hit, inserted,
victim, slot}. A "victim for queue q" request port answers the policy's rule in order with the
events. A prefetch insert {layer, head, position} is ``hw``'s prefetch insert at the queue's
current step, answered on the decision stream (``prefetch`` = 1). A lookup {layer, head,
position} is answered on the decision stream too (``lookup`` = 1: resident and slot; nothing
changes). The engine is a pipeline that takes one event (or victim request, prefetch insert or
lookup) per clock:

* **input register** (F): the inputs in priority order into a two-entry shifting FIFO; the CAM
  compare with the records in flight is taken as an item enters it, and an event's step state
  (per queue) is read as it enters cand and written while it is there (items enter in accept
  order; the next one takes cand's state when cand writes its queue);
* **accept** (A): the metadata read request, and the (queue, position) match among the events in
  flight: a match takes its metadata from the youngest older event instead of memory
  (forwarding; no read is issued). A prefetch insert in flight forwards only to a record of the
  same step (whether it changed anything is known only in the list stage, and at the same step
  both outcomes give the same start); a record of a later step waits at accept until it has
  retired. The decision is made from registers: the match, "forwards" and "waits" are computed
  a cycle ahead for the next item (docs/tracker.md, "The pipeline");
* **r0..r17**: one multiply, add, shift or ROM read per stage: age; age x mant in two halves, their
  sum, the shift; the exp2 ROM (block RAM), its word registered, its shift; the decay multiply;
  the rounding and sample - dec; the step multiply; the new EMA (into the in-flight buffer); log2
  (leading one, ROM); the retention multiply in two halves, their sum; step + F; the key. A
  record that forwards from an older record of its entry reads that record's new EMA from the
  in-flight buffer into r6 (used in r6 -> r7), which the source writes as it enters r11, so it
  waits before r0 while its source is in r0..r3 (``fwd_wait_cycles``); the one write it can
  meet, its source entering r11 in the cycle of the read, is bypassed into the register. With
  the matrix, r17 also reads the queue's words into registers (the list stage's own write
  bypassed), compares the key with the queue's keys, and checks residency, with the list
  stage's change of the slot (the record's slot, the queue's keys and its residency word are
  read entering r17);
* **r18, the list stage**: the victim and the update. With the ring: unlink/pop/insert with every
  pointer write of the event merged; the lowest non-empty bucket is kept in the list state (its
  successor found in parallel with the event's pointer reads); a bucket that falls below the
  ring's reach is spliced to the expired list first, one extra cycle per non-empty bucket (rare:
  the ring keeps ``R - NB`` expired buckets in place, docs/tracker.md "Lazy splicing"). With the
  matrix: the victim is the row of the queue's precedence matrix that goes before every other
  slot, and the touched slot's row and column are rewritten;
* **out**: the decision (or victim answer) and the metadata write.

Storage: per position, the 64-bit metadata word {ema 16, t_last 32, slot 16} behind a read
channel and a write channel (device DRAM at the full geometry); per slot (``max_budget`` per
queue) on chip: position, key, prev, next; per queue on chip: the step state, the list state
(cursor, expired list, resident count, bucket occupancy bitmap) and the ring's (head, tail).
"""
from amaranth import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.hdl._cells import and_or_lut4, lut4
from cxlkv.hdl._params import refusals, require_int
from cxlkv.models import policy as P
from cxlkv.models import scoring as S
from cxlkv.models import tracker as T

TLN_BITS = 28            # round(τ·ln2·256), τ <= 2^20
RATE_SHIFT_BITS = 5
AGE_BITS = S.AGE_BITS
F_BITS = 24
COUNTER_BITS = 32
META_BITS = 64
#: RTL-only counters: mem_wait_cycles (waits on the metadata channels), pf_wait_cycles (a record
#: waiting at accept behind a prefetch insert of its entry in flight), fwd_wait_cycles (a record waiting a
#: cycle in the back end right behind the record it forwards from)
COUNTERS = T.COUNTER_NAMES + ("mem_wait_cycles", "pf_wait_cycles", "fwd_wait_cycles")
ADV_COPIES = 9           # copies of the pipeline's advance (Tracker.elaborate, adv_at)
ADV_LIST_COPIES = 3      # ... of which the list stage's: the matrix; the keys and list word; the rest
INFLIGHT = 32            # events between accept and retire (covers read latencies up to ~10)

META_LAYOUT = data.StructLayout({"ema": S.SCORE_BITS, "t_last": S.STEP_BITS, "slot": T.SLOT_BITS})

# record kinds
K_EVENT, K_ERROR, K_VREQ, K_VERR = 0, 1, 2, 3
# input sources, in the priority the input register chooses them
SRC_V, SRC_P, SRC_L, SRC_E = 0, 1, 2, 3


def _bits(n):
    """Bits to index n things (at least 1)."""
    return max(1, (n - 1).bit_length())


class Geometry:
    """Fixed parameters and the widths they imply."""

    def __init__(self, n_layers, n_kv_heads, n_positions, n_buckets, max_budget=None):
        require_int("Tracker", "n_layers", n_layers, 1)         # Tracker.__init__ silences its refusal
        require_int("Tracker", "n_kv_heads", n_kv_heads, 1)
        max_budget = min(n_positions, T.MAX_BUDGET_LIMIT) if max_budget is None else max_budget
        for name, v in (("n_positions", n_positions), ("n_buckets", n_buckets), ("max_budget", max_budget)):
            if v < 2 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two >= 2, got {v}")
        if max_budget > min(n_positions, T.MAX_BUDGET_LIMIT):
            raise ValueError(f"max_budget must be <= n_positions and <= {T.MAX_BUDGET_LIMIT}, got {max_budget}")
        self.n_layers, self.n_kv_heads = n_layers, n_kv_heads
        self.n_queues = n_layers * n_kv_heads
        self.n_positions, self.n_buckets, self.max_budget = n_positions, n_buckets, max_budget
        self.lb, self.hb = _bits(n_layers), _bits(n_kv_heads)
        self.qb = _bits(self.n_queues)
        self.pb = _bits(n_positions)
        self.bb = _bits(n_buckets)
        self.sb = _bits(max_budget)               # slot index
        self.sptr = self.sb + 1                   # {valid, slot}
        self.count = self.pb + 1                  # budget / pinned inputs: 0 .. n_positions
        self.nres = self.sb + 1                   # 0 .. max_budget
        self.step_reads = self.pb + 2             # saturating; > any budget
        self.addr = self.qb + self.pb             # metadata word address {queue, position}

    def event_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "position": self.pb,
                                  "write": 1, "sample": S.SCORE_BITS, "step": S.STEP_BITS})

    def decision_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "position": self.pb,
                                  "hit": 1, "inserted": 1, "victim_valid": 1, "no_victim": 1,
                                  "error": 1, "victim": self.pb, "slot": self.sb, "prefetch": 1, "lookup": 1})

    def pf_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "position": self.pb})

    def vreq_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb})

    def vresp_layout(self):
        return data.StructLayout({"layer": self.lb, "head": self.hb, "valid": 1, "locked": 1,
                                  "error": 1, "victim": self.pb})

    def meta_rd_layout(self):
        return data.StructLayout({"addr": self.addr})

    def meta_wr_layout(self):
        return data.StructLayout({"addr": self.addr, "wdata": META_BITS})

    def step_layout(self):
        return data.StructLayout({"started": 1, "cur_step": S.STEP_BITS, "step_reads": self.step_reads,
                                  "dense": 1})

    def list_layout(self):
        # lo_v, lo_b: the lowest non-empty ring bucket counted from the ring's base, kept up to
        # date by every event and splice (the victim's bucket without a find-first-set before it)
        return data.StructLayout({"started": 1, "kc": S.STEP_BITS, "ehead": self.sptr, "etail": self.sptr,
                                  "nres": self.nres, "bitmap": self.n_buckets, "lo_v": 1, "lo_b": self.bb})


def pack(layout, **fields):
    """A whole ``layout`` value from its fields (missing fields are 0), as one expression.

    Assigning a struct field by field under different conditions makes Amaranth emit the
    fields in separate ``always`` blocks, which Verilator was seen to evaluate with stale bits;
    one assignment of the whole value avoids that.
    """
    unknown = set(fields) - {name for name, _ in layout}
    if unknown:
        raise ValueError(f"no such fields: {sorted(unknown)}")
    parts = []
    for name, fld in layout:
        w = fld.width
        v = fields.get(name, 0)
        if isinstance(v, int):
            parts.append(Const(v, w))
        else:
            v = Value.cast(v)
            parts.append(v[:w] if len(v) >= w else Cat(v, Const(0, w - len(v))))
    return Cat(*parts)


def _or_all(values):
    """The OR of ``values`` (a one-hot choice among values zeroed when not chosen)."""
    values = list(values)
    while len(values) > 1:          # a balanced tree: the depth is log2 of the count, not the count
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def _any_and_two(bits):
    """(any bit set, two bits or more set) of ``bits``, as a balanced tree of ANDs and ORs. The
    same as ``x != 0`` and ``(x & (x - 1)) != 0``, whose subtract synthesis maps to a carry chain
    that logic optimisation does not see through (an RAM read → the chain → three LUT levels into
    vic_any_ls was 10.32 ns in a board build)."""
    if len(bits) == 1:
        return bits[0], Const(0, 1)
    half = len(bits) // 2
    a1, t1 = _any_and_two(bits[:half])
    a2, t2 = _any_and_two(bits[half:])
    return a1 | a2, t1 | t2 | (a1 & a2)


def _onehot_read(onehot, values):
    """``values[i]`` for the one bit ``i`` set in ``onehot`` (0 if none): an AND-OR, no decode."""
    return _or_all([Mux(onehot[i], value, 0) for i, value in enumerate(values)])


def times_log2_score_max(value):
    """``value`` × F(65535), the policy's log2 of the largest score in Q8 (4095), as a shift and
    a subtract: the deadline ring's NB check (here and in the controller) with no DSP and the
    add behind it (on the board a multiply was a 10.02 ns path)."""
    assert P.hw_log2_q8(S.SCORE_MAX) == (1 << 12) - 1
    return (value << 12) - value


def lowest_set(m, vec, width, name):
    """(any, index) of the lowest set bit of ``vec``: a binary tree of 2:1 choices (signals
    ``{name}_any`` and ``{name}_idx``)."""
    def rec(lo, n):
        if n == 1:
            return vec[lo], Const(0, 1)
        half = n // 2
        va, ia = rec(lo, half)
        vb, ib = rec(lo + half, n - half)
        w = _bits(n)
        return va | vb, Mux(va, ia, Const(half, w) + ib)[:w]
    anyset, idx = rec(0, width)
    a, i = Signal(name=f"{name}_any"), Signal(_bits(width), name=f"{name}_idx")
    m.d.comb += [a.eq(anyset), i.eq(idx)]
    return a, i


class Tracker(wiring.Component):
    """The per-(layer, KV head) access tracker; see the module docstring and docs/tracker.md.

    Parameters: ``n_layers``, ``n_kv_heads`` (queues = their product), ``n_positions``
    (per queue, power of two), ``n_buckets`` (deadline ring R, power of two >= the policy's
    NB), ``max_budget`` (slots per queue, power of two <= n_positions and <= 65,536; default
    the smaller), ``inflight`` (events between accept and retire; the metadata read latency it
    hides is about ``inflight - 24`` cycles), ``select`` (the victim selection structure: "ring",
    the deadline ring and per-slot lists, any budget; or "matrix", a precedence matrix per
    queue, ``max_budget`` <= models.tracker.MATRIX_MAX_SLOTS; the same decisions, docs/tracker.md).
    """

    def __init__(self, n_layers=2, n_kv_heads=2, n_positions=64, n_buckets=128, max_budget=None,
                 inflight=INFLIGHT, select="ring"):
        with refusals(self):
            self.geom = g = Geometry(n_layers, n_kv_heads, n_positions, n_buckets, max_budget)
            if inflight < 2 or inflight & (inflight - 1):
                raise ValueError(f"inflight must be a power of two >= 2, got {inflight}")
            self.inflight = inflight
            self.select = T.check_select(select, g.max_budget)
        ports = {
            "event": In(stream.Signature(g.event_layout())),
            "decision": Out(stream.Signature(g.decision_layout())),
            "victim_req": In(stream.Signature(g.vreq_layout())),
            "prefetch": In(stream.Signature(g.pf_layout())),
            "lookup": In(stream.Signature(g.pf_layout())),
            "victim_resp": Out(stream.Signature(g.vresp_layout())),
            "meta_rd": Out(stream.Signature(g.meta_rd_layout())),
            "meta_rd_data": In(stream.Signature(META_BITS)),
            "meta_wr": Out(stream.Signature(g.meta_wr_layout())),
            # configuration (static while events flow)
            "budget": In(g.count),
            "pinned": In(g.count),
            "alpha": In(S.ALPHA_BITS),
            "rate_mant": In(S.MANT_BITS),
            "rate_shift": In(RATE_SHIFT_BITS),
            "tln_r": In(TLN_BITS),
            "tln_d": In(TLN_BITS),
            "bucket_bits": In(5),
            "write_sample": In(S.SCORE_BITS),
            "read_credit": In(S.SCORE_BITS),
            "decode_lock": In(g.n_queues),
            "cfg_error": Out(1),
            "busy": Out(1),
        }
        for name in COUNTERS:
            ports[name] = Out(COUNTER_BITS)
        super().__init__(ports)

    def _mlist_layout(self):
        """Per-queue state of the matrix selection: the slots in the order (resident, not pinned),
        their pf bits and positions (one word: the victim's position is a one-hot choice)."""
        g = self.geom
        return data.StructLayout({"started": 1, "nres": g.nres, "lst": g.max_budget, "pf": g.max_budget,
                                  "pos": g.max_budget * g.pb})

    def rec_layout(self):
        g = self.geom
        tb = _bits(self.inflight)
        return data.StructLayout({
            "kind": 2, "q": g.qb, "layer": g.lb, "head": g.hb, "position": g.pb, "write": 1,
            "smp": S.SCORE_BITS, "step": S.STEP_BITS, "dense": 1,
            "fwd": 1, "fwd_tag": tb, "fwd_pf": 1, "t_fwd": S.STEP_BITS, "tag": tb, "pf": 1, "lk": 1,
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        R = g.n_buckets
        D = self.inflight
        TB = _bits(D)
        rlay = self.rec_layout()
        SLOTS = g.n_queues * g.max_budget

        cnt = {name: getattr(self, name) for name in COUNTERS}

        def bump(name, cond):
            with m.If(cond):
                m.d.sync += cnt[name].eq(cnt[name] + 1)

        def bump_late(name, cond):
            """``bump`` a cycle later, from a register: for the list stage's counters, whose
            conditions wait for the victim (the row ANDs); a 32-bit counter's enables behind
            them were 9.98 ns paths on the board at 1b2aeea. Call outside any ``If``."""
            late = Signal(name=f"{name}_late")
            m.d.sync += late.eq(cond)
            bump(name, late)

        # ---------------------------------------------------------------- configuration
        # (static while events flow: computed over three registered steps, off the event path)
        tln_max = Signal(TLN_BITS)
        nb_prod = Signal(TLN_BITS + 12)
        nb = Signal(TLN_BITS)                      # the policy's NB
        lazy = Signal(g.bb + 1)                    # L = R - NB: expired keys the ring holds below kc
        m.d.sync += [tln_max.eq(Mux(self.tln_r > self.tln_d, self.tln_r, self.tln_d)),
                     nb_prod.eq(times_log2_score_max(tln_max)),
                     nb.eq(((nb_prod >> 16) >> self.bucket_bits) + 2)]
        m.d.sync += [self.cfg_error.eq((nb > R) | (self.budget > g.max_budget)),
                     lazy.eq(Mux(nb > R, 0, R - nb))]
        dense_on = Signal()                        # dense mode can start (tln_d != 0)
        m.d.sync += dense_on.eq(self.tln_d != 0)
        # registered like the other values made from the configuration (static while events
        # flow): the compare in front of the DSP multiply into sprod was the board's critical
        # path at 9e483e3 (alpha → 3 LUT levels → MULT18X18D → sprod, 10.52 ns)
        alpha_eff = Signal(S.ALPHA_BITS)
        m.d.sync += alpha_eff.eq(Mux(self.alpha == 0, 1, self.alpha))

        # ---------------------------------------------------------------- memories
        m.submodules.step_mem = step_mem = Memory(shape=g.step_layout(), depth=g.n_queues, init=[])
        st_rd = step_mem.read_port(domain="comb")          # for the item entering the input FIFO
        st_wr = step_mem.write_port()
        SQ = g.max_budget
        m.submodules.list_mem = list_mem = Memory(
            shape=g.list_layout() if self.select == "ring" else self._mlist_layout(), depth=g.n_queues, init=[])
        ls_rd = list_mem.read_port(domain="comb")
        ls_wr = list_mem.write_port()
        if self.select == "matrix":
            ls_rd_res = list_mem.read_port(domain="comb")       # residency, two stages ahead
        if self.select == "ring":
            m.submodules.bhead = bhead = Memory(shape=g.sb, depth=g.n_queues * R, init=[])
            m.submodules.btail = btail = Memory(shape=g.sb, depth=g.n_queues * R, init=[])
            bh_rd_b, bh_rd_f = bhead.read_port(domain="comb"), bhead.read_port(domain="comb")
            bt_rd_b, bt_rd_f = btail.read_port(domain="comb"), btail.read_port(domain="comb")
            bh_wr_a, bh_wr_b = bhead.write_port(), bhead.write_port()
            bt_wr_a, bt_wr_b = btail.write_port(), btail.write_port()
            m.submodules.s_prev = s_prev = Memory(shape=g.sptr, depth=SLOTS, init=[])
            m.submodules.s_next = s_next = Memory(shape=g.sptr, depth=SLOTS, init=[])
            m.submodules.s_key = s_key = Memory(shape=T.KEY_BITS, depth=SLOTS, init=[])
            pv_rd_s = s_prev.read_port(domain="comb")
            nx_rd_s, nx_rd_v = s_next.read_port(domain="comb"), s_next.read_port(domain="comb")
            ky_rd_s = s_key.read_port(domain="comb")
            pv_wr = [s_prev.write_port() for _ in range(3)]
            nx_wr = [s_next.write_port() for _ in range(3)]
            ky_wr = s_key.write_port()
        else:
            # per queue: the precedence matrix and the slots' keys, each one word (one write port:
            # an event rewrites its queue's word), so both can be distributed RAM
            m.submodules.m_order = m_order = Memory(shape=SQ * SQ, depth=g.n_queues, init=[])
            m.submodules.m_keys = m_keys = Memory(shape=SQ * T.KEY_BITS, depth=g.n_queues, init=[])
            mx_rd, mx_wr = m_order.read_port(domain="comb"), m_order.write_port()
            mk_rd, mk_wr = m_keys.read_port(domain="comb"), m_keys.write_port()
        if self.select == "ring":
            m.submodules.s_pos = s_pos = Memory(shape=g.pb, depth=SLOTS, init=[])
            ps_rd_s, ps_rd_v = s_pos.read_port(domain="comb"), s_pos.read_port(domain="comb")
            ps_wr = s_pos.write_port()
            m.submodules.s_pf = s_pf = Memory(shape=1, depth=SLOTS, init=[])   # inserted by a prefetch, untouched since
            pf_rd_s, pf_rd_v = s_pf.read_port(domain="comb"), s_pf.read_port(domain="comb")
            pf_wr = s_pf.write_port()
        m.submodules.exp_rom = exp_rom = Memory(shape=S.SCORE_BITS + 1, depth=1 << S.EXP_INDEX_BITS,
                                                init=S.EXP2_NEG_Q16)
        e_rd = exp_rom.read_port(domain="sync")
        m.submodules.log2_rom = log2_rom = Memory(shape=8, depth=256, init=P.LOG2_FRAC_Q8)
        l_rd = log2_rom.read_port(domain="comb")

        # in-flight buffer: one entry per tag, registers (a CAM at accept, random reads later)
        f_valid = Signal(D)
        f_latest = Signal(D)                       # youngest in-flight event of its (queue, position)
        f_addr = [Signal(g.addr, name=f"f_addr{i}") for i in range(D)]
        f_step = [Signal(S.STEP_BITS, name=f"f_step{i}") for i in range(D)]
        f_ema = [Signal(S.SCORE_BITS, name=f"f_ema{i}") for i in range(D)]
        # the slot each record leaves, by tag: written once per record (in the list stage) and read
        # at one tag, so a distributed RAM (a register per entry cost 128 FFs and a 32-to-1
        # multiplexer of LUTs); its content after a reset does not matter, f_valid is cleared
        m.submodules.f_slot = f_slot = Memory(shape=g.sb, depth=D, init=[])
        f_slot_wr = f_slot.write_port()
        f_slot_rd = f_slot.read_port(domain="comb")
        # the EMA a record decays and its decay factor (for the records behind a prefetch insert)
        f_src = [Signal(S.SCORE_BITS, name=f"f_src{i}") for i in range(D)]
        f_e = [Signal(S.SCORE_BITS + 1, name=f"f_e{i}") for i in range(D)]
        f_pf = Signal(D)                           # the entry is a prefetch insert (forwards only to its own step)
        f_adv = Signal(D)                          # its queue's step has advanced since it was accepted

        def f_write(onehot, *pairs):
            """Register each (array, value) of ``pairs`` into the entry ``onehot`` names (under the
            caller's condition)."""
            for i in range(D):
                with m.If(onehot[i]):
                    m.d.sync += [arr[i].eq(value) for arr, value in pairs]

        # response FIFO (metadata words that arrived before their event reached B0)
        m.submodules.rsp_mem = rsp_mem = Memory(shape=META_BITS, depth=D, init=[])
        rsp_w, rsp_r = rsp_mem.write_port(), rsp_mem.read_port(domain="comb")
        rsp_wp, rsp_rp = Signal(TB + 1, name="rsp_wp"), Signal(TB + 1, name="rsp_rp")
        # record FIFO between accept and B0, read at one place: two entries after the head (B0's
        # head and the entry after it are registers, the latter refilled from this read as the
        # head loads; either, refilled while empty, takes the record accept wrote the cycle
        # before from a register, new_last, below)
        m.submodules.rec_mem = rec_mem = Memory(shape=rlay, depth=D, init=[])
        rec_w = rec_mem.write_port()
        rec_r2 = rec_mem.read_port(domain="comb")          # the entry two after the head
        rec_wp, rec_rp = Signal(TB + 1, name="rec_wp"), Signal(TB + 1, name="rec_rp")
        rec_rp1 = Signal(TB + 1, init=1)                    # rec_rp + 1
        rec_rp2 = Signal(TB + 1, init=2)                    # rec_rp + 2
        n_inflight = Signal(TB + 1)                # accepted, not yet retired

        # ---------------------------------------------------------------- clear after reset
        clear_q = Signal(g.qb)
        clearing = Signal(init=1)
        m.d.comb += self.busy.eq(clearing)
        with m.If(clearing):
            m.d.comb += [st_wr.en.eq(1), st_wr.addr.eq(clear_q), st_wr.data.eq(0),
                         ls_wr.en.eq(1), ls_wr.addr.eq(clear_q), ls_wr.data.eq(0)]
            m.d.sync += clear_q.eq(clear_q + 1)
            with m.If(clear_q == g.n_queues - 1):
                m.d.sync += clearing.eq(0)

        # ---------------------------------------------------------------- input register (F)
        # The four inputs are chosen in priority order (a victim request, a prefetch insert, a
        # lookup, an event) into the input register (pre), from it into a two-entry input FIFO
        # of registers (the ports' ready is "pre and the FIFO are not both full", from
        # registers), and from the FIFO's head into cand, where accept (A) takes it: nothing from
        # the ports reaches the FIFO's or cand's logic in the same cycle. As an item enters the
        # FIFO its queue's step state is read and its address is compared with the in-flight
        # addresses (the CAM), and with the record A accepts in that cycle, whose address enters
        # the CAM then; both are kept up to date while it waits in the FIFO.
        # An item waits in cand, unchanged, until A takes it, so a metadata read request never
        # changes under `valid`.
        ein, vin, pin, lin = self.event.payload, self.victim_req.payload, self.prefetch.payload, self.lookup.payload
        ilay = data.StructLayout({"src": 2, "q": g.qb, "bad": 1, "layer": g.lb, "head": g.hb,
                                  "position": g.pb, "write": 1, "sample": S.SCORE_BITS, "step": S.STEP_BITS})
        new_tag = Signal(TB)
        m.d.comb += new_tag.eq(rec_wp[:TB])
        # new_tag one-hot, a register that turns with rec_wp (with accept's take, below)
        one_new = Signal(D, init=1)
        in_ready = Signal()
        ch_v, ch_p, ch_l, ch_e = Signal(name="ch_v"), Signal(name="ch_p"), Signal(name="ch_l"), Signal(name="ch_e")
        m.d.comb += [ch_v.eq(self.victim_req.valid),
                     ch_p.eq(~self.victim_req.valid & self.prefetch.valid),
                     ch_l.eq(~self.victim_req.valid & ~self.prefetch.valid & self.lookup.valid),
                     ch_e.eq(~self.victim_req.valid & ~self.prefetch.valid & ~self.lookup.valid & self.event.valid),
                     self.victim_req.ready.eq(in_ready & ch_v), self.prefetch.ready.eq(in_ready & ch_p),
                     self.lookup.ready.eq(in_ready & ch_l), self.event.ready.eq(in_ready & ch_e)]
        i_layer, i_head, i_pos = Signal(g.lb, name="i_layer"), Signal(g.hb, name="i_head"), Signal(g.pb, name="i_pos")
        m.d.comb += [i_layer.eq(Mux(ch_v, vin.layer, Mux(ch_p, pin.layer, Mux(ch_l, lin.layer, ein.layer)))),
                     i_head.eq(Mux(ch_v, vin.head, Mux(ch_p, pin.head, Mux(ch_l, lin.head, ein.head)))),
                     i_pos.eq(Mux(ch_v, 0, Mux(ch_p, pin.position, Mux(ch_l, lin.position, ein.position))))]
        in_item = Signal(ilay)
        m.d.comb += in_item.eq(pack(ilay, src=Mux(ch_v, SRC_V, Mux(ch_p, SRC_P, Mux(ch_l, SRC_L, SRC_E))),
                                    q=(i_layer * g.n_kv_heads + i_head)[:g.qb],
                                    bad=(i_layer >= g.n_layers) | (i_head >= g.n_kv_heads),
                                    layer=i_layer, head=i_head, position=i_pos, write=ein.write,
                                    sample=ein.sample, step=ein.step))
        in_fire = Signal()
        m.d.comb += in_fire.eq((ch_v | ch_p | ch_l | ch_e) & in_ready)
        # the input register (pre): the chosen input, registered, before the FIFO; the FIFO's
        # entries are loaded from it, so the step-state read and the address compares made as an
        # item enters the FIFO start at a register
        pre = Signal(ilay)
        pre_v = Signal()
        with m.If(in_fire):
            m.d.sync += pre.eq(in_item)
        cand = Signal(ilay)
        cand_v = Signal()
        ib = [Signal(ilay, name=f"ib{i}") for i in range(2)]
        ib_n = Signal(2)
        # Accept's decision is made from registers: cand's in-flight match (match_r), whether it
        # forwards (fwd_r) or must wait behind a prefetch insert (wait_r), and room (room_r) are
        # computed a cycle ahead, for the item entering cand and for cand staying, from the
        # in-flight state as this cycle's take leaves it ("Accept" below). The address compares
        # are made a cycle earlier still, as an item enters the input FIFO (ib_eq).
        ib_eq = [Signal(D, name=f"ib_eq{i}") for i in range(2)]   # ib[i]'s address == f_addr[j]
        match_r = Signal(D)                                   # cand's youngest in-flight record
        fwd_r = Signal()                                      # match_r != 0
        wait_r = Signal()                                     # cand waits for a prefetch insert
        room_r = Signal()                                     # fewer than D - 1 in flight
        cand_bad = Signal()                                   # bad layer or head, or a prefetch before any step
        cand_st = Signal(g.step_layout())                     # cand's queue's step state
        cand_back = Signal()                                  # cand.step is below the queue's step
        cand_new = Signal()                                   # cand.step starts a new step of the queue
        cand_over = Signal()                                  # cand's queue read more than the budget this step
        take = Signal()                                       # A takes cand this cycle
        f_alloc = Signal()                                    # ... and allocates the entry at new_tag
        pre_move = Signal()                                   # pre enters the FIFO this cycle
        m.d.comb += [pre_move.eq(pre_v & (ib_n != 2)),
                     in_ready.eq(~(pre_v & (ib_n == 2)) & ~clearing)]
        m.d.sync += pre_v.eq(in_fire | (pre_v & ~pre_move))
        nxt = ib[0]                                           # the FIFO's head (a register: it shifts)
        load_c = Signal()
        m.d.comb += load_c.eq((ib_n != 0) & (~cand_v | take))
        # The step stage (per queue): an event's step state is written while it is in cand (from
        # cand's registers: the read, the compare and the increment are in different cycles).
        # Items enter cand in order and each is taken, so that is the order of accept. The state
        # is read from the RAM as an item enters the FIFO (from pre, into ib_st) and kept up to
        # date there: only cand writes the RAM, so an entry takes cand's state when cand writes
        # its queue (the RAM read as it enters likewise). The item entering cand takes cand's
        # state of that cycle instead of its entry's, so there is no loop through accept's
        # decision, and no RAM read on the path into cand. A prefetch insert or lookup takes the
        # queue's current step and mode and changes neither.
        st_left = Signal(g.step_layout())                     # the state cand's event leaves
        cand_writes = Signal()
        ib_st = [Signal(g.step_layout(), name=f"ib_st{i}") for i in range(2)]
        m.d.comb += st_rd.addr.eq(pre.q)
        st_byp = Signal()                                     # the head takes cand's state (below)
        st_nxt = data.View(g.step_layout(), Mux(st_byp, st_left, ib_st[0]))
        # the step compares are made with both states and chosen after (the bypass is not on
        # the path from the entry through the compare into accept's lookahead)
        st_ram = data.View(g.step_layout(), ib_st[0])
        # (the step cand leaves, st_left.cur_step, is its queue's step if cand steps back, else
        # cand's own: the compares are made with both and chosen by cand_back after them, so each
        # carry chain starts at flip-flops; with the choice in front, cand_back → the choice →
        # the chain → wait_r was 9.80 ns in a board build)
        nxt_back_c, nxt_new_c = Signal(name="nxt_back_c"), Signal(name="nxt_new_c")
        # (the three "later step" compares as signals of their own: accept's lookahead (wait_r,
        # below) takes them into its last LUTs)
        gt_cst, gt_cs, gt_ram = Signal(name="gt_cst"), Signal(name="gt_cs"), Signal(name="gt_ram")
        m.d.comb += [gt_cst.eq(nxt.step > cand_st.cur_step), gt_cs.eq(nxt.step > cand.step),
                     gt_ram.eq(nxt.step > st_ram.cur_step)]
        m.d.comb += [nxt_back_c.eq(Mux(cand_back, nxt.step < cand_st.cur_step, nxt.step < cand.step)),
                     nxt_new_c.eq(Mux(cand_back, gt_cst, gt_cs))]
        nxt_back, nxt_new = Signal(name="nxt_back"), Signal(name="nxt_new")
        m.d.comb += [nxt_back.eq(Mux(st_byp, nxt_back_c,
                                     st_ram.started & (nxt.step < st_ram.cur_step))),
                     nxt_new.eq(Mux(st_byp, nxt_new_c, st_ram.started & gt_ram))]
        nxt_bad = Signal()
        m.d.comb += nxt_bad.eq(nxt.bad | ((nxt.src == SRC_P) & ~st_nxt.started))
        # the budget compare of dense mode's start, made as the item enters cand (both states, as above)
        nxt_over = Signal()
        left_over = Signal()                                  # st_left.step_reads > budget (below)
        m.d.comb += nxt_over.eq(Mux(st_byp, left_over, st_ram.step_reads > self.budget))
        with m.If(load_c):
            m.d.sync += [cand_v.eq(1), cand.eq(nxt), cand_st.eq(st_nxt), cand_back.eq(nxt_back), cand_new.eq(nxt_new),
                         cand_bad.eq(nxt_bad), cand_over.eq(nxt_over)]
        with m.Elif(take):
            m.d.sync += cand_v.eq(0)
        # a shifting FIFO: ib[0] is the head, so the step-state read and everything from the head
        # start at a register (no read-pointer multiplexer)
        wr0, wr1, shift = Signal(name="wr0"), Signal(name="wr1"), Signal(name="shift")
        m.d.comb += [wr0.eq(pre_move & ((ib_n == 0) | ((ib_n == 1) & load_c))),
                     wr1.eq(pre_move & (ib_n == 1) & ~load_c),
                     shift.eq(load_c & (ib_n == 2))]
        with m.If(wr0):
            m.d.sync += ib[0].eq(pre)
        with m.Elif(shift):
            m.d.sync += ib[0].eq(ib[1])
        with m.If(wr1):
            m.d.sync += ib[1].eq(pre)
        # The entering item's (pre) and the waiting items' (ib[0], ib[1]) equalities with cand,
        # of the address and of the queue, are registers kept up to date as the four move (each
        # next value from a compare of registers, or of the chosen input, chosen by the moves):
        # the compares are off the paths into the FIFO's address compares (eq_in, eq_hold), the
        # step state's snoop and bypass, and accept's lookahead (same_addr, q_steps). The
        # compares against cand were in front of ib_eq (9.60 ns, the board build of d4a6d9a).
        def cand_eqs(field, name):
            f_in, f_pre, f_ib0, f_ib1, f_cand = field(in_item), field(pre), field(ib[0]), field(ib[1]), field(cand)
            e_pre, e_ib0, e_ib1 = (Signal(name=f"{name}_{n}", init=1) for n in ("pre", "ib0", "ib1"))
            e_p0, e_10 = f_pre == f_ib0, f_ib1 == f_ib0        # (cand' is ib[0] when cand is loaded)
            m.d.sync += [e_pre.eq(Mux(in_fire, Mux(load_c, f_in == f_ib0, f_in == f_cand), Mux(load_c, e_p0, e_pre))),
                         e_ib0.eq(Mux(wr0, Mux(load_c, e_p0, e_pre), Mux(shift, e_10, load_c | e_ib0))),
                         e_ib1.eq(Mux(wr1, e_pre, Mux(load_c, e_10, e_ib1)))]
            return e_pre, e_ib0, e_ib1
        a_pre, a_ib0, a_ib1 = cand_eqs(lambda it: Cat(it.position, it.q), "cand_addr_eq")
        q_pre, q_ib0, q_ib1 = cand_eqs(lambda it: it.q, "cand_q_eq")
        m.d.comb += st_byp.eq(cand_writes & q_ib0)
        # an entering item's address against the in-flight addresses. The entry at new_tag (free)
        # takes cand's address every cycle, taken or not (f_addr, below), so its bit is the
        # compare with cand's, also for the items waiting: accept's decision is not in it
        in_addr = Cat(pre.position, pre.q)
        eq_in = Cat(*[Mux(one_new[i], a_pre, f_addr[i] == in_addr) for i in range(D)])
        eq_hold = [Cat(*[Mux(one_new[i], a_ib, ib_eq[k][i]) for i in range(D)])
                   for k, a_ib in enumerate((a_ib0, a_ib1))]
        m.d.sync += [ib_eq[0].eq(Mux(wr0, eq_in, Mux(shift, eq_hold[1], eq_hold[0]))),
                     ib_eq[1].eq(Mux(wr1, eq_in, eq_hold[1]))]
        m.d.sync += ib_n.eq(ib_n + pre_move - load_c)
        # the entries' step states: the RAM's as an item enters, cand's write of the cycle taken
        def st_snoop(same_q, st_old):
            return Mux(cand_writes & same_q, st_left, st_old)
        st_in = st_snoop(q_pre, st_rd.data)
        m.d.sync += [ib_st[0].eq(Mux(wr0, st_in, Mux(shift, st_snoop(q_ib1, ib_st[1]), st_snoop(q_ib0, ib_st[0])))),
                     ib_st[1].eq(Mux(wr1, st_in, st_snoop(q_ib1, ib_st[1])))]

        # ---------------------------------------------------------------- accept (A)
        retire = Signal()
        retire_tag = Signal(TB)
        room = Signal()
        m.d.comb += room.eq(room_r)                           # (low while clearing: below)
        take_v = Signal()
        take_e = Signal()
        take_p = Signal()
        take_l = Signal()
        sel_v, sel_p, sel_l, sel_e = (cand.src == SRC_V), (cand.src == SRC_P), (cand.src == SRC_L), (cand.src == SRC_E)
        ev_q = Signal(g.qb)
        ev_bad = Signal()
        st = data.View(g.step_layout(), cand_st)
        # a prefetch insert into a queue without a step yet is refused like a bad layer (cand_bad)
        m.d.comb += [ev_q.eq(cand.q), ev_bad.eq(cand_bad)]
        # (a lookup into a queue without a step is fine: nothing is resident there)
        ev_addr = Cat(cand.position, ev_q)
        match = match_r
        # at most one bit of match is set (one youngest record per entry): OR-encoded
        fwd_any = Signal()
        fwd_tag = Signal(TB)
        fwd_pf = Signal()                                     # ... and it is a prefetch insert
        m.d.comb += [fwd_any.eq(fwd_r), fwd_pf.eq((match & f_pf) != 0),
                     fwd_tag.eq(Cat(*[Cat(*[match[i] for i in range(D) if i >> b & 1]).any() for b in range(TB)]))]
        # A prefetch insert in flight is a forwarding source only for a record of the same step
        # (a lookup only needs the slot, which both outcomes leave right: it never waits):
        # whether it changed the entry is known only in the list stage, but at the same step both
        # outcomes leave the same EMA (the insert's decayed EMA is what the record would decay the
        # old one to: decay over 0 steps is the identity), t_last (the step) and slot (the insert's
        # slot_after) for the record to start from. At another step they differ: the record waits
        # until the insert has retired.
        t_fwd = Signal(S.STEP_BITS)                           # the matched record's step
        m.d.comb += t_fwd.eq(_onehot_read(match, f_step))
        wait_pf = wait_r
        need_read = Signal()
        m.d.comb += need_read.eq(~sel_v & ~ev_bad & ~fwd_any)
        go = Signal()                                         # cand may be taken this cycle
        m.d.comb += go.eq(room & cand_v & ~wait_pf)
        m.d.comb += [
            take_v.eq(go & sel_v),
            take_p.eq(go & sel_p & (~need_read | self.meta_rd.ready)),
            take_l.eq(go & sel_l & (~need_read | self.meta_rd.ready)),
            take_e.eq(go & sel_e & (~need_read | self.meta_rd.ready)),
            take.eq(take_v | take_p | take_l | take_e),
            f_alloc.eq((take_e | take_p) & ~ev_bad),
            self.meta_rd.valid.eq(go & need_read),
            self.meta_rd.payload.addr.eq(ev_addr),
        ]
        bump("pf_wait_cycles", room & cand_v & wait_pf)
        bump("mem_wait_cycles", self.meta_rd.valid & ~self.meta_rd.ready)

        new = Signal(rlay)
        # The record FIFO's slot at new_tag is written every cycle, taken or not: it is free (the
        # FIFO holds fewer than D records, room bounds those in flight), and a take only moves
        # rec_wp past it. Accept's decision then reaches no write enable of the FIFO's RAM (some
        # 120 pins on the board, on the take's failing paths at 564e3d1).
        m.d.comb += [rec_w.addr.eq(new_tag), rec_w.data.eq(new), rec_w.en.eq(1)]
        # the record written this cycle, for B0's head if the head is empty next cycle (below)
        new_last = Signal(rlay)
        m.d.sync += new_last.eq(new)

        # the event's step and mode, and the step state it leaves (written while it is in cand)
        s_in = cand.step
        backwards = cand_back
        s_use = Mux(backwards, st.cur_step, s_in)
        new_step = cand_new
        dense = Mux(~st.started, 0, Mux(new_step, dense_on & cand_over, st.dense))
        sat = (1 << g.step_reads) - 1
        # the count's increment is made on cand's count (a register) and chosen after: an
        # increment of the chosen count (0 at a new step) was the board's critical path at
        # addea14 (cand_new → the choice → the carry chain → ib_st0, 10.02 ns). At a new step the
        # count starts from 0, which is below saturation (step_reads has at least one bit).
        reads_inc = Signal(g.step_reads)
        m.d.comb += reads_inc.eq(st.step_reads + 1)
        # the two cases of the count cand leaves, shared by the count and its budget compare
        # below: it restarts from 0 (a new step, or the queue's first), or it stays (a write, or
        # saturated) instead of counting this read
        reads_restart = new_step | ~st.started
        reads_stay = cand.write | (st.step_reads == sat)
        n_reads = Mux(reads_restart, Mux(cand.write, 0, 1), Mux(reads_stay, st.step_reads, reads_inc))
        m.d.comb += [cand_writes.eq(cand_v & sel_e & ~cand.bad),
                     st_left.eq(pack(g.step_layout(), started=Const(1, 1), cur_step=s_use, dense=dense,
                                     step_reads=n_reads))]
        # the budget compare of the count cand leaves, made on cand's count, not after its
        # increment: the add and the compare in series were the board's critical path at b5cf50b
        # (cand_st → the count's increment → the compare → cand_over, 10.71 ns). count + 1 >
        # budget is count >= budget (the count is below saturation when it is incremented)
        m.d.comb += left_over.eq(Mux(reads_restart, ~cand.write & (self.budget == 0),
                                     Mux(reads_stay, st.step_reads > self.budget, st.step_reads >= self.budget)))
        with m.If(cand_writes):
            m.d.comb += [st_wr.en.eq(1), st_wr.addr.eq(cand.q), st_wr.data.eq(st_left)]
        smp_sum = Signal(S.SCORE_BITS + 1)
        m.d.comb += smp_sum.eq(cand.sample + self.read_credit)
        # (one_new, not new_tag's decode: the decode was in front of accept's lookahead, wait_r,
        # the tracker's critical path once the record FIFO's read was not)
        with m.If(take):
            m.d.sync += one_new.eq(one_new.rotate_left(1))

        smp_ev = Mux(cand.write, self.write_sample, Mux(smp_sum > S.SCORE_MAX, S.SCORE_MAX, smp_sum))
        rec_v = pack(rlay, kind=Mux(cand.bad, K_VERR, K_VREQ), q=cand.q, layer=cand.layer, head=cand.head,
                     tag=new_tag)
        rec_e = pack(rlay, kind=Mux(ev_bad, K_ERROR, K_EVENT), q=ev_q, layer=cand.layer, head=cand.head,
                     position=cand.position, write=cand.write, smp=smp_ev, step=s_use, dense=dense,
                     fwd=fwd_any, fwd_tag=fwd_tag, fwd_pf=fwd_pf, t_fwd=t_fwd, tag=new_tag)
        rec_p = pack(rlay, kind=Mux(ev_bad, K_ERROR, K_EVENT), q=ev_q, layer=cand.layer, head=cand.head,
                     position=cand.position, step=st.cur_step, dense=st.dense,
                     fwd=fwd_any, fwd_tag=fwd_tag, fwd_pf=fwd_pf, t_fwd=t_fwd, tag=new_tag, pf=Const(1, 1))
        rec_l = pack(rlay, kind=Mux(ev_bad, K_ERROR, K_EVENT), q=ev_q, layer=cand.layer, head=cand.head,
                     position=cand.position, step=st.cur_step, fwd=fwd_any, fwd_tag=fwd_tag, t_fwd=t_fwd,
                     tag=new_tag, lk=Const(1, 1))
        # chosen by cand's source (a register), not by which take fired (late): the record
        # FIFO's write data does not wait for accept's decision, only its enable does
        m.d.comb += new.eq(Mux(sel_v, rec_v, Mux(sel_p, rec_p, Mux(sel_l, rec_l, rec_e))))
        # (a cycle late, from registers: accept's decision → the 32-bit counters' enables was a
        # 9.2 ns path to some 40 flip-flops on the board)
        bump_late("victim_requests", take_v)
        bump_late("events", take_e)
        bump_late("lookups", take_l & ~ev_bad)
        bump_late("bad_events", (take_e | take_p | take_l) & ev_bad)
        bump_late("reads", take_e & ~ev_bad & ~cand.write)
        bump_late("writes", take_e & ~ev_bad & cand.write)
        bump_late("step_errors", take_e & ~ev_bad & backwards)
        # The entry at new_tag is free (fewer than D - 1 in flight, and they retire in order), and
        # nothing reads a free entry (f_valid masks it), so its address, step, prefetch mark and
        # youngest mark are written every cycle, as if cand were taken: only the allocation
        # (f_valid) and the matched entry's youngest mark wait for the take. The take then reaches
        # neither these registers nor the CAM bits of the entry (eq_in, eq_hold, above).
        f_write(one_new, (f_addr, ev_addr), (f_step, Mux(sel_p, st.cur_step, s_use)))
        # the new record becomes its entry's youngest; the matched one no longer is
        m.d.sync += [f_latest.eq((f_latest & ~Mux(f_alloc, match, 0)) | one_new),
                     f_pf.eq((f_pf & ~one_new) | Mux(sel_p, one_new, 0))]
        # f_adv: an event that starts a new step of its queue marks the records of that queue in
        # flight (a new record starts unmarked)
        same_q = Cat(*[f_addr[i][g.pb:] == ev_q for i in range(D)])
        adv_mark = Mux(take_e & ~ev_bad & new_step, same_q, 0)
        m.d.sync += f_adv.eq((f_adv | adv_mark) & ~one_new)
        # in-flight bits: set on accept of an entry with a metadata word, cleared on retire
        set_v = Signal(D)
        clr_v = Signal(D)
        m.d.comb += [set_v.eq(Mux(f_alloc, one_new, 0)),
                     clr_v.eq(Mux(retire, Const(1, D) << retire_tag, 0))]
        m.d.sync += f_valid.eq((f_valid & ~clr_v) | set_v)
        with m.If(take_v | take_e | take_p | take_l):
            m.d.sync += rec_wp.eq(rec_wp + 1)
        # (take and retire come late: they choose between counts and compares made from the
        # register alone, with no adder or comparator behind them)
        n_up, n_down = Signal(TB + 1, name="n_up"), Signal(TB + 1, name="n_down")
        m.d.comb += [n_up.eq(n_inflight + 1), n_down.eq(n_inflight - 1)]
        grows, shrinks = Signal(name="grows"), Signal(name="shrinks")
        m.d.comb += [grows.eq(take & ~retire), shrinks.eq(retire & ~take)]
        m.d.sync += n_inflight.eq(Mux(grows, n_up, Mux(shrinks, n_down, n_inflight)))

        # Accept's registers for the next cycle (declared with cand, above). The next cand is the
        # FIFO's head when cand is reloaded, otherwise cand itself. For the head both outcomes of
        # this cycle are computed, an entry allocated (A) or not (N), and the take picks one:
        # the take only steers the last multiplexer. This cycle's retire is not seen until the
        # next cycle: a wait lasts a cycle longer, and a record may forward from a source that
        # has just retired, whose in-flight entry still holds what it wrote to memory (its tag is
        # not reused while D - 1 bound the records in flight).
        nxt_eq = Signal(D)
        m.d.comb += nxt_eq.eq(ib_eq[0])
        same_addr = Signal()                                  # the head's address is cand's
        m.d.comb += same_addr.eq(a_ib0)
        nxt_pe = (nxt.src == SRC_P) | (nxt.src == SRC_E)
        every = Const((1 << D) - 1, D)
        m_n, m_a = Signal(D, name="m_n"), Signal(D, name="m_a")
        # With an entry allocated, the head's youngest match is the new entry when the head has
        # cand's address, else the same as without one (m_n): the new entry is free (room keeps
        # fewer than D - 1 in flight, so its tag's last record has retired) and cand's match
        # (match_r: entries at cand's address) has no entry at another address. So the head's
        # wait needs two reductions over m_n alone, the same in both outcomes: some match is a
        # prefetch insert (pf_any), one whose queue has stepped since (pf_adv). The outcomes'
        # per-entry terms (one_new, match_r, each entry's queue against cand's) were the board
        # top's critical path at 63db7ea (f_valid → 8 LUT levels → wait_r, 10.83 ns).
        m.d.comb += [m_n.eq(nxt_eq & f_valid & f_latest), m_a.eq(Mux(same_addr, one_new, m_n))]
        # (the head's own terms, from its step-state read and compare, enter last)
        pf_any, pf_adv = Signal(name="pf_any"), Signal(name="pf_adv")
        m.d.comb += [pf_any.eq((m_n & f_pf).any()), pf_adv.eq((m_n & f_pf & f_adv).any())]
        # cand's event starts a new step of the head's queue: every match of the head (in that
        # queue) is then marked as stepped
        q_steps = sel_e & cand_new & q_ib0
        m_stay = Signal(D)
        m.d.comb += m_stay.eq(match_r & f_valid)
        w_stay = (sel_p | sel_e) & ~ev_bad & ((m_stay & f_pf & Mux(sel_e & cand_new, every, f_adv)) != 0)

        def wait_next(starts):
            """wait_r's next value; ``starts``: the head is an event that starts a new step of
            its queue (an event whose step is above the queue's, nxt_new)."""
            w_n = nxt_pe & ~nxt_bad & (pf_adv | (starts & pf_any))
            # at cand's address the head's match is cand's new record: a prefetch insert (sel_p)
            # at the queue's step, which the head waits behind only if the head starts a new step
            w_a = nxt_pe & ~nxt_bad & Mux(same_addr, starts & sel_p, pf_adv | ((starts | q_steps) & pf_any))
            return Mux(load_c, Mux(f_alloc, w_a, w_n), w_stay)
        # The head's step compare (nxt_new, a 32-bit carry chain) comes last, into two LUTs
        # (the bypassed state's compares, the RAM state's) and a third that chooses between
        # wait_r's two next values made without it. With the compare in front of the wait's
        # terms, ib0 → the chain → 4 LUT levels → wait_r was 9.33 ns, the worst path of the
        # board build of b6c0a0b.
        is_e_nxt = nxt.src == SRC_E
        wait_if_new, wait_if_old = Signal(name="wait_if_new"), Signal(name="wait_if_old")
        m.d.comb += [wait_if_new.eq(wait_next(is_e_nxt)), wait_if_old.eq(wait_next(Const(0, 1)))]
        new_byp = lut4(m, platform, lambda a, b, back, byp: byp and (a if back else b),
                       (gt_cst, gt_cs, cand_back, st_byp), name="wait_new_byp")
        new_ram = lut4(m, platform, lambda c, started, byp: c and started and not byp,
                       (gt_ram, st_ram.started, st_byp), name="wait_new_ram")
        m.d.sync += wait_r.eq(lut4(m, platform, lambda a, b, w1, w0: w1 if (a or b) else w0,
                                   (new_byp, new_ram, wait_if_new, wait_if_old), name="wait_r_next"))
        with m.If(load_c):
            with m.If(f_alloc):
                m.d.sync += [match_r.eq(m_a), fwd_r.eq(same_addr | (m_n != 0))]
            with m.Else():
                m.d.sync += [match_r.eq(m_n), fwd_r.eq(m_n != 0)]
        with m.Else():
            m.d.sync += [match_r.eq(m_stay), fwd_r.eq(m_stay != 0)]
        # room after this cycle: fewer than D - 1 in flight (n_inflight + take - retire < D - 1)
        # (and not clearing after this cycle: ~clearing & room_r in front of accept's take was a
        # LUT level on the path into the input FIFO's enables, 9.28 ns in a board build)
        clearing_next = Signal()
        m.d.comb += clearing_next.eq(clearing & (clear_q != g.n_queues - 1))
        m.d.sync += room_r.eq(~clearing_next & Mux(grows, n_inflight < D - 2,
                                                   Mux(shrinks, n_inflight < D, n_inflight < D - 1)))

        # metadata words into the response FIFO (room is guaranteed by the in-flight limit)
        m.d.comb += [self.meta_rd_data.ready.eq(1), rsp_w.addr.eq(rsp_wp[:TB]),
                     rsp_w.data.eq(self.meta_rd_data.payload), rsp_w.en.eq(self.meta_rd_data.valid)]
        with m.If(self.meta_rd_data.valid):
            m.d.sync += rsp_wp.eq(rsp_wp + 1)

        # ---------------------------------------------------------------- back end
        NS = 19
        LS = NS - 1                     # the list stage
        SRC_R = 7                       # the forwarded EMA, read from the in-flight buffer into r6, enters r7
        EMA_W = 11                      # the new EMA enters r11, and the in-flight buffer then
        adv = Signal()
        adv6 = Signal()
        splice = Signal()
        v = Signal(NS)
        r = [Signal(rlay, name=f"r{i}") for i in range(NS)]
        v_out = Signal()
        r_out = Signal(rlay)
        res_slot = Signal(g.sb)                 # the slot the output record's position holds after it
        m.d.comb += adv.eq(adv6 & ~splice)
        # The stage registers' enables, some 4,000 pins: as adv (from sk_v, below) one net, whose
        # routes across the part led 469 failing endpoints in a board build (k1, docs/fpga-timing-log.md). One copy per
        # group of stages (adv_at), each a flip-flop that follows ~sk_v, its next value a cell of
        # its own (_cells.lut4) so that synthesis merges neither the copies nor their enables.
        # adv itself stays for the logic that reads it.
        adv_c = [Signal(init=1, name=f"adv_c{k}") for k in range(ADV_COPIES)]

        def adv_at(stage, part=0):
            """The enable of registers that move with the record entering r[stage]: a copy per
            three stages in front of the list stage, ADV_LIST_COPIES for the list stage (``part``)."""
            front = ADV_COPIES - ADV_LIST_COPIES
            return adv_c[front + part if stage >= LS else stage * front // LS] & ~splice

        # B0 load: the record FIFO's head, and its metadata word if it needs one. The head and
        # the entry after it are registers (head_q, nxt1_q), so B0's decision (needs a word, waits
        # behind its source) and the wait of the record that loads next start at flip-flops: the
        # FIFO's RAM is read at one place, two entries after the head (rec_rp2, a register), into
        # nxt1_q alone. An entry written the cycle before (new_last, below) is taken from its
        # register: accept writes at most one entry a cycle, so an empty head, or an empty
        # register after it, takes it the next cycle. Invariants, with wp' the write pointer of
        # the cycle before: head_v = rec_rp < wp', nxt1_v = rec_rp + 1 < wp'. A record reaches
        # the head the cycle after it is written (one cycle of latency).
        m.d.comb += [rec_r2.addr.eq(rec_rp2[:TB]), rsp_r.addr.eq(rsp_rp[:TB])]
        head_q = Signal(rlay)
        head_v = Signal()
        head_rec = data.View(rlay, head_q)
        nxt1_q = Signal(rlay)
        nxt1_v = Signal()
        rec_avail = head_v
        needs_rsp = (head_rec.kind == K_EVENT) & ~head_rec.fwd
        rsp_avail = rsp_wp != rsp_rp
        # A record that forwards from an older record of its entry reads that record's new EMA
        # from the in-flight buffer as it enters r[SRC_R - 1]; the source writes it as it enters
        # r[EMA_W]. So the record waits here while its source is fewer than EMA_W - SRC_R stages
        # ahead: the source is then at least in r[EMA_W - 1] at the read, whose write in that
        # cycle is the only one bypassed (into a register), and every stage holds one multiply,
        # add or shift. A record behind a prefetch insert takes the insert's decay inputs instead
        # (r6, below) and lookups use only the slot (the list stage's): neither waits. Traces
        # hardly have such pairs (docs/tracker.md, "The pipeline"); counted in fwd_wait_cycles.
        #
        # The wait is known a cycle ahead, registered (behind): the compare of the head's source
        # tag with the first stages' tags, in front of load, was the board's critical path
        # (11.80 ns at b8b49b4). Next cycle's head is the entry after it when it loads (nxt1_q,
        # or the record accept wrote the cycle before when nxt1_q is empty), itself when it does
        # not, or that record (refill) when it is empty; the stages hold, or move by one with the
        # head (load) or a bubble entering r0. Each case compares with the tags the stages will
        # hold, so behind is exactly the compare made on next cycle's registers. Every case starts
        # at registers: the FIFO's read (rec_rp1 → the distributed RAM → the tag compares →
        # behind) was 9.46 ns in the board build of 61bd4cd.
        def waits_on(rec, stages):
            """``rec`` waits behind one of ``stages`` ((valid, tag) of the first stages)"""
            return rec.fwd & ~rec.lk & ~rec.fwd_pf & _or_all([vj & (tj == rec.fwd_tag) for vj, tj in stages])
        W = EMA_W - SRC_R
        # the first stages next cycle without a new r0: r[0..W-2] as they are, and r[W-1] unless
        # the stages move (then it leaves the window and a bubble or the head enters r0)
        stages_next = [(v[j], r[j].tag) for j in range(W - 1)] + [(v[W - 1] & ~adv, r[W - 1].tag)]
        refill = data.View(rlay, new_last)
        after_head = data.View(rlay, Mux(nxt1_v, nxt1_q, new_last))    # the head after a load
        behind = Signal()
        load = Signal()
        m.d.comb += load.eq(adv & rec_avail & (~needs_rsp | rsp_avail) & ~behind)
        with m.If(load):
            m.d.sync += behind.eq(waits_on(after_head, [(Const(1, 1), head_rec.tag)] + stages_next[:-1]))
        with m.Elif(head_v):
            m.d.sync += behind.eq(waits_on(head_rec, stages_next))
        with m.Else():
            m.d.sync += behind.eq(waits_on(refill, stages_next))
        bump("mem_wait_cycles", adv & rec_avail & needs_rsp & ~rsp_avail)
        bump("fwd_wait_cycles", adv & rec_avail & behind)
        with m.If(load):
            m.d.sync += [rec_rp.eq(rec_rp1), rec_rp1.eq(rec_rp2), rec_rp2.eq(rec_rp2 + 1),
                         head_q.eq(after_head), head_v.eq(nxt1_v | (rec_rp1 != rec_wp))]
            with m.If(nxt1_v):
                # the entry two after the head, from the RAM (written at least a cycle before)
                m.d.sync += [nxt1_q.eq(rec_r2.data), nxt1_v.eq(rec_rp2 != rec_wp)]
            with m.Else():
                # the FIFO held the head alone a cycle before: nothing is two after it now
                m.d.sync += nxt1_v.eq(0)
            with m.If(needs_rsp):
                m.d.sync += rsp_rp.eq(rsp_rp + 1)
        with m.Elif(~head_v):
            m.d.sync += [head_q.eq(refill), head_v.eq(rec_rp != rec_wp), nxt1_v.eq(0)]
        with m.Elif(~nxt1_v):
            m.d.sync += [nxt1_q.eq(new_last), nxt1_v.eq(rec_rp1 != rec_wp)]

        # Stage registers r[0..18] move together (adv); r[18] is the list stage; r_out is the
        # output stage (adv6). One multiply, add, shift or ROM read per stage (as in the scoring
        # pipeline). What each register holds beside its record:
        #   r0: the metadata word        r1: age = sat(step - t_last)   r2: age x mant, two halves
        #   r3: age x mant               r4: y = age x mant >> shift    r5: exp2 ROM word (block RAM)
        #   r6: the ROM word, registered r7: e = 2^-y, the old EMA      r8: old EMA x e
        #   r9: dec = decayed EMA, sample - dec                         r10: (sample - dec) x alpha
        #   r11: the new EMA             r12: its log2 ROM address      r13: log2 of the new EMA
        #   r14: log2 x tln, two halves  r15: F = log2 x tln            r16: step + F
        #   r17: key                     r18: the list stage            r_out: decision / metadata word
        def carry(name, shape, first, last):
            """Signals of ``shape`` that carry a value along with the record from r[first] to r[last]."""
            return {i: Signal(shape, name=f"{name}{i}") for i in range(first, last + 1)}

        meta0 = Signal(META_LAYOUT)
        slot_m = carry("slot_m", g.sb, 0, LS)                  # the memory's slot
        ema_m = carry("ema_m", S.SCORE_BITS, 0, SRC_R - 1)     # the memory's EMA
        ema_n = carry("ema_n", S.SCORE_BITS, EMA_W, LS)        # the new EMA
        with m.If(adv_at(0)):
            m.d.sync += [r[0].eq(head_rec), meta0.eq(rsp_r.data)]
        for i in range(NS):
            with m.If(adv_at(i)):
                m.d.sync += v[i].eq(load if i == 0 else v[i - 1])
                if i:
                    m.d.sync += r[i].eq(r[i - 1])
                for c in (slot_m, ema_m, ema_n):
                    if i in c and i - 1 in c:
                        m.d.sync += c[i].eq(c[i - 1])
        mw = data.View(META_LAYOUT, meta0)
        m.d.comb += [slot_m[0].eq(mw.slot), ema_m[0].eq(mw.ema)]

        # r0 -> r1: the age (t_last, or the forwarding source's step)
        age_raw = Signal(S.STEP_BITS)
        age = Signal(AGE_BITS)
        m.d.comb += age_raw.eq(r[0].step - Mux(r[0].fwd, r[0].t_fwd, mw.t_last))
        # r1 -> r2 -> r3 -> r4: y = age x mant >> shift (two 12 x 18 halves, their sum, the shift)
        half = AGE_BITS // 2
        am_lo, am_hi = Signal(half + S.MANT_BITS, name="am_lo"), Signal(half + S.MANT_BITS, name="am_hi")
        am = Signal(AGE_BITS + S.MANT_BITS)
        y0 = Signal(AGE_BITS + S.MANT_BITS)
        with m.If(adv_at(2)):
            m.d.sync += [age.eq(Mux(age_raw > S.AGE_MAX, S.AGE_MAX, age_raw)),
                         am_lo.eq(age[:half] * self.rate_mant), am_hi.eq(age[half:] * self.rate_mant),
                         am.eq(am_lo + (am_hi << half)),
                         y0.eq(am >> self.rate_shift)]

        # r4 -> r5: the exp2 ROM word (a synchronous read: block RAM); r5 -> r6: the word into a
        # register (a block RAM's output is slow: 5.6 ns from the clock on this part); r6 -> r7:
        # e = word >> yi, and the EMA to decay: the memory's, or the forwarding source's from the
        # in-flight buffer
        yi = Signal(AGE_BITS + S.MANT_BITS - S.Y_FRAC_BITS)
        m.d.comb += [yi.eq(y0[S.Y_FRAC_BITS:]), e_rd.addr.eq(y0[:S.Y_FRAC_BITS]), e_rd.en.eq(adv)]
        yi_big, yi5 = Signal(name="yi_big"), Signal(5, name="yi5")
        yi_big6, yi5_6 = Signal(name="yi_big6"), Signal(5, name="yi5_6")
        e_word6 = Signal.like(e_rd.data)
        with m.If(adv_at(5)):
            m.d.sync += [yi_big.eq(yi >= S.EXP_SHIFT_LIMIT), yi5.eq(yi[:5]),
                         yi_big6.eq(yi_big), yi5_6.eq(yi5), e_word6.eq(e_rd.data)]
        e_val = Signal(S.SCORE_BITS + 1)
        src_ema = Signal(S.SCORE_BITS)
        x5 = r[SRC_R - 1]
        x10 = r[EMA_W - 1]
        ema_new = Signal(S.SCORE_BITS)          # the new EMA of the record in r10 (below)
        # A record behind a prefetch insert of its entry (at the same step: the accept rule) takes
        # the insert's own decay inputs, the EMA and the factor, which the insert wrote as it
        # entered r6: an insert only decays, so the record's decay gives the insert's new EMA,
        # and it needs no wait (a read right behind its own prefetch is the common case).
        e_own = Signal(S.SCORE_BITS + 1)
        m.d.comb += e_own.eq(Mux(yi_big6, 0, e_word6 >> yi5_6))
        pf_src = Signal()               # x5.fwd & x5.fwd_pf (a register of its own, below)
        # The forwarding source's entry is read a stage early, by the record in r5, into
        # registers (fwd_src6, fwd_e6): the 32-to-1 read is off the path into the buffer's own
        # write. The buffer's writes in that cycle are taken instead of the entry (the only ones
        # the record in r5 cannot see yet): the insert one ahead writing its decay inputs, and a
        # source entering r[EMA_W] writing its new EMA (the wait at B0 keeps it at least there).
        x4 = r[SRC_R - 2]
        fwd_src6, fwd_e6 = Signal(S.SCORE_BITS, name="fwd_src6"), Signal(S.SCORE_BITS + 1, name="fwd_e6")
        e5, src5 = Signal.like(e_val), Signal.like(src_ema)
        wr_src5 = Signal()              # the record in r6 writes its decay inputs
        wr_ema10 = Signal()             # the record in r10 writes its new EMA
        m.d.comb += wr_ema10.eq(v[EMA_W - 1] & (x10.kind == K_EVENT))
        # The forwarded factor's select and the write enable of the buffer's f_src and f_e (33
        # loads a bit) are registers of their own, made as the record enters r6 (r6 and v move
        # only on adv): from r6's fields, with their other loads, the select was behind a 2.3 ns
        # route (the largest group of failing endpoints, 174 of 748, in one board build of
        # bd957dd with f_slot a RAM). (A copy of r6.fwd alone would be merged back by synthesis.)
        wr_src4 = v[SRC_R - 2] & (x4.kind == K_EVENT)   # the record in r5 writes them as it enters r6
        with m.If(adv_at(5)):
            m.d.sync += [pf_src.eq(x4.fwd & x4.fwd_pf), wr_src5.eq(wr_src4)]
        # The read's selects are registers too, made as the record enters r[SRC_R - 2] from the
        # tags one stage back (the stages move only together, on adv): the source's one-hot entry
        # (fwd_oh5) and the two bypass conditions. The tag's decode and compares, with their
        # fan-out to every entry, were in front of the 32-to-1 read (12.11 ns at 3053eb1).
        x3 = r[SRC_R - 3]
        fwd_oh5 = Signal(D)
        byp_src5 = Signal()             # == wr_src5 & (x5.tag == x4.fwd_tag)
        byp_ema10 = Signal()            # == wr_ema10 & (x10.tag == x4.fwd_tag)
        with m.If(adv_at(5)):
            m.d.sync += [fwd_oh5.eq(Const(1, D) << x3.fwd_tag),
                         byp_src5.eq(wr_src4 & (x4.tag == x3.fwd_tag)),
                         byp_ema10.eq(v[EMA_W - 2] & (r[EMA_W - 2].kind == K_EVENT)
                                      & (r[EMA_W - 2].tag == x3.fwd_tag))]
        src4, e4 = Signal(S.SCORE_BITS, name="src4"), Signal(S.SCORE_BITS + 1, name="e4")
        m.d.comb += [src4.eq(_onehot_read(fwd_oh5, [Mux(x4.fwd_pf, f_src[i], f_ema[i]) for i in range(D)])),
                     e4.eq(_onehot_read(fwd_oh5, f_e))]
        with m.If(adv_at(5)):
            m.d.sync += [
                fwd_src6.eq(Mux(x4.fwd_pf,
                                Mux(byp_src5, src5, src4),
                                Mux(byp_ema10, ema_new, src4))),
                fwd_e6.eq(Mux(byp_src5, e5, e4)),
            ]
        m.d.comb += [e5.eq(Mux(pf_src, fwd_e6, e_own)),
                     src5.eq(Mux(x5.fwd, fwd_src6, ema_m[SRC_R - 1]))]
        with m.If(adv_at(6)):
            m.d.sync += [e_val.eq(e5), src_ema.eq(src5)]
        with m.If(adv & wr_src5):
            f_write(Const(1, D) << x5.tag, (f_src, src5), (f_e, e5))

        # r7 -> r8 -> r9 -> r10 -> r11: the decay (one multiply, then the rounding and sample - dec),
        # the step towards the sample (one multiply, then the sum); a prefetch insert only decays
        dprod = Signal(2 * (S.SCORE_BITS + 1))
        dec = Signal(S.SCORE_BITS)
        ema_diff = Signal(signed(S.SCORE_BITS + 1))
        dec9 = Signal(S.SCORE_BITS)
        sprod = Signal(signed(S.SCORE_BITS + 1 + S.ALPHA_BITS + 1))
        dec_w = Signal(S.SCORE_BITS)
        m.d.comb += dec_w.eq((dprod + 0x8000) >> 16)
        # dec9 + round(sprod / 2^16) as one add: dec9 << 16 carries the rounding constant below it
        ema_sum = Signal(signed(S.SCORE_BITS + 16 + 2))
        m.d.comb += [ema_sum.eq(Cat(Const(0x8000, 16), dec9, Const(0, 1)).as_signed() + sprod),
                     ema_new.eq(Mux(x10.pf, dec9, ema_sum[16:16 + S.SCORE_BITS]))]
        with m.If(adv_at(9)):
            m.d.sync += [dprod.eq(src_ema * e_val),
                         dec.eq(dec_w), ema_diff.eq(r[SRC_R + 1].smp - dec_w),
                         sprod.eq(ema_diff * alpha_eff), dec9.eq(dec),
                         ema_n[EMA_W].eq(ema_new)]
        with m.If(adv & wr_ema10):
            f_write(Const(1, D) << x10.tag, (f_ema, ema_new))

        # r11 -> r12 -> r13: log2 of the new EMA (leading one and mantissa; the ROM)
        ema11 = ema_n[EMA_W]
        msb = Signal(4)
        mant8 = Signal(8)
        for b in range(S.SCORE_BITS):
            with m.If(ema11[b]):
                m.d.comb += [msb.eq(b), mant8.eq((ema11 << 8) >> b)]
        msb11, mant11, zero11 = Signal(4, name="msb11"), Signal(8, name="mant11"), Signal(name="zero11")
        log2q8 = Signal(12)
        m.d.comb += l_rd.addr.eq(mant11)
        with m.If(adv_at(11)):
            m.d.sync += [msb11.eq(msb), mant11.eq(mant8), zero11.eq(ema11 == 0),
                         log2q8.eq(Mux(zero11, 0, Cat(l_rd.data, msb11)))]

        # r12 -> r13: the record's tln; r13 -> r14 -> r15: retention (two 12 x 14 multiplies, their
        # sum); r15 -> r16 -> r17: the key, (step + F) >> bits
        tln = Signal(TLN_BITS)
        th = TLN_BITS // 2
        lt_lo, lt_hi = Signal(12 + th, name="lt_lo"), Signal(12 + TLN_BITS - th, name="lt_hi")
        f_val = Signal(F_BITS)
        ksum = Signal(S.STEP_BITS + 1)
        key = Signal(T.KEY_BITS)
        key_pre = Signal(T.KEY_BITS)
        with m.If(adv_at(14)):
            m.d.sync += [tln.eq(Mux(r[EMA_W + 1].dense, self.tln_d, self.tln_r)),
                         lt_lo.eq(log2q8 * tln[:th]), lt_hi.eq(log2q8 * tln[th:]),
                         f_val.eq((lt_lo + (lt_hi << th)) >> 16),
                         ksum.eq(r[EMA_W + 4].step + f_val),
                         key_pre.eq(ksum >> self.bucket_bits), key.eq(key_pre)]

        # ------------------------------------------------------------ r18: the list stage
        x = r[LS]
        is_ev = v[LS] & (x.kind == K_EVENT) & ~x.lk            # an event or prefetch insert (updates state)
        commit = Signal()               # the list stage completes an event this cycle
        m.d.comb += commit.eq(adv & is_ev)
        if self.select == "ring":
            m.d.comb += ls_rd.addr.eq(x.q)
            lq = data.View(g.list_layout(), ls_rd.data)
            started = lq.started
            kc = Signal(S.STEP_BITS)
            m.d.comb += kc.eq(lq.kc)
            kn = Signal(S.STEP_BITS)
            m.d.comb += kn.eq(x.step >> self.bucket_bits)
            bitmap = Signal(R)
            m.d.comb += bitmap.eq(Mux(started, lq.bitmap, 0))
            ehead = Signal(g.sptr)
            etail = Signal(g.sptr)
            nres = Signal(g.nres)
            m.d.comb += [ehead.eq(Mux(started, lq.ehead, 0)), etail.eq(Mux(started, lq.etail, 0)),
                         nres.eq(Mux(started, lq.nres, 0))]

            # lowest non-empty ring bucket, counted from the ring's base kc - L: kept in the list state
            # (lo_v, lo_b), so the victim's bucket is known without a find-first-set in front of the
            # bucket-head read. Beside it, and in parallel with the event's pointer reads, the next
            # one: a find-first-set over the bitmap without lo_b. An event empties at most one bucket
            # (a pop or an unlink), so when it empties lo_b the new lowest is that next one or the
            # insert's bucket; a splice (which takes lo_b away) takes the next one too. The order
            # from the base does not change when the base moves: buckets that would wrap are spliced
            # first.
            lo_any = Signal()
            lo_b = Signal(g.bb)
            m.d.comb += [lo_any.eq(started & lq.lo_v), lo_b.eq(lq.lo_b)]
            base_idx = Signal(g.bb)
            m.d.comb += base_idx.eq(kc[:g.bb] - lazy[:g.bb])        # mod R: only the low bits count
            ffs_in = Signal(R)
            m.d.comb += ffs_in.eq(bitmap & ~(Const(1, R) << lo_b))
            above = Signal(R)
            m.d.comb += above.eq(ffs_in & Cat(*[Const(i, g.bb) >= base_idx if i < R - 1 else Const(1, 1)
                                                for i in range(R)]))
            hi_any, hi_idx = lowest_set(m, above, R, "hi")
            nx_any, lo_idx = lowest_set(m, ffs_in, R, "nx")          # the next lowest: (nx_any, ffs_b)
            ffs_b = Signal(g.bb)
            m.d.comb += ffs_b.eq(Mux(hi_any, hi_idx, lo_idx))
            lo_off = Signal(g.bb)
            m.d.comb += lo_off.eq(lo_b - base_idx)
            m.d.comb += [bh_rd_f.addr.eq(Cat(lo_b, x.q)), bt_rd_f.addr.eq(Cat(lo_b, x.q))]
            f_head, f_tail = bh_rd_f.data, bt_rd_f.data

            # splice needed: the cursor advances and the lowest bucket falls below kn - L
            adv_gap = Signal(S.STEP_BITS + 1)
            m.d.comb += adv_gap.eq(kn - kc)
            m.d.comb += splice.eq(is_ev & started & (kn > kc) & lo_any & (lo_off < adv_gap))
            bump("splices", splice & adv6)

        else:
            # Matrix selection (docs/tracker.md, "Matrix selection"): per queue a precedence matrix
            # M (M[i][j] = slot i goes before slot j in hw's (key, tie) order), the keys of its slots
            # and the mask of slots in the order (resident and not pinned). The victim is the slot
            # that goes before every other one in the mask: an AND per row, no list to walk, no
            # splices. An insert or touch of slot X rewrites row and column X from comparisons of
            # its new key with every slot's key. The matrix is stored masked, M[i][j] | ~lst[j]
            # (a column outside the mask is all ones), so a row's AND needs no mask: row X is
            # written with the mask applied, and column X set to all ones when X leaves it.
            #
            # The queue's three words are read a stage early, by the record in r17, into registers
            # (the RAM read is off the list stage's loop); the list stage's own writes of that
            # queue in the same cycle are taken instead of the RAM's, slot by slot (the only writes
            # a record in r17 cannot see yet: the list stage is one record ahead; upd_pre below).
            #
            # The keys and the matrix are read a stage earlier still, by the record in r16, into
            # mk_r17 and mx_r17 (the list stage's write bypassed the same way, upd_pre2): r17
            # compares the record's key with the keys, and makes the record's victim from the
            # matrix, from registers, with no RAM read in front of either.
            q_pre = r[LS - 1].q
            q_pre2 = r[LS - 2].q
            m.d.comb += [ls_rd.addr.eq(q_pre), mx_rd.addr.eq(q_pre2), mk_rd.addr.eq(q_pre2)]
            ls_word = data.View(self._mlist_layout(), ls_rd.data)   # r17's queue's list word, as read
            snap_ls = Signal(self._mlist_layout())
            snap_mx = Signal(SQ * SQ)
            snap_mk = Signal(SQ * T.KEY_BITS)
            mk_r17 = Signal(SQ * T.KEY_BITS)
            mx_r17 = Signal(SQ * SQ)
            lst_r17 = Signal(SQ)            # the order's mask as r17 holds it (read with mx_r17)
            # (snap_ls, snap_mx, snap_mk, mk_r17, mx_r17 and lst_r17 are loaded below, where the
            # list stage's change is known)
            mq = data.View(self._mlist_layout(), snap_ls)
            started = mq.started
            nres = Signal(g.nres)
            lst = Signal(SQ)
            # (a queue's word is zero until its first event: the reset sweep clears it)
            m.d.comb += [nres.eq(mq.nres), lst.eq(mq.lst)]
            mrow = [snap_mx[i * SQ:(i + 1) * SQ] for i in range(SQ)]
            mkey = [snap_mk[i * T.KEY_BITS:(i + 1) * T.KEY_BITS] for i in range(SQ)]
            mpf = Signal(SQ)
            m.d.comb += mpf.eq(mq.pf)
            mpos = [mq.pos[i * g.pb:(i + 1) * g.pb] for i in range(SQ)]
            m.d.comb += splice.eq(0)

        NULL = Const(0, g.sptr)

        def sp(slot):               # a valid slot pointer
            return Cat(slot, Const(1, 1))

        def vld(ptr):
            return ptr[g.sb]

        def idx(ptr):
            return ptr[:g.sb]

        def saddr(slot):
            return Cat(slot, x.q)

        # -- residency
        slot_src = Signal(g.sb)
        resident = Signal()
        if self.select == "ring":
            m.d.comb += [f_slot_rd.addr.eq(x.fwd_tag),
                         slot_src.eq(Mux(x.fwd, f_slot_rd.data, slot_m[LS]))]
            pos_s = Signal(g.pb)            # the position in slot_src
            m.d.comb += [ps_rd_s.addr.eq(saddr(slot_src)), pos_s.eq(ps_rd_s.data)]
            m.d.comb += resident.eq(started & (slot_src < nres) & (pos_s == x.position))
        else:
            # checked as the record enters this stage (r17, below), with this stage's own change
            res_ls, slot_ls, slot1h_ls = Signal(name="res_ls"), Signal(g.sb, name="slot_ls"), Signal(SQ, name="slot1h_ls")
            m.d.comb += [slot_src.eq(slot_ls), resident.eq(res_ls)]
        # the position is pinned: compared as the record enters this stage (the compare's carry
        # chain fed the order's column writes, r18 → pinned → col_x → the order RAM, 9.66 ns in a
        # board build); the configuration is static while events flow, as for room_pre below
        pinned = Signal()
        with m.If(adv_at(LS, 1)):
            m.d.sync += pinned.eq(r[LS - 1].position < self.pinned)

        # -- victim (a miss with a full queue)
        free = Signal()
        # a budget beyond the slots (cfg_error) acts as max_budget: no slot index ever overflows
        def has_room(n):
            return (n < self.budget) & (n < g.max_budget)
        if self.select == "ring":
            m.d.comb += free.eq(has_room(nres))
        else:
            free_ls = Signal()            # registered as the record enters this stage (below)
            m.d.comb += free.eq(free_ls)
        vic = Signal(g.sb)
        vic_any = Signal()
        if self.select == "ring":
            # -- own node (a hit): neighbours and key
            m.d.comb += [pv_rd_s.addr.eq(saddr(slot_src)), nx_rd_s.addr.eq(saddr(slot_src)),
                         ky_rd_s.addr.eq(saddr(slot_src))]
            na, nbx, okey = pv_rd_s.data, nx_rd_s.data, ky_rd_s.data
            # on the expired list iff spliced: key below the base after this event's cursor move
            # (buckets spliced in the cycles just before this one count)
            kc_new = Signal(S.STEP_BITS)
            m.d.comb += kc_new.eq(Mux(started & (kc > kn), kc, kn))
            in_expired = Signal()
            m.d.comb += in_expired.eq((okey + lazy) < kc_new)
            a_bucket = okey[:g.bb]

            from_exp = Signal()
            m.d.comb += from_exp.eq(vld(ehead))
            m.d.comb += [vic.eq(Mux(from_exp, idx(ehead), f_head)), vic_any.eq(from_exp | lo_any)]
            m.d.comb += nx_rd_v.addr.eq(saddr(vic))
            nv = nx_rd_v.data
        else:
            # first: the victim, one-hot (the slot before every other slot in the order). It is a
            # register, made in the cycle the event before it spends here (below, where that
            # event's change is known): the list stage's loop is then no longer "the row ANDs →
            # the rewritten-slot masks → the merged matrix → the row ANDs" (docs/tracker.md,
            # "Matrix selection"). Three copies, each with its own enable and loads: first for
            # the rewritten-slot masks; first_o for the victim's position in the decision and the
            # victim response (an AND-OR of some 20 bits per slot); first_r for the rest (the
            # victim's index, the residency update, the prefetch flag).
            first = Signal(SQ, name="first", attrs={"keep": 1})
            first_o = Signal(SQ, name="first_o", attrs={"keep": 1})
            first_r = Signal(SQ, name="first_r", attrs={"keep": 1})
            # "the order is not empty", registered as the record enters this stage (vic_any_ls,
            # below): as lst != 0 here it was three LUT levels in front of the slot the event
            # leaves its position in (snap_ls → vic_any → slot_alt → f_slot, 9.98 ns at 9a6936e)
            vic_any_ls = Signal()
            m.d.comb += vic_any.eq(vic_any_ls)
            # first is one-hot (the order is total), so its index is an OR per bit, not a
            # priority encoder
            m.d.comb += vic.eq(Cat(*[Cat(*[first_r[i] for i in range(SQ) if i >> b & 1]).any()
                                     for b in range(g.sb)]))
        if self.select == "ring":
            vic_pos = Signal(g.pb)          # the victim's position
            m.d.comb += [ps_rd_v.addr.eq(saddr(vic)), vic_pos.eq(ps_rd_v.data)]
        # (the matrix reads the victim's position where it is reported, at the output: first's
        # AND-OR over the positions, one-hot, with no encoder and RAM read behind the AND)

        hit = Signal()
        pf_noop = Signal()              # a prefetch insert of a resident position: nothing changes
        do_free = Signal()
        do_evict = Signal()
        no_victim = Signal()
        placed = Signal()               # the position (re)takes a slot: hit, free slot or eviction
        m.d.comb += [hit.eq(resident & ~x.pf), pf_noop.eq(resident & x.pf), do_free.eq(~resident & free),
                     do_evict.eq(~resident & ~free & vic_any), no_victim.eq(~resident & ~free & ~vic_any),
                     placed.eq(hit | do_free | do_evict)]
        s_ins = Signal(g.sb)
        m.d.comb += s_ins.eq(Mux(resident, slot_src, Mux(do_free, nres[:g.sb], vic)))
        unlink = Signal()
        m.d.comb += unlink.eq(hit & ~pinned)
        insert = Signal()
        m.d.comb += insert.eq(placed & ~pinned)

        if self.select == "ring":
            # state after unlink / pop, before the insert
            bm1 = Signal(R)
            eh1, et1 = Signal(g.sptr, name="eh1"), Signal(g.sptr, name="et1")
            # bucket A (the hit's own bucket, when in the ring) after the unlink
            a_in_ring = Signal()
            m.d.comb += a_in_ring.eq(unlink & ~in_expired)
            a_empty = Signal()
            m.d.comb += a_empty.eq(~vld(na) & ~vld(nbx))
            # bucket F (the victim's, when from the ring) after the pop
            f_pop = Signal()
            m.d.comb += f_pop.eq(do_evict & ~from_exp)
            m.d.comb += [bm1.eq(bitmap), eh1.eq(ehead), et1.eq(etail)]
            with m.If(a_in_ring & a_empty):
                m.d.comb += bm1.eq(bitmap & ~(Const(1, R) << a_bucket))
            with m.If(unlink & in_expired):
                with m.If(~vld(na)):
                    m.d.comb += eh1.eq(nbx)
                with m.If(~vld(nbx)):
                    m.d.comb += et1.eq(na)
            with m.If(f_pop & ~vld(nv)):
                m.d.comb += bm1.eq(bitmap & ~(Const(1, R) << lo_b))
            with m.If(do_evict & from_exp):
                m.d.comb += eh1.eq(nv)
                with m.If(~vld(nv)):
                    m.d.comb += et1.eq(NULL)

            # bucket B (the insert's) as it stands after the unlink / pop
            bkt = Signal(g.bb)
            m.d.comb += bkt.eq(key[:g.bb])
            m.d.comb += [bh_rd_b.addr.eq(Cat(bkt, x.q)), bt_rd_b.addr.eq(Cat(bkt, x.q))]
            b_ne = Signal()
            b_head, b_tail = Signal(g.sptr, name="b_head"), Signal(g.sptr, name="b_tail")
            m.d.comb += [b_ne.eq((bm1 >> bkt)[0]), b_head.eq(sp(bh_rd_b.data)), b_tail.eq(sp(bt_rd_b.data))]
            with m.If(a_in_ring & (a_bucket == bkt)):
                with m.If(~vld(na)):
                    m.d.comb += b_head.eq(nbx)
                with m.If(~vld(nbx)):
                    m.d.comb += b_tail.eq(na)
            with m.If(f_pop & (lo_b == bkt)):
                m.d.comb += b_head.eq(nv)
            push = Signal()
            m.d.comb += push.eq(x.dense)
            # final (head, tail) of B and the neighbour pointer the insert writes
            nb_head, nb_tail = Signal(g.sptr, name="nb_head"), Signal(g.sptr, name="nb_tail")
            with m.If(~b_ne):
                m.d.comb += [nb_head.eq(sp(s_ins)), nb_tail.eq(sp(s_ins))]
            with m.Elif(push):
                m.d.comb += [nb_head.eq(sp(s_ins)), nb_tail.eq(b_tail)]
            with m.Else():
                m.d.comb += [nb_head.eq(b_head), nb_tail.eq(sp(s_ins))]

            # -- writes of the list stage (event)
            # the lowest bucket after the event: lo_b, or the next lowest when the event emptied lo_b;
            # then the insert's bucket when it is lower (offsets from the base after the cursor move)
            base_new = Signal(g.bb)
            m.d.comb += base_new.eq(kc_new[:g.bb] - lazy[:g.bb])
            lo_gone = Signal()
            m.d.comb += lo_gone.eq((a_in_ring & a_empty & (a_bucket == lo_b)) | (f_pop & ~vld(nv)))
            keep_v, keep_b = Signal(name="keep_v"), Signal(g.bb, name="keep_b")
            m.d.comb += [keep_v.eq(Mux(lo_gone, nx_any, lo_any)), keep_b.eq(Mux(lo_gone, ffs_b, lo_b))]
            ins_lower = Signal()
            m.d.comb += ins_lower.eq(insert & (~keep_v | ((bkt - base_new)[:g.bb] < (keep_b - base_new)[:g.bb])))
            lnew = Signal(g.list_layout())
            m.d.comb += lnew.eq(pack(g.list_layout(), started=Const(1, 1), kc=kc_new,
                                     ehead=Mux(no_victim, ehead, eh1), etail=Mux(no_victim, etail, et1),
                                     nres=nres + do_free,
                                     bitmap=Mux(~placed, bitmap, Mux(insert, bm1 | (Const(1, R) << bkt), bm1)),
                                     lo_v=keep_v | insert, lo_b=Mux(ins_lower, bkt, keep_b)))
            with m.If(commit):
                m.d.comb += [ls_wr.en.eq(1), ls_wr.addr.eq(x.q), ls_wr.data.eq(lnew)]
                with m.If(placed):
                    m.d.comb += [ps_wr.en.eq(1), ps_wr.addr.eq(saddr(s_ins)), ps_wr.data.eq(x.position),
                                 ky_wr.en.eq(1), ky_wr.addr.eq(saddr(s_ins)), ky_wr.data.eq(key),
                                 # the pf bit: set by a prefetch's insert, cleared by an access
                                 pf_wr.en.eq(1), pf_wr.addr.eq(saddr(s_ins)), pf_wr.data.eq(x.pf & ~hit)]
                # unlink: the neighbours' pointers (unless the insert writes the same word)
                with m.If(unlink & vld(na) & ~(insert & ~push & b_ne & (b_tail == na))):
                    m.d.comb += [nx_wr[0].en.eq(1), nx_wr[0].addr.eq(saddr(idx(na))), nx_wr[0].data.eq(nbx)]
                with m.If(unlink & vld(nbx) & ~(insert & push & b_ne & (b_head == nbx))):
                    m.d.comb += [pv_wr[0].en.eq(1), pv_wr[0].addr.eq(saddr(idx(nbx))), pv_wr[0].data.eq(na)]
                # pop: the new head's prev (unless the insert pushes in front of it)
                with m.If(do_evict & vld(nv) & ~(insert & push & b_ne & (b_head == nv))):
                    m.d.comb += [pv_wr[0].en.eq(1), pv_wr[0].addr.eq(saddr(idx(nv))), pv_wr[0].data.eq(NULL)]
                # unlink from a ring bucket other than B: its head / tail
                with m.If(a_in_ring & ~(insert & (a_bucket == bkt))):
                    with m.If(~vld(na)):
                        m.d.comb += [bh_wr_a.en.eq(1), bh_wr_a.addr.eq(Cat(a_bucket, x.q)), bh_wr_a.data.eq(idx(nbx))]
                    with m.If(~vld(nbx)):
                        m.d.comb += [bt_wr_a.en.eq(1), bt_wr_a.addr.eq(Cat(a_bucket, x.q)), bt_wr_a.data.eq(idx(na))]
                # pop from a ring bucket other than B: its head
                with m.If(f_pop & ~(insert & (lo_b == bkt))):
                    m.d.comb += [bh_wr_a.en.eq(1), bh_wr_a.addr.eq(Cat(lo_b, x.q)), bh_wr_a.data.eq(idx(nv))]
                # insert into B
                with m.If(insert):
                    m.d.comb += [bh_wr_b.en.eq(1), bh_wr_b.addr.eq(Cat(bkt, x.q)), bh_wr_b.data.eq(idx(nb_head)),
                                 bt_wr_b.en.eq(1), bt_wr_b.addr.eq(Cat(bkt, x.q)), bt_wr_b.data.eq(idx(nb_tail)),
                                 pv_wr[2].en.eq(1), pv_wr[2].addr.eq(saddr(s_ins)),
                                 nx_wr[2].en.eq(1), nx_wr[2].addr.eq(saddr(s_ins))]
                    with m.If(~b_ne):
                        m.d.comb += [pv_wr[2].data.eq(NULL), nx_wr[2].data.eq(NULL)]
                    with m.Elif(push):
                        m.d.comb += [pv_wr[2].data.eq(NULL), nx_wr[2].data.eq(b_head),
                                     pv_wr[1].en.eq(1), pv_wr[1].addr.eq(saddr(idx(b_head))),
                                     pv_wr[1].data.eq(sp(s_ins))]
                    with m.Else():
                        m.d.comb += [pv_wr[2].data.eq(b_tail), nx_wr[2].data.eq(NULL),
                                     nx_wr[1].en.eq(1), nx_wr[1].addr.eq(saddr(idx(b_tail))),
                                     nx_wr[1].data.eq(sp(s_ins))]

            # -- the splice micro-operation: bucket F onto the expired list's tail
            with m.If(splice & adv6):
                sl = Signal(g.list_layout())
                m.d.comb += sl.eq(pack(g.list_layout(), started=lq.started, kc=lq.kc,
                                       ehead=Mux(vld(etail), lq.ehead, sp(f_head)), etail=sp(f_tail),
                                       nres=lq.nres, bitmap=ffs_in, lo_v=nx_any, lo_b=ffs_b))
                with m.If(vld(etail)):
                    m.d.comb += [nx_wr[0].en.eq(1), nx_wr[0].addr.eq(saddr(idx(etail))), nx_wr[0].data.eq(sp(f_head)),
                                 pv_wr[0].en.eq(1), pv_wr[0].addr.eq(saddr(f_head)), pv_wr[0].data.eq(etail)]
                m.d.comb += [ls_wr.en.eq(1), ls_wr.addr.eq(x.q), ls_wr.data.eq(sl)]

        else:
            # the next free slot, one-hot (1 << nres[:sb]), registered as the record enters this
            # stage with snap_ls, field for field as list_with_change makes its count: as a decoder
            # of snap_ls's count it was a carry chain in front of the masks' early case on the list
            # stage's loop (snap_ls → the decoder → upd_here_early → upd_here → the list RAM's write
            # data, 9.73 ns in the bench at eb591ae). (init 1: snap_ls's count resets to 0)
            free1h = Signal(SQ, init=1)
            # does the new key go before slot j's? A dense-mode touch goes in front of its bucket
            # (before equal keys), a normal one behind it (after equal keys)
            # (compared as the record enters this stage, from r17's key and the queue's keys as
            # r17 holds them, or this stage's new key for the slot its event rewrites in that cycle)
            before = Signal(SQ)
            x_pre = r[LS - 1]
            # ~x.pf for the masks' hit case, a register of its own (inverted, so synthesis does not
            # merge it back into r18.pf): from r18.pf, with its loads in the output stage, the
            # route to the hit cells was 1.7 ns, the start of 103 to 341 failing endpoints in
            # four board builds (r18.pf → upd_here_hit → upd_here_early → the mask → snap_*)
            x_npf = Signal(init=1)
            with m.If(adv_at(LS, 1)):
                m.d.sync += x_npf.eq(~x_pre.pf)
            mk_pre = [mk_r17[j * T.KEY_BITS:(j + 1) * T.KEY_BITS] for j in range(SQ)]
            # This stage's change of its queue's words is per slot: row and column X, key X, and
            # X's lst, pf and position bits, for the slot X it (re)places. The same change is
            # written to the RAMs and taken by the records that read the queue's words ahead (the
            # matrix, keys and list word as a record enters this stage; the keys and the residency
            # word two stages back): each slot X rewritten for that queue (a one-hot mask, zero for
            # another queue) takes its new value over the RAM's, and every other bit is the RAM's.
            # That equals choosing the whole written word (the RAM word of the queue being written
            # is this stage's own, snap_*), with one multiplexer level less on the list stage's
            # loop (snap_* -> victim -> slot -> new row -> snap_*). One mask and three merge
            # helpers below make both.
            def rewritten_slots(same, name, copies=1):
                """The slots this stage rewrites in a queue's words, one-hot: none unless ``same``
                (this stage's event is of that queue) and the event places its position (a hit,
                a free slot, an eviction; not a prefetch of a resident position, not a miss with
                nothing evictable, where first is all zeros). The hit's and the free slot's cases
                come from registers alone, through cells of their own, so only the victim's
                case waits for the victim (first, a register): each mask bit is one LUT (``_cells.lut4``),
                early | (take_first & first), with first on its fastest input. As plain logic,
                synthesis rebuilt upd_pre as same_pre & upd_here, a second level behind first on
                the loop (lst → first → upd_here → upd_pre → snap_mx, 10.00 ns at addea14).
                ``copies`` identical masks, one per group of loads (shorter routes)."""
                # The early case and take_first are cells too, two levels from registers (same is
                # a register): as kept logic, synthesis derived them from other kept signals
                # (slot_alt → slot1h_alt → upd_here_early → upd_pre_early, six levels from
                # free_ls to upd_pre, 10.20 ns into snap_mx at d8705bf).
                take_hit = lut4(m, platform, lambda s, r, n: s and r and n, (same, resident, x_npf),
                                name=f"upd_{name}_hit")
                take_free = lut4(m, platform, lambda s, r, f: s and not r and f, (same, resident, free),
                                 name=f"upd_{name}_free")
                take_first = lut4(m, platform, lambda s, r, f: s and not r and not f, (same, resident, free),
                                  name=f"upd_{name}_victim")
                early = Signal(SQ, name=f"upd_{name}_early")
                m.d.comb += early.eq(Cat(*[
                    lut4(m, platform, lambda a, h, b, f: (a and h) or (b and f),
                         (take_hit, slot1h_ls[i], take_free, free1h[i]), name=f"upd_{name}_early{i}")
                    for i in range(SQ)]))
                masks = []
                for c in range(copies):
                    mask = Signal(SQ, name=f"upd_{name}" + (f"_{c}" if c else ""))
                    m.d.comb += mask.eq(Cat(*[
                        lut4(m, platform, lambda f, t, e: e or (t and f), (first[i], take_first, early[i]),
                             name=f"upd_{name}_lut{i}" + (f"_{c}" if c else ""))
                        for i in range(SQ)]))
                    masks.append(mask)
                return masks if copies > 1 else masks[0]

            # row X's and column X's new bits, from registers, kept: each merged bit is then one
            # LUT5 of two mask bits, these two and the old bit (with them spelled out, synthesis
            # made two LUT levels behind the late mask bits)
            row_x = Signal(SQ, attrs={"keep": 1})
            col_x = Signal(SQ, attrs={"keep": 1})
            m.d.comb += [row_x.eq(before | ~lst), col_x.eq(Mux(pinned, (1 << SQ) - 1, ~before))]

            def matrix_with_change(upd_mask, rows):
                """The matrix ``rows`` (one word per row) with row and column X rewritten for each
                slot X of ``upd_mask``: row X masked by the order's mask (lst[j] is the new one for
                j != X), column X the complement of ``before``, or all ones when a pinned position
                takes X (it leaves the mask)."""
                return Cat(*[Mux(upd_mask[i], row_x[j], Mux(upd_mask[j], col_x[i], rows[i][j]))
                             for i in range(SQ) for j in range(SQ)])

            def keys_with_change(upd_mask, old):
                """The queue's keys ``old`` with this stage's new key in the slots of ``upd_mask``."""
                return Cat(*[Mux(upd_mask[i], key, old[i * T.KEY_BITS:(i + 1) * T.KEY_BITS]) for i in range(SQ)])

            def list_with_change(same, upd_mask, old):
                """The queue's list word ``old`` with this stage's change taken when ``same``
                (this stage's event is of that queue; ``upd_mask``: the slots it rewrites)."""
                old = data.View(self._mlist_layout(), old)
                return pack(self._mlist_layout(), started=old.started | same,
                            nres=Mux(same, nres + do_free, old.nres),
                            lst=(old.lst & ~upd_mask) | Mux(pinned, 0, upd_mask),
                            pf=(old.pf & ~upd_mask) | Mux(x.pf & ~hit, upd_mask, 0),
                            pos=Cat(*[Mux(upd_mask[i], x.position, old.pos[i * g.pb:(i + 1) * g.pb])
                                      for i in range(SQ)]))

            # the slots rewritten: written here, and for the record entering this stage (x_pre)
            # and the one two stages back (x_pre2), whose keys (mk_r17) and residency
            # word (below) are read then
            # registered as the records move (every stage register moves on adv, and only then):
            # is_ev & (x.q == x_pre.q) and is_ev & (x.q == q_pre2) of the next cycle
            same_pre, same_pre2 = Signal(name="same_pre"), Signal(name="same_pre2")
            x_in = r[LS - 1]
            is_ev_in = v[LS - 1] & (x_in.kind == K_EVENT) & ~x_in.lk
            with m.If(adv_at(LS, 1)):
                m.d.sync += [same_pre.eq(is_ev_in & (x_in.q == r[LS - 2].q)),
                             same_pre2.eq(is_ev_in & (x_in.q == r[LS - 3].q))]
            # (the RAM writes' and the next record's masks, one copy for the matrix and one for
            # the rest: about 30 loads each instead of 60; the RAM writes' as three, for the
            # matrix, the keys and the list word, each RAM's write data a route of its own: the
            # list word's was 2.8 ns from a mask cell shared with the keys at eb591ae)
            upd, upd_ls, upd_mx = rewritten_slots(Const(1, 1), "here", copies=3)
            upd_pre, upd_pre_mx = rewritten_slots(same_pre, "pre", copies=2)
            upd_pre2, upd_pre2_mx = rewritten_slots(same_pre2, "pre2", copies=2)

            # "<=" (dense) or "<" as one compare, with the mode as a low bit below the key:
            # k <= o is {k, 0} < {o, 1}, and k < o is {k, 1} < {o, 1}. One carry chain per slot
            # instead of two and a choice, and half the loads on key_pre.
            key_m = Cat(~x_pre.dense, key_pre)

            def goes_before(other):
                return key_m < Cat(Const(1, 1), other)
            with m.If(adv_at(LS, 1)):
                m.d.sync += before.eq(Cat(*[Mux(upd_pre[j], goes_before(key), goes_before(mk_pre[j]))
                                            for j in range(SQ)]))
            # the matrix and key RAMs' address and data unconditionally (they are ignored while
            # not enabled): inside the enable's If, Amaranth's default 0 put "placed" (behind the
            # row ANDs) in front of them, the board's critical path at 4d41673 (10.50 ns). The
            # list word's stay inside: the reset sweep writes that RAM too.
            m.d.comb += [mx_wr.addr.eq(x.q), mx_wr.data.eq(matrix_with_change(upd_mx, mrow)),
                         mk_wr.addr.eq(x.q), mk_wr.data.eq(keys_with_change(upd, snap_mk))]
            with m.If(commit):
                m.d.comb += [ls_wr.en.eq(1), ls_wr.addr.eq(x.q),
                             ls_wr.data.eq(list_with_change(Const(1, 1), upd_ls, snap_ls))]
                with m.If(placed):
                    m.d.comb += [mx_wr.en.eq(1), mk_wr.en.eq(1)]
            rd_row = [mx_rd.data[i * SQ:(i + 1) * SQ] for i in range(SQ)]
            row17 = [mx_r17[i * SQ:(i + 1) * SQ] for i in range(SQ)]
            # The victim of the record entering this stage (first), made here while this stage
            # holds the event before it, from registers: r17's queue's matrix and mask as the
            # event before this one left them (row17, lst_r17) and the slot X this stage's event
            # rewrites in that queue. An event changes the order at X only: row and column X; the
            # relations among the other slots stay. So the new first is X, when X stays in the
            # order (not pinned) and its new row (row_x, the key compares) holds against every
            # other slot of the order; otherwise it is the first of the old order with X left
            # out. That is the row ANDs of the merged matrix, exactly, without waiting for the
            # merge (docs/tracker.md, "Matrix selection").
            # X is made per case, not from the mask, so that only the victim's case waits for
            # first (a register): the hit's slot (slot1h_ls), the free slot (free1h: never in the
            # order, so its column is all ones in every row of it and the old first stands) or
            # the victim (first); none for another queue, a prefetch of a resident position or
            # nothing to evict. The loop is first → the old order's first without it (the row
            # ANDs with first's column ORed in, three LUT levels) → two cells → first.
            first_v = Signal(SQ, name="first_v", attrs={"keep": 1})  # a copy of first for this loop alone

            def first_without(slot1h, name):
                """The old order's first with ``slot1h``'s slot (one-hot or zero) left out."""
                sig = Signal(SQ, name=name, attrs={"keep": 1})
                m.d.comb += sig.eq(Cat(*[
                    lst_r17[i] & ~slot1h[i] & Cat(*[row17[i][j] | slot1h[j] for j in range(SQ) if j != i]).all()
                    for i in range(SQ)]))
                return sig

            def goes_first(slot1h, name):
                """``slot1h``'s slot, rewritten by this stage's event, goes before every other slot
                of the order and stays in it."""
                sig = Signal(name=name, attrs={"keep": 1})
                m.d.comb += sig.eq(~pinned & Cat(*[row_x[j] | slot1h[j] for j in range(SQ)]).all())
                return sig
            none1h = Const(0, SQ)
            first_old = first_without(none1h, "first_old")
            take_hit_v = Signal(name="take_hit_v")
            take_free_v = Signal(name="take_free_v")
            take_vic_v = Signal(name="take_vic_v")
            m.d.comb += [take_hit_v.eq(same_pre & resident & x_npf), take_free_v.eq(same_pre & ~resident & free),
                         take_vic_v.eq(same_pre & ~resident & ~free)]
            new_hit = Mux(goes_first(slot1h_ls, "first_is_hit"), slot1h_ls, first_without(slot1h_ls, "first_not_hit"))
            new_free = Mux(goes_first(none1h, "first_is_free"), free1h, first_old)
            # the cases from registers alone (kept: the victim's case and the copies' ORs are cells)
            first_rest = Signal(SQ, name="first_rest", attrs={"keep": 1})
            m.d.comb += first_rest.eq(Mux(take_hit_v, new_hit, 0) | Mux(take_free_v, new_free, 0) |
                                      Mux(take_hit_v | take_free_v | take_vic_v, 0, first_old))
            vic_first = goes_first(first_v, "first_is_vic")
            vic_not = first_without(first_v, "first_not_vic")
            vic_case = [lut4(m, platform, lambda c, x, f, t: t and (f if x else c),
                             (vic_not[i], vic_first, first_v[i], take_vic_v), name=f"first_vic_lut{i}")
                        for i in range(SQ)]
            for part, copy in ((0, first), (1, first_r), (2, first_o), (0, first_v)):
                nxt = Cat(*[lut4(m, platform, lambda a, b: a or b, (vic_case[i], first_rest[i]),
                                 name=f"{copy.name}_next{i}") for i in range(SQ)])
                with m.If(adv_at(LS, part)):
                    m.d.sync += copy.eq(nxt)
            with m.If(adv_at(LS, 0)):
                m.d.sync += snap_mx.eq(matrix_with_change(upd_pre_mx, row17))
            with m.If(adv_at(LS, 2)):
                m.d.sync += [
                    # r16's queue's matrix and mask after this stage's change (the next record's
                    # first is made from them, above)
                    mx_r17.eq(matrix_with_change(upd_pre2_mx, rd_row)),
                    lst_r17.eq(data.View(self._mlist_layout(),
                                         list_with_change(same_pre2, upd_pre2, ls_rd_res.data)).lst),
                    snap_mk.eq(keys_with_change(upd_pre, mk_r17)),
                    snap_ls.eq(list_with_change(same_pre, upd_pre, ls_rd.data)),
                    # its count's one-hot: + do_free is a shift, a rotation where nres[:sb] wraps
                    # within the SQ bits (SQ a power of two; else a count of SQ is all zeros)
                    free1h.eq(Mux(same_pre, Mux(do_free, free1h.rotate_left(1) if SQ == 1 << g.sb
                                                else (free1h << 1)[:SQ], free1h),
                                  Const(1, SQ) << ls_word.nres[:g.sb])),
                    mk_r17.eq(keys_with_change(upd_pre2, mk_rd.data)),
                ]

        pf_s, pf_v = Signal(name="pf_s"), Signal(name="pf_v")  # the pf bits of slot_src and of the victim
        if self.select == "ring":
            m.d.comb += [pf_rd_s.addr.eq(saddr(slot_src)), pf_rd_v.addr.eq(saddr(vic)),
                         pf_s.eq(pf_rd_s.data), pf_v.eq(pf_rd_v.data)]
        else:
            m.d.comb += [pf_s.eq((mpf >> slot_src)[0]), pf_v.eq((first_r & mpf) != 0)]
        bump_late("read_hits", commit & hit & ~x.write)
        bump_late("evictions", commit & do_evict)
        bump_late("no_victim", commit & no_victim)
        bump_late("prefetches", commit & x.pf & ~resident)
        bump_late("prefetch_hits", commit & hit & ~x.write & pf_s)
        bump_late("prefetch_evicted_unused", commit & do_evict & pf_v)

        # -- the slot the position holds after the event, for younger events of the same entry
        # (spelled out by case, equal to Mux(no_victim, slot_src, s_ins): only the victim's case
        # waits for the victim, which in the matrix is first; nobody forwards from a prefetch)
        slot_after = Signal(g.sb)
        if self.select == "ring":
            m.d.comb += slot_after.eq(Mux(~resident & ~free & vic_any, vic, Mux(resident | ~free, slot_src, nres[:g.sb])))
        else:
            # the same as an OR of the victim's index (zero unless evicting: first is all zeros
            # without an evictable slot) with the other cases, chosen from registers alone and kept
            # apart: the victim's index is then two LUT levels behind first, not four
            # (first → the encoder → the choice → f_slot was a 9.44 ns path at b09313b)
            evicting = Signal(attrs={"keep": 1})
            slot_alt = Signal(g.sb, attrs={"keep": 1})
            m.d.comb += [evicting.eq(~resident & ~free),
                         slot_alt.eq(Mux(evicting, Mux(vic_any, 0, slot_src), Mux(resident | ~free, slot_src, nres[:g.sb])))]
            # each bit as cells: two ORs of four first bits (the victim's index bit, OR-encoded),
            # then (evicting & (o0 | o1)) | slot_alt in one LUT (synthesis made four levels of
            # it behind first, 9.79 ns into f_slot in the board build of aa35c72)
            # (beyond 16 slots, more than eight first bits per index bit: plain logic)
            def slot_after_bit(b):
                ones = [i for i in range(SQ) if i >> b & 1]
                if len(ones) > 8:
                    return (evicting & vic[b]) | slot_alt[b]
                halves = [ones[k:k + 4] for k in range(0, len(ones), 4)]
                ors = [lut4(m, platform, lambda *f: any(f), [first_r[i] for i in half],
                            name=f"slot_after_or{b}_{k}") for k, half in enumerate(halves)]
                return lut4(m, platform, lambda o0, o1, e, a: (e and (o0 or o1)) or a,
                            (ors[0], ors[1] if len(ors) > 1 else Const(0, 1), evicting, slot_alt[b]),
                            name=f"slot_after_lut{b}")
            m.d.comb += slot_after.eq(Cat(*[slot_after_bit(b) for b in range(g.sb)]))
        if self.select == "matrix":
            # the same, one-hot, and made the same way: first where evicting, else a choice from
            # registers (as Mux(resident | no_victim, slot1h_ls, upd) it waited for the mask:
            # resident → upd_here_early → upd_here → slot1h_pre was 9.72 ns at 9a6936e)
            slot1h_after = Signal(SQ)
            slot1h_alt = Signal(SQ, attrs={"keep": 1})
            m.d.comb += [slot1h_alt.eq(Mux(evicting, Mux(vic_any, 0, slot1h_ls),
                                           Mux(resident | ~free, slot1h_ls, free1h))),
                         slot1h_after.eq(Mux(evicting, first_r, 0) | slot1h_alt)]
        m.d.comb += [f_slot_wr.addr.eq(x.tag), f_slot_wr.data.eq(slot_after), f_slot_wr.en.eq(commit)]

        if self.select == "matrix":
            # -- residency of the record entering this stage (from r17), registered: the slot its
            # position holds (the metadata's, or the in-flight buffer's when it forwards) and
            # whether the queue's word (before this stage's write) still gives it that slot.
            # This stage's event changes that in two ways: it is the record's own source (same
            # entry, one ahead: the position is where it left it), or it takes that slot.
            # The record's slot (binary and one-hot) and the queue's word are read a stage earlier
            # still, as it enters r17: the slot from the in-flight buffer, or from this stage when
            # the source is here then (it writes the buffer in that cycle; a source one ahead of
            # r17 is src_here, below); the word from the RAM, or this stage's write of it (so the
            # word in r17 is the RAM as r17 would read it, off the RAM's read path).
            # Of that word, r17 needs only "started", the free-slot test and which slots hold the
            # record's position: these are made as the record enters r17 and registered, field by
            # field as list_with_change makes the word, so the sixteen position compares are off
            # the path into ``resident`` (mq_res → compares → resident was 10.12 ns at 9a6936e).
            # A rewritten slot holds this stage's position: one compare for all of them, chosen
            # per slot by the mask, after the RAM's compares.
            x_pre2 = r[LS - 2]
            m.d.comb += ls_rd_res.addr.eq(x_pre2.q)
            ram_res = data.View(self._mlist_layout(), ls_rd_res.data)
            # the word's count is the RAM's, or this stage's after its event (+1 if it took a
            # free slot): its compares are made on both counts and chosen by do_free after, with
            # no add in front (resident → do_free → nres + 1 → the compares → held was 9.80 ns)
            room0, room1 = Signal(name="room0"), Signal(name="room1")
            m.d.comb += [room0.eq(has_room(nres)), room1.eq(has_room(nres + 1))]
            here_eq = Signal()
            m.d.comb += here_eq.eq(x.position == x_pre2.position)
            # slot i holds the record's position (the word as r17 holds it): one LUT per slot
            # behind the mask (an ECP5 cell on the board: as plain logic, synthesis took the
            # mask cell's output for an early input and put it in front of the compares, four
            # LUT levels deep, 10.24 ns)
            ram_eq, in_nres = Signal(SQ, name="ram_eq"), Signal(SQ, name="in_nres")
            m.d.comb += [ram_eq.eq(Cat(*[ram_res.pos[i * g.pb:(i + 1) * g.pb] == x_pre2.position
                                         for i in range(SQ)])),
                         in_nres.eq(Cat(*[Mux(same_pre2, Mux(do_free, (i <= nres) if i else 1, i < nres), i < ram_res.nres)
                                          for i in range(SQ)]))]
            held_next = Cat(*[lut4(m, platform, lambda u, h, e, n: (h if u else e) and n,
                                   (upd_pre2[i], here_eq, ram_eq[i], in_nres[i]), name=f"held_lut{i}")
                              for i in range(SQ)])
            started_pre, held_pre, room_pre = Signal(name="started_pre"), Signal(SQ, name="held_pre"), Signal(name="room_pre")
            with m.If(adv_at(LS, 1)):
                m.d.sync += [
                    started_pre.eq(ram_res.started | same_pre2),
                    held_pre.eq(held_next),
                    room_pre.eq(Mux(same_pre2, Mux(do_free, room1, room0), has_room(ram_res.nres))),
                ]
            slot_pre, slot1h_pre = Signal(g.sb, name="slot_pre"), Signal(SQ, name="slot1h_pre")
            src_two = Signal()
            m.d.comb += src_two.eq(x_pre2.fwd & v[LS] & (x.tag == x_pre2.fwd_tag))
            slot_pre2 = Signal(g.sb)
            m.d.comb += [f_slot_rd.addr.eq(x_pre2.fwd_tag),
                         slot_pre2.eq(Mux(x_pre2.fwd, f_slot_rd.data, slot_m[LS - 2]))]
            with m.If(adv_at(LS, 1)):
                m.d.sync += [slot_pre.eq(Mux(src_two, slot_after, slot_pre2)),
                             slot1h_pre.eq(Mux(src_two, slot1h_after, Const(1, SQ) << slot_pre2))]
            ram_res_pre = Signal()
            m.d.comb += ram_res_pre.eq(started_pre & ((held_pre & slot1h_pre) != 0))
            src_here = Signal()         # this stage holds the record's forwarding source
            # (x_pre.fwd & v[LS] & (x.tag == x_pre.fwd_tag), registered as the records move, as
            # same_pre: the tag compare was in front of resident with taken's row ANDs, 9.71 ns)
            with m.If(adv_at(LS, 1)):
                m.d.sync += src_here.eq(r[LS - 2].fwd & v[LS - 1] & (r[LS - 1].tag == r[LS - 2].fwd_tag))
            # "taken": this stage's event places another position in that slot. Only an eviction
            # gives a held slot to another position: a free slot is not held (i >= nres), and a
            # hit keeps the slot's position (a record of that entry forwards from the hit's event,
            # src_here). So the slot is taken iff same_pre & do_evict & (first & slot1h_pre) != 0,
            # the victim's one-hot against the record's: an AND-OR of cells (and_or_lut4), and
            # the residency in one more, from two values made from registers alone (plain logic
            # put four LUT levels behind first's cells and a wide mux after them: first_r →
            # taken → resident was 10.38 ns, the bench's critical path at 5ae6e23)
            res_keep = Signal(attrs={"keep": 1})    # resident unless taken
            res_kill = Signal(attrs={"keep": 1})    # taking the slot clears it
            m.d.comb += [res_keep.eq(Mux(src_here, placed | pf_noop, ram_res_pre)),
                         res_kill.eq(~src_here & ram_res_pre & same_pre & do_evict)]
            taken_or = and_or_lut4(m, platform, [(first_r[i], slot1h_pre[i]) for i in range(SQ)], "taken")
            res_next = lut4(m, platform, lambda t0, t1, kill, keep: keep and not (kill and (t0 or t1)),
                            (taken_or[0], taken_or[1] if len(taken_or) > 1 else Const(0, 1), res_kill, res_keep),
                            name="res_lut")
            # the order is not empty after this stage's change (lst as list_with_change makes
            # it for snap_ls, without waiting for the mask): a slot taken by a position outside
            # the pinned range is in it; a pinned one leaves its slot X out of it, where X is the
            # hit's slot, a free slot (never in the order) or the victim (first: in the order,
            # which is then empty unless it held two slots or more). Without this stage's change
            # (another queue, or nothing placed) it is the RAM's word. (This stage's queue's word
            # in the RAM is this stage's own before its change: lst is the RAM's lst when same_pre.)
            rd_lst = ls_word.lst
            rd_any, rd_two = Signal(name="rd_any"), Signal(name="rd_two")
            any_two = _any_and_two([rd_lst[i] for i in range(SQ)])
            m.d.comb += [rd_any.eq(any_two[0]), rd_two.eq(any_two[1])]
            vic_any_next = Mux(same_pre & placed,
                               ~pinned | Mux(hit, (rd_lst & ~slot1h_ls) != 0, Mux(do_free, rd_any, rd_two)),
                               rd_any)
            with m.If(adv_at(LS, 1)):
                m.d.sync += [
                    vic_any_ls.eq(vic_any_next),
                    free_ls.eq(Mux(same_pre, Mux(do_free, room1, room0), room_pre)),
                    res_ls.eq(res_next),
                    slot_ls.eq(Mux(src_here, slot_after, slot_pre)),
                    slot1h_ls.eq(Mux(src_here, slot1h_after, slot1h_pre)),
                ]

        # -- victim request answer
        locked = (self.decode_lock >> x.q)[0]

        # ------------------------------------------------------------ out: outputs
        # The head's outputs still to be given, as flip-flops (set as a record loads, cleared as
        # its output is taken): each valid is a flip-flop and the head's leaving one LUT level
        # of them and the readies (also flip-flops on the board). With "needed" decoded from the
        # record's kind and a "done" flag beside it, wr_done → head_go → the 114-load enable →
        # wr_done was 9.08 ns in the board build of b6c0a0b.
        dec_pend, wr_pend, vr_pend = Signal(name="dec_pend"), Signal(name="wr_pend"), Signal(name="vr_pend")
        res_ema = Signal(S.SCORE_BITS)
        out = Signal(g.decision_layout())
        vout = Signal(g.vresp_layout())

        def pending(rec, noop):
            """(decision, metadata write, victim answer) a record ``rec`` in the head needs."""
            return Cat((rec.kind == K_EVENT) | (rec.kind == K_ERROR), (rec.kind == K_EVENT) & ~noop,
                       (rec.kind == K_VREQ) | (rec.kind == K_VERR))
        m.d.comb += [
            self.decision.valid.eq(dec_pend),
            self.decision.payload.eq(out),
            self.meta_wr.valid.eq(wr_pend),
            self.meta_wr.payload.addr.eq(Cat(r_out.position, r_out.q)),
            self.meta_wr.payload.wdata.eq(Cat(res_ema, r_out.step, res_slot.as_unsigned()[:T.SLOT_BITS],
                                              Const(0, T.SLOT_BITS - g.sb) if g.sb < T.SLOT_BITS else Const(0, 0))),
            self.victim_resp.valid.eq(vr_pend),
            self.victim_resp.payload.eq(vout),
        ]
        # (all three are low while the head is empty, so outs_taken is 1 then)
        outs_taken = ((~dec_pend | self.decision.ready) & (~wr_pend | self.meta_wr.ready) &
                      (~vr_pend | self.victim_resp.ready))
        # The output stage is a two-entry queue: the output register (the head) and a skid
        # register behind it. The pipeline advances while the skid register is empty (adv6, a
        # register), not on this cycle's readies: the advance fans out to every stage register
        # and RAM write enable, so it must start at a flip-flop. A record that arrives while the
        # head stays waits in the skid register; the head takes it when it leaves.
        head_go = Signal()              # the head's outputs are all taken: it leaves
        m.d.comb += head_go.eq(v_out & outs_taken)
        sk_v = Signal()
        sk_r = Signal(rlay)
        sk_slot = Signal(g.sb)
        sk_ema = Signal(S.SCORE_BITS)
        sk_pend = Signal(3)             # pending() of the skid register's record
        sk_out = Signal(g.decision_layout())
        sk_vout = Signal(g.vresp_layout())
        m.d.comb += adv6.eq(~sk_v)
        bump("mem_wait_cycles", self.meta_wr.valid & ~self.meta_wr.ready)
        # the record leaves: its metadata word is written, younger reads will see it
        m.d.comb += [retire.eq(head_go), retire_tag.eq(r_out.tag)]
        load_head, load_skid, from_skid = Signal(name="load_head"), Signal(name="load_skid"), Signal(name="from_skid")
        x_out_v = v[LS] & ~splice       # the list stage's record goes out (to the head or the skid register)
        x_pend = pending(x, pf_noop | x.lk)
        # (~v_out | head_go is outs_taken: nothing is pending while the head is empty)
        m.d.comb += [load_head.eq(adv6 & outs_taken),
                     load_skid.eq(adv6 & v_out & ~head_go & x_out_v),
                     from_skid.eq(~adv6 & head_go)]
        with m.If(load_head):
            m.d.sync += Cat(dec_pend, wr_pend, vr_pend).eq(Mux(x_out_v, x_pend, 0))
        with m.Elif(from_skid):
            m.d.sync += Cat(dec_pend, wr_pend, vr_pend).eq(sk_pend)
        with m.Else():
            # (the victim answer is the head's only output when pending, so its being taken
            # is head_go: it is never cleared here)
            m.d.sync += [dec_pend.eq(dec_pend & ~self.decision.ready),
                         wr_pend.eq(wr_pend & ~self.meta_wr.ready)]
        err = x.kind == K_ERROR
        dl = g.decision_layout()
        o_err = pack(dl, layer=x.layer, head=x.head, position=x.position, error=Const(1, 1), prefetch=x.pf,
                     lookup=x.lk)
        vl = g.vresp_layout()
        answer = started & vic_any
        vr_answers = (x.kind == K_VREQ) & ~locked & answer
        o_lk = pack(dl, layer=x.layer, head=x.head, position=x.position, hit=resident,
                    slot=Mux(resident, slot_src, 0), lookup=Const(1, 1))
        late = None                     # the decision's fields ORed in after the kind's choice
        late_cells = {}                 # ... per bit of the decision: the cell outputs ORed in
        if self.select == "ring":
            ev_victim_pos, ev_slot = Mux(do_evict, vic_pos, 0), Mux(no_victim, 0, s_ins)
            vr_victim = Mux(vr_answers, vic_pos, 0)
        else:
            # The fields that wait for the victim (first) are ORed in after the
            # choice of the record's kind, which is made from registers alone: the victim's
            # position is first's AND-OR over the positions, each zeroed ahead (from registers)
            # unless this record reports a victim, and its slot is the victim's index ORed with
            # the other cases' slot (first is all zeros without an evictable slot, where both
            # are 0). With the choice after the AND-OR, first → decision was 9.55 ns at 9a6936e.
            # ev_victim: this record's decision reports the victim. Its record-kind terms are
            # registered as the record enters the stage, so ev_victim is one LUT of registers and
            # each position's zeroing one LUT with it (kept, ev_victim was two LUT levels and a
            # route in front of the zeroing: r18 → ev_victim → the AND-OR → out, 9.61 ns)
            ev_kind_ok = Signal()                   # == ~err & ~x.lk
            with m.If(adv_at(LS, 1)):
                m.d.sync += ev_kind_ok.eq((r[LS - 1].kind != K_ERROR) & ~r[LS - 1].lk)
            ev_victim = Signal()
            m.d.comb += ev_victim.eq(evicting & ev_kind_ok)
            # Each late bit is an AND-OR of cells (and_or_lut4) over first_o and a value zeroed
            # from registers, ORed into the output register's input by synthesis (plain logic
            # put three LUT levels and a route behind first_o's cells: 9.36 ns at 5ae6e23).
            ev_victim_pos, ev_slot = 0, Mux(evicting, 0, Mux(resident, slot_src, nres[:g.sb]))

            def late_cells_of(values, name):
                """Per bit b of values[i] (first_o's slot i), the cell outputs whose OR is the bit."""
                return [and_or_lut4(m, platform, [(first_o[i], v[b]) for i, v in enumerate(values)], f"{name}{b}")
                        for b in range(len(values[0]))]

            def ored(cells):
                return Cat(*[Cat(*c).any() for c in cells])
            # (the victim's index, bit b: first_o's slots with bit b set, if reporting a victim)
            vic_cells = late_cells_of([Mux(ev_victim, p, 0) for p in mpos], "ev_victim_or")
            slot_cells = [and_or_lut4(m, platform, [(first_o[i], ev_victim) for i in range(SQ) if i >> b & 1],
                                      f"ev_slot_or{b}") for b in range(g.sb)]
            late = pack(dl, victim=ored(vic_cells), slot=ored(slot_cells))
            late_cells = {**{dl["victim"].offset + b: c for b, c in enumerate(vic_cells)},
                          **{dl["slot"].offset + b: c for b, c in enumerate(slot_cells)}}
            vr_take = Signal(attrs={"keep": 1})
            m.d.comb += vr_take.eq((x.kind == K_VREQ) & ~locked & started)
            vr_victim = ored(late_cells_of([Mux(vr_take, p, 0) for p in mpos], "vr_victim_or"))
        o_ev = pack(dl, layer=x.layer, head=x.head, position=x.position, hit=hit,
                    inserted=do_free | do_evict, victim_valid=do_evict, no_victim=no_victim,
                    victim=ev_victim_pos, slot=ev_slot, prefetch=x.pf)
        new_out_base = Mux(err, o_err, Mux(x.lk, o_lk, o_ev))
        new_out = new_out_base
        if late is not None:
            new_out = new_out | late
        new_vout = pack(vl, layer=x.layer, head=x.head, error=x.kind == K_VERR,
                        locked=(x.kind == K_VREQ) & locked,
                        valid=vr_answers,
                        victim=vr_victim)
        with m.If(load_head):
            m.d.sync += [v_out.eq(x_out_v), r_out.eq(x), res_slot.eq(slot_after), res_ema.eq(ema_n[LS]),
                         vout.eq(new_vout)]
        with m.Elif(from_skid):
            m.d.sync += [v_out.eq(1), r_out.eq(sk_r), res_slot.eq(sk_slot), res_ema.eq(sk_ema),
                         vout.eq(sk_vout)]
        if not late_cells:
            with m.If(load_head):
                m.d.sync += out.eq(new_out)
            with m.Elif(from_skid):
                m.d.sync += out.eq(sk_out)
        else:
            # the late bits' cells into one LUT each with the rest of the output's choice, made
            # first (out_rest): as `load_head ? base | late : hold` synthesis put two LUT levels
            # behind the cells (first_o → the victim's cells → out, 9.58 ns, the worst path of a board
            # build at 443a176)
            out_bits = out.as_value()
            out_rest = Signal(len(out_bits), attrs={"keep": 1})
            m.d.comb += out_rest.eq(Mux(load_head, new_out_base, Mux(from_skid, sk_out.as_value(), out_bits)))
            out_next = Cat(*[lut4(m, platform, lambda c0, c1, ld, e: e or (ld and (c0 or c1)),
                                  (late_cells[k][0], late_cells[k][1] if len(late_cells[k]) > 1 else Const(0, 1),
                                   load_head, out_rest[k]), name=f"out_late{k}")
                             if k in late_cells else out_rest[k] for k in range(len(out_bits))])
            m.d.sync += out.eq(out_next)
        # the skid register's content copies the stage while the register is empty (unused then),
        # so its ~150 enables are adv6, a flip-flop, not the output's readies through head_go
        with m.If(adv6):
            m.d.sync += [sk_r.eq(x), sk_slot.eq(slot_after), sk_ema.eq(ema_n[LS]),
                         sk_pend.eq(x_pend), sk_out.eq(new_out), sk_vout.eq(new_vout)]
        with m.If(load_skid):
            m.d.sync += sk_v.eq(1)
        with m.Elif(from_skid):
            m.d.sync += sk_v.eq(0)
        # adv_c[k] == ~sk_v (above): cleared as the skid register loads, set as it empties
        m.d.sync += [c.eq(lut4(m, platform, lambda ld, fr, q: not ld and (fr or q), (load_skid, from_skid, c),
                               name=f"adv_c{k}_next")) for k, c in enumerate(adv_c)]
        is_vr = v[LS] & ((x.kind == K_VREQ) | (x.kind == K_VERR))
        bump_late("victim_none", adv6 & is_vr & ((x.kind == K_VERR) | locked | ~(started & vic_any)))
        bump_late("victim_locked", adv6 & is_vr & (x.kind == K_VREQ) & locked)

        return m


#: slots per queue of the full-geometry top that `make lint` checks (see docs/tracker.md, "Sizes")
FULL_MAX_BUDGET = 256


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks: the test geometry (with
    the ring, and with the matrix selection at 16 slots per queue, as on the board) and the full
    Llama-70B one (80 layers x 8 KV heads x 131,072 positions, 128-bucket ring, FULL_MAX_BUDGET
    slots per queue on chip)."""
    return {"tracker": lambda: Tracker(2, 2, 64, 128),
            "tracker_matrix": lambda: Tracker(2, 2, 64, 128, max_budget=16, select="matrix"),
            "tracker_full": lambda: Tracker(80, 8, 131072, 128, max_budget=FULL_MAX_BUDGET)}
