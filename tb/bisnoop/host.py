"""A host-side cache for the Back-Invalidate benches: MESI lines that answer BISnp.

The host holds lines in M/E/S/I, issues its own reads (shared or exclusive),
writes (silent upgrade of E to M, then dirty writebacks), clean evictions, and
answers the device's BISnp, writing dirty data back first (MemWr, waiting for its
Cmp before the BIRsp). When a BISnp hits a line with one of its own requests
still waiting for Cmp, it follows the conflict flow of
``../shared/reference/cxl-back-invalidate.md``: it sends BIConflict and waits; if
BIConflictAck comes before the Cmp, the request is not yet ordered and the snoop
is answered from the current state; if the Cmp comes first, the request finishes
and the snoop is answered from the new state.

It also checks the device, all the time:

* every MemData it receives equals the newest value the host ever wrote to the line
  (``truth``): the device's copy is never stale for a reader;
* every line the policy gets ``Released`` carries ``truth`` and the host holds no copy;
* the device's filter always covers the host's real state (:meth:`check_filter`).

Optional (the defaults keep the behaviour above): ``data_check(line, data, truth)``
replaces the MemData comparison (e.g. a device that stores lines quantized, or a
scoreboard that records mismatches instead of raising); ``early_answer=True`` answers
a snoop that conflicts with a request whose Cmp has come but whose MemData has not,
at the BIConflictAck, from the state the Cmp granted (a device whose data can wait for
that snoop's answer needs it); ``new_value(line)`` makes the host's store values; ``tags``
(first, last) the M2S tags it uses, so that several hosts can share a device (on disjoint lines);
``partial_writes=True`` makes half the stores touch random bytes only and writes back a line
partly written since its last writeback with MemWrPtl: byte enables on its dirty lanes (plus
random clean ones, which hold what memory holds), random bytes in the lanes left off. The
host's own copy and ``truth`` merge the stored lanes, so every later MemData, Released line
and the final memory check hold only if the device merged exactly the enabled lanes.

The class is transport free: ``issue()`` and ``receive()`` return the M2S messages to
send, as ``(channel, fields)`` with the integer fields of ``cxlkv.models.bisnoop``.
"""
from __future__ import annotations

from dataclasses import dataclass

from cxlkv.models import bisnoop as M

I, S, E, MOD = "I", "S", "E", "M"
#: the filter state that covers each host state
COVER = {I: M.HI, S: M.HS, E: M.HA, MOD: M.HA}


class HostCheckError(AssertionError):
    pass


