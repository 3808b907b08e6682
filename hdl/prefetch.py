"""RoPE-aware prefetch engine: on a read of position P, fetch what is missing of [P - W, P + W].

Golden model (cycle-accurate) and the prefetch rule: :mod:`cxlkv.models.prefetch`.
Documentation: ``docs/prefetch.md``.

One access per clock in (``acc``). A triggering read becomes a *window request*
{queue, P, cursor, hi} in a bounded queue of ``depth`` slots kept in age order
(slot 0 oldest). Each cycle a round-robin pointer serves one slot: its cursor
position goes to the lookup register C0 and the cursor advances; a finished
request leaves its slot. C0 is offered on the ``chk`` stream (a residency lookup
of the tracker's metadata); up to ``lookups`` lookups await their answers, which
come back on ``rsp`` in request order after any latency (at least one clock).
An answered candidate is dropped if it is resident, in flight or waiting to
issue; otherwise it waits in the issue register
for a rate-limit token and a free tag, and goes to the tier mover as
``fetch`` {queue, pos, tag}. The mover answers ``cpl`` {tag}; the engine frees
the tag and forwards ``ins`` {queue, pos} to the tracker (which inserts with the
policy's victim choice).

``idle`` = no request, no candidate, no lookup, nothing waiting to issue or in flight (the
controller top's exact mode waits for it between demand events).

Pipeline: slot queue -> C0 (lookup port) -> lookup queue (answers) -> S2 (issue)
-> in-flight table.
"""
from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from cxlkv.hdl._params import refusals, require_int
from cxlkv.models import prefetch as M


def access_layout(queue_bits, pos_width):
    """One access as the tracker sees it, with its hit/miss decision."""
    return data.StructLayout({"queue": queue_bits, "pos": pos_width, "write": 1, "hit": 1})


def fetch_layout(queue_bits, pos_width, tag_bits):
    return data.StructLayout({"queue": queue_bits, "pos": pos_width, "tag": tag_bits})


def lookup_layout(queue_bits, pos_width):
    return data.StructLayout({"queue": queue_bits, "pos": pos_width})


def answer_layout():
    return data.StructLayout({"resident": 1})


def completion_layout(tag_bits):
    return data.StructLayout({"tag": tag_bits})


def insert_layout(queue_bits, pos_width):
    return data.StructLayout({"queue": queue_bits, "pos": pos_width})