def _lanes(be, dw):
    """The bit mask of the byte lanes a byte-enable value selects."""
    return sum(0xFF << (8 * b) for b in range(dw // 8) if be >> b & 1)


@dataclass
class Pending:
    kind: str                 # "rd_s", "rd_a", "inv_a", "clnevct", "wb_i", "wb_s", "wb_a"
    tag: int
    need_data: bool
    got_cmp: bool = False
    got_data: bool = False
    grant: int = -1
    data: int = 0
    for_snoop: bool = False   # a writeback answering a snoop: BIRsp follows its Cmp
    early: bool = False       # its grant is applied (a snoop was answered from it); data to come


@dataclass
class SnoopWait:
    bitag: int
    opcode: int
    conflict_tag: int | None = None
    acked: bool = False       # BIConflictAck arrived
    after_request: bool = False  # the Cmp came first: answer when the request is complete
    answering: bool = False   # writeback sent, BIRsp after its Cmp


class HostCache:
    def __init__(self, lines, data_width, rng, bi_id=0, data_check=None, early_answer=False, new_value=None,
                 tags=(1, 0xFFFF), partial_writes=False):
        self.lines, self.dw, self.rng, self.bi_id = lines, data_width, rng, bi_id
        self.tag_first, self.tag_last = tags          # the M2S tags this host uses (several hosts on one device)
        self.data_check, self.early_answer, self.new_value = data_check, early_answer, new_value
        self.partial_writes = partial_writes
        self.all_lanes = (1 << data_width // 8) - 1
        self.dirty = [0] * lines            # lanes stored since the line was last written back
        self.state = [I] * lines
        self.data = [0] * lines
        self.truth = [0] * lines            # newest value the host wrote (memory starts at 0)
        self.pending: dict[int, Pending] = {}
        self.snoops: dict[int, SnoopWait] = {}
        self.by_tag: dict[int, int] = {}    # M2S tag -> line
        self.conflicts: dict[int, int] = {} # BIConflict tag -> line, until its BIConflictAck
        self.next_tag = self.tag_first
        self.stats = {"reads": 0, "writes": 0, "writebacks": 0, "clean_evicts": 0, "snoops": 0,
                      "conflicts": 0, "conflict_ack_first": 0, "conflict_cmp_first": 0, "released": 0,
                      "early_answers": 0, "partial_writes": 0}

    # -- helpers ---------------------------------------------------------------------------
    def _new_tag(self):
        t = self.next_tag
        self.next_tag = t + 1 if t < self.tag_last else self.tag_first
        return t

    def owns_tag(self, tag):
        return self.tag_first <= tag <= self.tag_last

    def _tag(self, line):
        t = self._new_tag()
        self.by_tag[t] = line
        return t

    def _req(self, line, opcode, mv, kind, need_data):
        t = self._tag(line)
        self.pending[line] = Pending(kind, t, need_data)
        return ("m2s_req", {"opcode": opcode, "snp_type": 0, "meta_field": M.MF_META0, "meta_value": mv,
                            "tag": t, "addr": line})

    def _wr(self, line, mv, kind, for_snoop=False):
        t = self._tag(line)
        self.pending[line] = Pending(kind, t, False, for_snoop=for_snoop)
        self.stats["writebacks"] += 1
        op, be, data = M.MEM_WR, self.all_lanes, self.data[line]
        if self.partial_writes and self.dirty[line] != self.all_lanes:
            # the dirty lanes must go; clean ones may (memory holds the same bytes); the lanes left
            # off carry random bytes, so a device that writes them (or skips an enabled one) is seen
            be = (self.dirty[line] | self.rng.getrandbits(self.dw // 8)) or self.all_lanes
            lanes = _lanes(be, self.dw)
            op, data = M.MEM_WR_PTL, (data & lanes) | (self.rng.getrandbits(self.dw) & ~lanes)
            self.stats["partial_writes"] += 1
        self.dirty[line] = 0
        return ("m2s_rwd", {"opcode": op, "snp_type": 0, "meta_field": M.MF_META0, "meta_value": mv,
                            "tag": t, "addr": line, "be": be, "data": data})

    def busy(self, line):
        return line in self.pending or line in self.snoops

    # -- the host's own traffic ----------------------------------------------------------------
    def issue(self, line=None):
        """Maybe start one operation on a random (or given) idle line; returns messages."""
        rng = self.rng
        line = rng.randrange(self.lines) if line is None else line
        if self.busy(line):
            return []
        st = self.state[line]
        r = rng.random()
        if st == I:
            self.stats["reads"] += 1
            if r < 0.5:
                return [self._req(line, M.MEM_RD, M.MV_S, "rd_s", True)]
            if r < 0.9:
                return [self._req(line, M.MEM_RD, M.MV_A, "rd_a", True)]
            return [self._req(line, M.MEM_RD_DATA, M.MV_S, "rd_s", True)]
        if st == S:
            if r < 0.4:
                self.state[line] = I                       # drop before telling the device
                self.stats["clean_evicts"] += 1
                return [self._req(line, M.MEM_CLN_EVCT, M.MV_I, "clnevct", False)]
            if r < 0.7:
                return [self._req(line, M.MEM_INV, M.MV_A, "inv_a", False)]   # upgrade without data
            return []
        if st in (E, MOD):
            if r < 0.5:                                    # store: silent upgrade
                v = rng.getrandbits(self.dw) if self.new_value is None else self.new_value(line)
                stored = self.all_lanes
                if self.partial_writes and rng.random() < 0.5:     # some bytes only: merged into the line
                    stored = rng.randrange(1, self.all_lanes + 1)
                    lanes = _lanes(stored, self.dw)
                    v = (v & lanes) | (self.data[line] & ~lanes)
                self.dirty[line] |= stored
                self.state[line], self.data[line], self.truth[line] = MOD, v, v
                self.stats["writes"] += 1
                return []
            if st == E and r < 0.7:
                self.state[line] = I
                self.stats["clean_evicts"] += 1
                return [self._req(line, M.MEM_CLN_EVCT, M.MV_I, "clnevct", False)]
            if st == MOD and r < 0.7:
                self.state[line] = I
                return [self._wr(line, M.MV_I, "wb_i")]
            if st == MOD and r < 0.8:
                self.state[line] = S
                return [self._wr(line, M.MV_S, "wb_s")]
        return []

    def flush(self):
        """Write every dirty line back (end of a run)."""
        out = []
        for line in range(self.lines):
            if self.state[line] == MOD and not self.busy(line):
                self.state[line] = I
                out.append(self._wr(line, M.MV_I, "wb_i"))
        return out

    def read_back(self, line):
        """A MemRd that leaves the filter alone (MetaField NoOp): its MemData is checked against truth."""
        if self.busy(line):
            return []
        t = self._tag(line)
        self.pending[line] = Pending("rd_check", t, True)
        return [("m2s_req", {"opcode": M.MEM_RD, "snp_type": 0, "meta_field": M.MF_NOOP, "meta_value": 0,
                             "tag": t, "addr": line})]

    # -- device messages -------------------------------------------------------------------------
    def receive(self, ch, m):
        if ch == "s2m_bisnp":
            return self._bisnp(m)
        if ch == "s2m_drs":
            line = self.by_tag.get(m["tag"])
            p = self.pending.get(line)
            if p is None or p.tag != m["tag"] or not p.need_data:
                raise HostCheckError(f"MemData with tag {m['tag']} matches no read")
            if m["opcode"] != M.MEM_DATA:
                raise HostCheckError(f"line {line}: read answered {m['opcode']} (MemData-NXM?)")
            if self.data_check is not None:
                self.data_check(line, m["data"], self.truth[line])
            elif m["data"] != self.truth[line]:
                raise HostCheckError(f"line {line}: MemData {m['data']:#x} but the newest write was "
                                     f"{self.truth[line]:#x}: stale data")
            p.got_data, p.data = True, m["data"]
            return self._maybe_complete(line)
        if ch == "s2m_ndr":
            if m["opcode"] == M.BI_CONFLICT_ACK:
                if m["tag"] not in self.conflicts:
                    raise HostCheckError(f"BIConflictAck tag {m['tag']} matches no BIConflict")
                line = self.conflicts.pop(m["tag"])
                sn = self.snoops.get(line)
                if sn is None or sn.conflict_tag != m["tag"]:
                    return []                                # Cmp came first: already answered
                sn.conflict_tag = None
                sn.acked = True
                p = self.pending.get(line)
                if p is not None and not p.got_cmp:              # not ordered yet: answer from now
                    self.stats["conflict_ack_first"] += 1
                    return self._answer(line)
                self.stats["conflict_cmp_first"] += 1           # ordered first: answer once it is done
                if p is not None:
                    if self.early_answer and p.need_data and not p.got_data:
                        if not p.early:                     # ordered first: its state now, data later
                            self._grant(line, p)
                        self.stats["early_answers"] += 1
                        return self._answer(line)
                    sn.after_request = True
                    return []
                return self._answer(line)
            line = self.by_tag.get(m["tag"])
            p = self.pending.get(line)
            if p is None or p.tag != m["tag"]:
                raise HostCheckError(f"{m['opcode']} with tag {m['tag']} matches no request")
            p.got_cmp, p.grant = True, m["opcode"]
            return self._maybe_complete(line)
        raise ValueError(ch)

    def _maybe_complete(self, line):
        p = self.pending[line]
        if not p.got_cmp or (p.need_data and not p.got_data):
            return []
        del self.pending[line]
        self.by_tag.pop(p.tag, None)
        out = []
        if p.early:                                          # state applied at the snoop's answer
            if self.state[line] != I:
                self.data[line] = p.data
        else:
            self._grant(line, p)
            if p.kind in ("rd_s", "rd_a"):
                self.data[line] = p.data
        sn = self.snoops.get(line)
        if sn is not None:
            if p.for_snoop:                                  # writeback done: now the BIRsp
                out.append(self._birsp(line, sn))
            elif sn.after_request:                           # Cmp came before the BIConflictAck
                out += self._answer(line)
        return out

    def _grant(self, line, p):
        """The host state a completed (or Cmp-ordered) request leaves; checks its grant."""
        p.early = True
        if p.kind == "rd_check" and p.grant != M.CMP:
            raise HostCheckError(f"line {line}: a MetaField NoOp read answered with NDR opcode {p.grant}")
        if p.kind in ("rd_s", "rd_a", "inv_a"):
            want = {"rd_s": M.CMP_S, "rd_a": M.CMP_E, "inv_a": M.CMP_E}[p.kind]
            if p.grant != want:
                raise HostCheckError(f"line {line}: {p.kind} answered with NDR opcode {p.grant}")
            if p.kind == "inv_a":
                self.state[line] = E                         # held S, data already current
            else:
                self.state[line] = S if p.kind == "rd_s" else E

    def _bisnp(self, m):
        line = m["addr"]
        self.stats["snoops"] += 1
        if line in self.snoops:
            raise HostCheckError(f"line {line}: second BISnp (BITag {m['bitag']}) while one is outstanding")
        sn = SnoopWait(m["bitag"], m["opcode"])
        self.snoops[line] = sn
        if line in self.pending:                             # our own request races the snoop
            self.stats["conflicts"] += 1
            t = self._new_tag()
            self.conflicts[t] = line
            sn.conflict_tag = t
            return [("m2s_rwd", {"opcode": M.BI_CONFLICT, "snp_type": 0, "meta_field": M.MF_NOOP, "meta_value": 0,
                                 "tag": t, "addr": line, "be": 0, "data": 0})]
        return self._answer(line)

    def _answer(self, line):
        sn = self.snoops[line]
        st = self.state[line]
        if sn.answering:
            return []
        if st == MOD:                                        # dirty: write back first
            sn.answering = True
            mv, nxt = {M.BISNP_INV: (M.MV_I, I), M.BISNP_DATA: (M.MV_S, S), M.BISNP_CUR: (M.MV_A, E)}[sn.opcode]
            self.state[line] = nxt
            return [self._wr(line, mv, "wb_snoop", for_snoop=True)]
        if sn.opcode == M.BISNP_INV or st == I:
            self.state[line] = I
        elif sn.opcode == M.BISNP_DATA:
            self.state[line] = S if self.rng.random() < 0.8 else I
        elif self.rng.random() < 0.2:                        # Cur: keep, or drop voluntarily
            self.state[line] = I
        return [self._birsp(line, sn)]

    def _birsp(self, line, sn):
        del self.snoops[line]
        op = {I: M.BIRSP_I, S: M.BIRSP_S, E: M.BIRSP_E, MOD: M.BIRSP_E}[self.state[line]]
        return ("m2s_birsp", {"opcode": op, "bi_id": self.bi_id, "bitag": sn.bitag, "low_addr": 0})

    # -- checks on the device's side ---------------------------------------------------------------
    def released(self, rsp, check_data=True):
        """A policy_rsp from the device: a Released line must be I here and carry the newest data
        (``check_data=False``: the state only, for a device whose policy answer carries no line)."""
        if rsp["op"] != M.R_RELEASED:
            return
        line = rsp["addr"]
        self.stats["released"] += 1
        if self.state[line] != I:
            raise HostCheckError(f"line {line} released while the host holds it {self.state[line]}")
        if check_data and rsp["data"] != self.truth[line]:
            raise HostCheckError(f"line {line} released with {rsp['data']:#x}, newest write {self.truth[line]:#x}: "
                                 "dirty data lost")

    def check_filter(self, filter_state, lines=None):
        """The device's filter covers the host's real state on every line (or on ``lines``; invariant 7)."""
        for line in (range(self.lines) if lines is None else lines):
            st = self.state[line]
            if filter_state[line] < COVER[st]:
                raise HostCheckError(f"line {line}: host holds {st} but the filter says "
                                     f"{M.STATE_NAMES[filter_state[line]]}")

    def check_memory(self, store):
        """After a flush: memory holds the newest write of every line."""
        for line in range(self.lines):
            if self.state[line] != MOD and store[line] != self.truth[line]:
                raise HostCheckError(f"line {line}: memory {store[line]:#x}, newest write {self.truth[line]:#x}")


def model_run(steps, rng, config=None, policy_rate=0.1, deliver=0.5, partial_writes=True):
    """Host cache against the golden model, message by message, with random delivery.

    Each S2M channel delivers its head with probability ``deliver`` per step and
    the device takes one pending input from a random channel, so snoops overtake
    completions and requests race snoops. Returns the host (stats) and the model.
    """
    from collections import deque
    cfg = dict(M.SCENARIO_CONFIG, **(config or {}))
    dev = M.BISnoopModel(**cfg)
    host = HostCache(cfg["lines"], cfg["data_width"], rng, partial_writes=partial_writes)
    m2s = {ch: deque() for ch in M.IN_CHANNELS}
    s2m = {ch: deque() for ch in ("s2m_ndr", "s2m_drs", "s2m_bisnp")}

    def send(msgs):
        for ch, msg in msgs:
            m2s[ch].append(msg)

    def device_step():
        ready = [ch for ch, q in m2s.items() if q and dev.can_accept(ch, q[0])]
        if not ready:
            return
        ch = rng.choice(ready)
        for och, msg in dev.accept(ch, m2s[ch].popleft()):
            if och == "policy_rsp":
                host.released(msg)
            elif och == "error":
                raise HostCheckError(f"device reported an error with a correct host: {msg}")
            else:
                s2m[och].append(msg)

    for step in range(steps):
        if rng.random() < 0.3:
            send(host.issue())
        if rng.random() < policy_rate:
            m2s["policy"].append({"op": rng.choice((M.P_EVICT, M.P_EVICT, M.P_DOWNGRADE, M.P_PROBE)),
                                  "addr": rng.randrange(cfg["lines"])})
        device_step()
        for ch, q in s2m.items():
            if q and rng.random() < deliver:
                send(host.receive(ch, q.popleft()))
        host.check_filter(dev.state)
    # drain: stop new work, deliver everything, flush dirty lines, deliver again
    for phase in range(2):
        if phase:
            send(host.flush())
        for _ in range(100_000):
            busy = any(m2s.values()) or any(s2m.values())
            if not busy:
                break
            device_step()
            for ch, q in s2m.items():
                if q:
                    send(host.receive(ch, q.popleft()))
            host.check_filter(dev.state)
    if host.pending or host.snoops or any(s.parked for s in dev.tags if s) or any(dev.tags):
        raise HostCheckError(f"run did not settle: host pending {host.pending}, snoops {host.snoops}, "
                             f"device tags {dev.tags}")
    host.check_memory(dev.store)
    return host, dev