class PrefetchEngine(wiring.Component):
    """See the module docstring; every counter wraps at ``counter_width`` bits."""

    def __init__(self, *, queue_bits=4, pos_width=16, depth=4, tags=4, lookups=4, counter_width=32):
        with refusals(self):
            if depth < 1 or tags < 1 or lookups < 1:
                raise ValueError("depth, tags and lookups must be at least 1")
            require_int(self, "queue_bits", queue_bits, 0)         # 0: one queue
            require_int(self, "pos_width", pos_width, 1)
            require_int(self, "counter_width", counter_width, 1)
        self.lookup_depth = lookups
        self.queue_bits = queue_bits
        self.pos_width = pos_width
        self.depth = depth
        self.tags = tags
        self.tag_bits = max(1, ceil_log2(tags))
        self.counter_width = counter_width
        members = {
            "window": In(M.WINDOW_BITS),
            "trigger_all": In(1),
            "overflow_stall": In(1),
            "rate_issues": In(M.RATE_ISSUES_BITS),
            "rate_period": In(M.RATE_PERIOD_BITS),
            "enable": In(1),
            "clear": In(1),
            "acc": In(stream.Signature(access_layout(queue_bits, pos_width))),
            "chk": Out(stream.Signature(lookup_layout(queue_bits, pos_width))),
            "rsp": In(stream.Signature(answer_layout())),
            "fetch": Out(stream.Signature(fetch_layout(queue_bits, pos_width, self.tag_bits))),
            "cpl": In(stream.Signature(completion_layout(self.tag_bits))),
            "ins": Out(stream.Signature(insert_layout(queue_bits, pos_width))),
            "pending": Out(range(depth + 1)),
            "idle": Out(1),
        }
        for name in M.COUNTERS:
            members[name] = Out(counter_width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        D, F, PW, QB = self.depth, self.tags, self.pos_width, self.queue_bits
        # room for P + W (the window is WINDOW_BITS wide, and may be wider than a position) and cursor + 2
        wide = max(PW, M.WINDOW_BITS) + 2

        def count(name, cond, by=1):
            ctr = getattr(self, name)
            with m.If(cond):
                m.d.sync += ctr.eq(ctr + by)

        # ---- per-queue newest position (async read, written on every accepted access)
        newest = Memory(shape=PW, depth=1 << QB, init=[])
        m.submodules.newest = newest
        nrd = newest.read_port(domain="comb")
        nwr = newest.write_port()

        # after reset (or a ``clear`` strobe) the table is zeroed, one queue per cycle,
        # while the access input is held off: a new session must not clip to old positions
        clear_idx = Signal(range((1 << QB) + 1))
        clearing = Signal()
        m.d.comb += clearing.eq(clear_idx != (1 << QB))
        with m.If(self.clear):
            m.d.sync += clear_idx.eq(0)
        with m.Elif(clearing):
            m.d.sync += clear_idx.eq(clear_idx + 1)

        # ---- request slots, age-ordered (slot 0 oldest)
        sq = [Signal(QB, name=f"slot{i}_queue") for i in range(D)]
        sp = [Signal(PW, name=f"slot{i}_pos") for i in range(D)]
        sc = [Signal(PW, name=f"slot{i}_cur") for i in range(D)]
        sh = [Signal(PW, name=f"slot{i}_hi") for i in range(D)]
        n = Signal(range(D + 1))
        rr = Signal(range(D))
        m.d.comb += self.pending.eq(n)

        # ---- pipeline registers and the in-flight table
        K = self.lookup_depth
        c0_valid, c0_q, c0_p = Signal(name="c0_valid"), Signal(QB, name="c0_q"), Signal(PW, name="c0_p")  # offered on the lookup port
        lq_q = [Signal(QB, name=f"lq{k}_queue") for k in range(K)]   # looked up, answer pending,
        lq_p = [Signal(PW, name=f"lq{k}_pos") for k in range(K)]     # oldest first
        lq_n = Signal(range(K + 1))
        s2_valid, s2_q, s2_p = Signal(name="s2_valid"), Signal(QB, name="s2_q"), Signal(PW, name="s2_p")
        tv = [Signal(name=f"tag{t}_valid") for t in range(F)]
        tq = [Signal(QB, name=f"tag{t}_queue") for t in range(F)]
        tp = [Signal(PW, name=f"tag{t}_pos") for t in range(F)]
        period_count = Signal(M.RATE_PERIOD_BITS)
        period_issued = Signal(M.RATE_ISSUES_BITS)

        # ---- issue stage (S2)
        token = Signal()
        m.d.comb += token.eq((self.rate_issues == 0) | (period_issued < self.rate_issues))
        free_any = Signal()
        lowest_free = Signal(self.tag_bits)
        for t in reversed(range(F)):                   # lowest free tag wins
            with m.If(~tv[t]):
                m.d.comb += [free_any.eq(1), lowest_free.eq(t)]
        # a fetch offered and not taken keeps its tag until taken (a completion can free a lower
        # one meanwhile): the payload stays stable while valid and not ready. The held tag stays
        # free, since only a taken fetch allocates one.
        held = Signal()
        held_tag = Signal(self.tag_bits)
        free_tag = Signal(self.tag_bits)
        m.d.comb += free_tag.eq(Mux(held, held_tag, lowest_free))
        fire = Signal()
        m.d.comb += [
            self.fetch.valid.eq(s2_valid & token & free_any),
            self.fetch.payload.queue.eq(s2_q),
            self.fetch.payload.pos.eq(s2_p),
            self.fetch.payload.tag.eq(free_tag),
            fire.eq(self.fetch.valid & self.fetch.ready),
        ]
        m.d.sync += [held.eq(self.fetch.valid & ~self.fetch.ready), held_tag.eq(free_tag)]
        with m.If(fire):
            for t in range(F):
                with m.If(free_tag == t):
                    m.d.sync += [tv[t].eq(1), tq[t].eq(s2_q), tp[t].eq(s2_p)]
        count("prefetches", fire)

        # ---- the lookup port: C0 offered while the lookup queue has room
        chk_fire = Signal()
        m.d.comb += [
            self.chk.valid.eq(c0_valid & (lq_n < K)),
            self.chk.payload.queue.eq(c0_q),
            self.chk.payload.pos.eq(c0_p),
            chk_fire.eq(self.chk.valid & self.chk.ready),
        ]

        # ---- answers, in lookup order: drop duplicates, else move the candidate to S2
        head_valid = Signal()
        m.d.comb += head_valid.eq(lq_n != 0)
        head_q, head_p = lq_q[0], lq_p[0]
        inflight_match = Signal()
        match_terms = [tv[t] & (tq[t] == head_q) & (tp[t] == head_p) for t in range(F)]
        match_terms.append(s2_valid & (s2_q == head_q) & (s2_p == head_p))
        m.d.comb += inflight_match.eq(_any(match_terms))
        resident = self.rsp.payload.resident
        dup_res = Signal()
        dup_inf = Signal()
        m.d.comb += [dup_res.eq(head_valid & resident), dup_inf.eq(head_valid & ~resident & inflight_match)]
        s2_free = Signal()
        rsp_fire = Signal()
        moves = Signal()
        m.d.comb += [
            s2_free.eq(~s2_valid | fire),
            self.rsp.ready.eq(~head_valid | dup_res | dup_inf | s2_free),
            rsp_fire.eq(self.rsp.valid & self.rsp.ready),
            moves.eq(rsp_fire & head_valid & ~dup_res & ~dup_inf),
        ]
        count("skip_resident", rsp_fire & dup_res)
        count("skip_inflight", rsp_fire & dup_inf)
        count("bad_responses", rsp_fire & ~head_valid)
        with m.If(moves):
            m.d.sync += [s2_valid.eq(1), s2_q.eq(head_q), s2_p.eq(head_p)]
        with m.Elif(fire):
            m.d.sync += s2_valid.eq(0)

        # the lookup queue: the answered one leaves (a shift), the one the port takes joins
        pop = Signal()
        m.d.comb += pop.eq(rsp_fire & head_valid)
        lq_rem = Signal(range(K + 1))
        m.d.comb += lq_rem.eq(lq_n - pop)
        m.d.sync += lq_n.eq(lq_rem + chk_fire)
        for k in range(K):
            with m.If(chk_fire & (lq_rem == k)):
                m.d.sync += [lq_q[k].eq(c0_q), lq_p[k].eq(c0_p)]
            if k < K - 1:
                with m.Elif(pop):
                    m.d.sync += [lq_q[k].eq(lq_q[k + 1]), lq_p[k].eq(lq_p[k + 1])]

        # ---- rate-limit period
        period_end = Signal()
        m.d.comb += period_end.eq((period_count >= self.rate_period - 1) | (self.rate_period == 0))
        with m.If(period_end):
            m.d.sync += [period_count.eq(0), period_issued.eq(0)]
        with m.Else():
            m.d.sync += period_count.eq(period_count + 1)
            with m.If(fire & (period_issued != (1 << M.RATE_ISSUES_BITS) - 1)):
                m.d.sync += period_issued.eq(period_issued + 1)

        # ---- serve slot rr: look its cursor up
        sel_q, sel_p, sel_c, sel_h = Signal(QB, name="sel_q"), Signal(PW, name="sel_p"), Signal(PW, name="sel_c"), Signal(PW, name="sel_h")
        for i in range(D):
            with m.If(rr == i):
                m.d.comb += [sel_q.eq(sq[i]), sel_p.eq(sp[i]), sel_c.eq(sc[i]), sel_h.eq(sh[i])]
        serve = Signal()
        m.d.comb += serve.eq((n != 0) & (~c0_valid | chk_fire))
        nxt1 = Signal(wide)
        nxt = Signal(wide)
        m.d.comb += [nxt1.eq(sel_c + 1), nxt.eq(Mux(nxt1 == sel_p, nxt1 + 1, nxt1))]
        finished = Signal()
        m.d.comb += finished.eq(serve & (nxt > sel_h))
        count("lookups", serve)
        with m.If(serve):
            m.d.sync += [c0_valid.eq(1), c0_q.eq(sel_q), c0_p.eq(sel_c)]
        with m.Elif(chk_fire):
            m.d.sync += c0_valid.eq(0)

        # ---- the access input: newest position, trigger, window bounds
        acc = self.acc.payload
        m.d.comb += self.acc.ready.eq(~clearing & ~(self.overflow_stall & (n == D)))
        accepted = Signal()
        m.d.comb += accepted.eq(self.acc.valid & self.acc.ready)
        count("stall_cycles", self.acc.valid & ~self.acc.ready)
        newest_now = Signal(PW)
        m.d.comb += [
            nrd.addr.eq(acc.queue),
            newest_now.eq(Mux(nrd.data > acc.pos, nrd.data, acc.pos)),
            nwr.addr.eq(Mux(clearing, clear_idx, acc.queue)),
            nwr.data.eq(Mux(clearing, 0, newest_now)),
            nwr.en.eq(accepted | clearing),
        ]
        lo = Signal(PW)
        hi = Signal(PW)
        p_plus_w = Signal(wide)
        m.d.comb += [
            lo.eq(Mux(acc.pos > self.window, acc.pos - self.window, 0)),
            p_plus_w.eq(acc.pos + self.window),
            hi.eq(Mux(p_plus_w < newest_now, p_plus_w, newest_now)),
        ]
        req = Signal()
        m.d.comb += req.eq(accepted & self.enable & ~acc.write & (self.trigger_all | ~acc.hit) &
                           (self.window != 0) & (hi > lo))
        count("requests", req)
        first = Signal(PW)
        m.d.comb += first.eq(Mux(lo == acc.pos, lo + 1, lo))

        # ---- slot bookkeeping: at most one removal (finished or dropped) and one append
        n_after = Signal(range(D + 1))
        m.d.comb += n_after.eq(n - finished)
        drop = Signal()
        m.d.comb += drop.eq(req & (n_after == D))
        count("drops", drop)
        rm_valid = Signal()
        rm_idx = Signal(range(D))
        m.d.comb += [rm_valid.eq(finished | drop), rm_idx.eq(Mux(finished, rr, 0))]
        n_rem = Signal(range(D + 1))
        m.d.comb += n_rem.eq(n_after - drop)
        m.d.sync += n.eq(n_rem + req)

        # slot contents after this cycle's cursor advance, then shifted over the removed one
        mc = [Signal(PW, name=f"slot{i}_cur_adv") for i in range(D)]
        for i in range(D):
            m.d.comb += mc[i].eq(Mux(serve & (rr == i), nxt, sc[i]))
        # positions the dropped (oldest) request still held, its cursor advance included
        drop_left = Signal(wide)
        m.d.comb += drop_left.eq(sh[0] - mc[0] + 1 - (sp[0] >= mc[0]))
        with m.If(drop):
            m.d.sync += self.drop_positions.eq(self.drop_positions + drop_left)
        for i in range(D):
            with m.If(req & (n_rem == i)):
                m.d.sync += [sq[i].eq(acc.queue), sp[i].eq(acc.pos), sc[i].eq(first), sh[i].eq(hi)]
            if i < D - 1:       # the last slot has nothing above it: after a removal it is empty
                with m.Elif(rm_valid & (rm_idx <= i)):
                    m.d.sync += [sq[i].eq(sq[i + 1]), sp[i].eq(sp[i + 1]), sc[i].eq(mc[i + 1]),
                                 sh[i].eq(sh[i + 1])]
            with m.Else():
                m.d.sync += sc[i].eq(mc[i])

        # round-robin pointer: the slot after the one served (the same index if it left)
        base = Signal(range(D + 1))
        m.d.comb += base.eq(Mux(serve & ~finished, rr + 1, rr))
        base2 = Signal(range(D + 1))
        m.d.comb += base2.eq(Mux(drop & (base != 0), base - 1, base))
        m.d.sync += rr.eq(Mux(base2 >= n_rem, 0, base2))

        # ---- completions: free the tag, forward the insert to the tracker
        cpl_tag = self.cpl.payload.tag
        ent_valid, ent_q, ent_p = Signal(name="ent_valid"), Signal(QB, name="ent_q"), Signal(PW, name="ent_p")
        for t in range(F):
            with m.If(cpl_tag == t):
                m.d.comb += [ent_valid.eq(tv[t]), ent_q.eq(tq[t]), ent_p.eq(tp[t])]
        m.d.comb += [
            self.ins.valid.eq(self.cpl.valid & ent_valid),
            self.ins.payload.queue.eq(ent_q),
            self.ins.payload.pos.eq(ent_p),
            self.cpl.ready.eq(self.ins.ready | ~ent_valid),
        ]
        cpl_done = Signal()
        m.d.comb += cpl_done.eq(self.cpl.valid & self.cpl.ready)
        with m.If(cpl_done & ent_valid):
            for t in range(F):
                with m.If(cpl_tag == t):
                    m.d.sync += tv[t].eq(0)
        count("inserts", cpl_done & ent_valid)
        count("bad_completions", cpl_done & ~ent_valid)

        # ---- idle: no request, no candidate, no lookup, nothing waiting to issue or in flight
        # (an insert waiting on ``ins`` holds its tag: not idle until the tracker took it)
        m.d.comb += self.idle.eq((n == 0) & ~c0_valid & (lq_n == 0) & ~s2_valid & ~_any(tv))
        return m


def _any(terms):
    out = terms[0]
    for t in terms[1:]:
        out = out | t
    return out


def verilog_tops():
    """Configurations `make verilog` generates and `make lint` checks."""
    return {"prefetch": lambda: PrefetchEngine(queue_bits=10, pos_width=20, depth=8, tags=8, lookups=4)}
