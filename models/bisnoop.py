"""CXL 3.0 Back-Invalidate snoop engine: the golden model, and the scenario format.

This is the one definition of what ``cxlkv.hdl.bisnoop.BISnoopEngine`` does, message
for message. Facts (messages, encodings, the state table, the conflict flow) come
from ``../shared/reference/cxl-back-invalidate.md``; ``docs/bisnoop.md`` lists the
design decisions that are inferred rather than read from the specification.

The model is transaction level: :meth:`BISnoopModel.accept` handles one input
message completely and returns the messages the device sends for it, in send
order. The RTL handles one *event* per clock in the same order (accepted input,
or internal work: replay of a parked request, a timeout report), so feeding the
model the RTL's accepted inputs in acceptance order reproduces every output
channel exactly.

Fields are the integers the RTL payloads carry (``cxlkv.hdl.bisnoop`` layouts);
:func:`parse_scenario` / :func:`format_output` translate the contract's JSON lines.
"""
from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field

from cxlkv.errors import CxlkvError

# -- encodings (reference: "Messages and encodings") --------------------------------------
REQ_OPS = {"MemInv": 0, "MemRd": 1, "MemRdData": 2, "MemRdFwd": 3, "MemWrFwd": 4,
           "MemSpecRd": 8, "MemInvNT": 9, "MemClnEvct": 10}
RWD_OPS = {"MemWr": 1, "MemWrPtl": 2, "BIConflict": 4}
BIRSP_OPS = {"BIRspI": 0, "BIRspS": 1, "BIRspE": 2, "BIRspIBlk": 4, "BIRspSBlk": 5, "BIRspEBlk": 6}
NDR_OPS = {"Cmp": 0, "Cmp-S": 1, "Cmp-E": 2, "BIConflictAck": 4}
DRS_OPS = {"MemData": 0, "MemData-NXM": 1}
BISNP_OPS = {"BISnpCur": 0, "BISnpData": 1, "BISnpInv": 2, "BISnpCurBlk": 4, "BISnpDataBlk": 5,
             "BISnpInvBlk": 6}
SNP_TYPES = {"NoOp": 0, "SnpData": 1, "SnpCur": 2, "SnpInv": 3}
META_FIELDS = {"Meta0State": 0, "NoOp": 3}
META_VALUES = {"I": 0, "A": 2, "S": 3}
# the policy's requests (device-internal channel) and the engine's answers to it
POLICY_OPS = {"evict": 0, "downgrade": 1, "probe": 2}
POLICY_RSP_OPS = {"Released": 0, "Done": 1, "Busy": 2, "Refused": 3}
#: error kinds; kind k is bit k-1 of the status register and counter k-1
ERROR_KINDS = {"unknown_tag": 1, "illegal_rsp": 2, "conflict_none": 3, "timeout": 4,
               "bad_addr": 5, "bad_msg": 6}
N_ERROR_KINDS = len(ERROR_KINDS)

MEM_INV, MEM_RD, MEM_RD_DATA, MEM_SPEC_RD, MEM_INV_NT, MEM_CLN_EVCT = 0, 1, 2, 8, 9, 10
MEM_WR, MEM_WR_PTL, BI_CONFLICT = 1, 2, 4
CMP, CMP_S, CMP_E, BI_CONFLICT_ACK = 0, 1, 2, 4
MEM_DATA, MEM_DATA_NXM = 0, 1
BISNP_CUR, BISNP_DATA, BISNP_INV = 0, 1, 2
BIRSP_I, BIRSP_S, BIRSP_E = 0, 1, 2
MF_META0, MF_NOOP = 0, 3
MV_I, MV_A, MV_S = 0, 2, 3
P_EVICT, P_DOWNGRADE, P_PROBE = 0, 1, 2
R_RELEASED, R_DONE, R_BUSY, R_REFUSED = 0, 1, 2, 3
E_UNKNOWN_TAG, E_ILLEGAL_RSP, E_CONFLICT_NONE, E_TIMEOUT, E_BAD_ADDR, E_BAD_MSG = 1, 2, 3, 4, 5, 6

# -- filter states (device's view of the host) ---------------------------------------------
HI, HS, HA = 0, 1, 2
STATE_NAMES = {HI: "I", HS: "S", HA: "A"}

#: snoop opcode for each policy request, and the BIRsp opcodes legal for each snoop (invariant 3)
POLICY_SNOOP = {P_EVICT: BISNP_INV, P_DOWNGRADE: BISNP_DATA, P_PROBE: BISNP_CUR}
LEGAL_RSP = {BISNP_INV: (BIRSP_I,), BISNP_DATA: (BIRSP_I, BIRSP_S), BISNP_CUR: (BIRSP_I, BIRSP_S, BIRSP_E)}
RSP_STATE = {BIRSP_I: HI, BIRSP_S: HS, BIRSP_E: HA}

# -- field widths (the RTL layouts use these) ----------------------------------------------
ADDR_BITS = 46          # Addr[51:6]: a 64-byte line address
TAG_BITS = 16           # M2S/S2M Tag
BI_ID_BITS = 12
BITAG_BITS = 12
COUNTER_BITS = 16       # error counters saturate
TIMEOUT_BITS = 16       # BIRsp timeout, in ticks of the time base
LINE_BYTES = 64

#: the output channels in the order messages of one event are sent (the RTL sends them in
#: the same clock; this is the order scenario output lists them in)
OUT_CHANNELS = ("s2m_drs", "s2m_ndr", "s2m_bisnp", "policy_rsp", "error")
IN_CHANNELS = ("m2s_req", "m2s_rwd", "m2s_birsp", "policy")

#: the configuration directed scenarios and ``cxlkv bisnoop run`` use (and the RTL bench builds)
SCENARIO_CONFIG = {"lines": 16, "n_tags": 4, "park_depth": 2, "data_width": 64}


@dataclass
class Snoop:
    """One BITag's outstanding snoop: the line's transient BIP state."""
    line: int
    opcode: int                  # BISnpInv / BISnpData / BISnpCur
    wb_seen: bool = False        # a MemWr arrived during BIP
    conflict_seen: bool = False  # a BIConflict arrived during BIP
    age: int = 0                 # ticks since the BISnp
    expired: bool = False        # timed out (reported once)
    draining: bool = False       # answered; its parked requests are replaying
    parked: deque = field(default_factory=deque)


class BISnoopModel:
    """The device side of Back-Invalidate: snoop filter, line store, BITag pool, parking.

    ``lines`` lines of ``data_width`` bits (a power of two, line ``i`` at byte address
    ``64 * i``); ``n_tags`` BITags; ``park_depth`` parked requests per outstanding snoop.
    ``timeout`` (ticks, 0 = off) and ``bi_id`` are run-time configuration.
    """

    def __init__(self, lines=16, n_tags=4, park_depth=2, data_width=64, timeout=0, bi_id=0):
        if lines < 1 or lines & (lines - 1):
            raise ValueError(f"lines must be a power of two, got {lines}")
        if not 1 <= n_tags <= 1 << BITAG_BITS:
            raise ValueError(f"n_tags must be in 1..{1 << BITAG_BITS}, got {n_tags}")
        if park_depth < 1:
            raise ValueError(f"park_depth must be >= 1, got {park_depth}")
        if data_width < 8 or data_width % 8:
            raise ValueError(f"data_width must be a multiple of 8, got {data_width}")
        self.lines, self.n_tags, self.park_depth, self.data_width = lines, n_tags, park_depth, data_width
        self.timeout, self.bi_id = timeout, bi_id
        self.state = [HI] * lines
        self.store = [0] * lines
        self.tags: list[Snoop | None] = [None] * n_tags
        self.counters = [0] * N_ERROR_KINDS
        self.status = 0

    # -- queries ---------------------------------------------------------------------------
    def snoop_of_line(self, line):
        """The BITag of the snoop outstanding on ``line``, or None (line not in BIP)."""
        for t, s in enumerate(self.tags):
            if s is not None and s.line == line and not s.draining:
                return t
        return None

    def can_accept(self, ch, msg) -> bool:
        """False only for a request to a line in BIP whose park queue is full (backpressure)."""
        if ch != "m2s_req":
            return True
        line = self._req_line(msg)
        if line is None:
            return True
        t = self.snoop_of_line(line)
        return t is None or len(self.tags[t].parked) < self.park_depth

    # -- helpers ---------------------------------------------------------------------------
    def _line(self, addr):
        return addr if addr < self.lines else None

    def _req_line(self, msg):
        """Line a request would park on: None when it is answered at once (error, spec read)."""
        if msg["opcode"] not in (MEM_INV, MEM_RD, MEM_RD_DATA, MEM_INV_NT, MEM_CLN_EVCT):
            return None
        if not self._meta_ok(msg):
            return None
        return self._line(msg["addr"])

    @staticmethod
    def _meta_ok(msg):
        return msg["meta_field"] == MF_NOOP or (msg["meta_field"] == MF_META0 and msg["meta_value"] in (MV_I, MV_A, MV_S))

    def _error(self, out, kind, addr=0, tag=0):
        self.counters[kind - 1] = min(self.counters[kind - 1] + 1, (1 << COUNTER_BITS) - 1)
        self.status |= 1 << (kind - 1)
        out.append(("error", {"kind": kind, "addr": addr, "tag": tag}))

    @staticmethod
    def _ndr(out, op, tag):
        out.append(("s2m_ndr", {"opcode": op, "meta_field": MF_NOOP, "meta_value": 0, "tag": tag}))

    @staticmethod
    def _drs(out, op, tag, data):
        out.append(("s2m_drs", {"opcode": op, "meta_field": MF_NOOP, "meta_value": 0, "tag": tag, "data": data}))

    def _policy_rsp(self, out, op, addr, state=HI, data=0):
        out.append(("policy_rsp", {"op": op, "state": state, "addr": addr, "data": data}))

    @staticmethod
    def _sorted(out):
        """One event's messages in the send order of OUT_CHANNELS (at most one per channel)."""
        return sorted(out, key=lambda m: OUT_CHANNELS.index(m[0]))

    # -- events ----------------------------------------------------------------------------
    def accept(self, ch, msg) -> list:
        """Handle one accepted input completely; returns [(channel, fields), ...] in send order.

        Includes the replay of requests parked behind a snoop that this input completes.
        """
        if not self.can_accept(ch, msg):
            raise ValueError("the device would not accept this request now (park queue full)")
        handler = {"m2s_req": self._req, "m2s_rwd": self._rwd, "m2s_birsp": self._birsp,
                   "policy": self._policy}[ch]
        out = []
        drain = handler(msg, out)
        events = [self._sorted(out)]
        if drain is not None:                    # replay parked requests, one event each
            snoop = self.tags[drain]
            while snoop.parked:
                ev = []
                self._req(snoop.parked.popleft(), ev)
                events.append(self._sorted(ev))
            self.tags[drain] = None
        return [m for ev in events for m in ev]

    def tick(self) -> list:
        """One pulse of the time base: age outstanding snoops, report new timeouts in tag order."""
        out = []
        if not self.timeout:
            return out
        for t, s in enumerate(self.tags):
            if s is not None and not s.expired:
                s.age += 1
                if s.age >= self.timeout:
                    s.expired = True
                    ev = []
                    self._error(ev, E_TIMEOUT, s.line, t)
                    out += ev
        return out

    def _req(self, msg, out):
        op, tag, addr = msg["opcode"], msg["tag"], msg["addr"]
        if op not in (MEM_INV, MEM_RD, MEM_RD_DATA, MEM_SPEC_RD, MEM_INV_NT, MEM_CLN_EVCT):
            self._error(out, E_BAD_MSG, addr, tag)
            self._ndr(out, CMP, tag)
            return None
        line = self._line(addr)
        if line is None:
            self._error(out, E_BAD_ADDR, addr, tag)
            if op in (MEM_RD, MEM_RD_DATA):
                self._drs(out, MEM_DATA_NXM, tag, 0)
            if op != MEM_SPEC_RD:
                self._ndr(out, CMP, tag)
            return None
        if op == MEM_SPEC_RD:                    # a hint without a completion: nothing to do
            return None
        if not self._meta_ok(msg):
            self._error(out, E_BAD_MSG, addr, tag)
            self._ndr(out, CMP, tag)
            return None
        t = self.snoop_of_line(line)
        if t is not None:                        # BIP: never complete inside it
            self.tags[t].parked.append(dict(msg))
            return None
        noop = msg["meta_field"] == MF_NOOP
        mv = msg["meta_value"]
        if op in (MEM_RD, MEM_RD_DATA):
            self._drs(out, MEM_DATA, tag, self.store[line])
            if noop or mv == MV_I:
                self._ndr(out, CMP, tag)
            else:
                self._grant_copy(out, tag, line, mv)
        elif op in (MEM_INV, MEM_INV_NT):
            if noop:
                self._ndr(out, CMP, tag)
            elif mv == MV_I:
                self._ndr(out, CMP, tag)
                self.state[line] = HI
            else:
                self._grant_copy(out, tag, line, mv)
        else:                                    # MemClnEvct: the host drops a clean copy
            self._ndr(out, CMP, tag)
            # only MetaValue I says it kept nothing; S / A (its state after the request) keeps the
            # filter covering the copy, NoOp declares nothing: lowering to HI would let a later
            # evict release the line without a snoop (invariant 7)
            if not noop:
                self.state[line] = {MV_I: HI, MV_S: HS, MV_A: HA}[mv]
        return None

    def _grant_copy(self, out, tag, line, mv):
        """A request's MetaValue S or A (any value but I): Cmp-S and the line HS, or Cmp-E and HA."""
        if mv == MV_S:
            self._ndr(out, CMP_S, tag)
            self.state[line] = HS
        else:
            self._ndr(out, CMP_E, tag)
            self.state[line] = HA

    def _write(self, line, msg):
        if msg["opcode"] == MEM_WR:
            self.store[line] = msg["data"]
        else:
            mask = 0
            for b in range(self.data_width // 8):
                if msg["be"] >> b & 1:
                    mask |= 0xFF << (8 * b)
            self.store[line] = (self.store[line] & ~mask) | (msg["data"] & mask)

    def _rwd(self, msg, out):
        op, tag, addr = msg["opcode"], msg["tag"], msg["addr"]
        line = self._line(addr)
        if op == BI_CONFLICT:
            t = None if line is None else self.snoop_of_line(line)
            if t is None:
                self._error(out, E_CONFLICT_NONE, addr, tag)
            else:
                self.tags[t].conflict_seen = True
            # after any Cmp already sent: outputs leave in event order, per channel
            self._ndr(out, BI_CONFLICT_ACK, tag)
            return None
        if op not in (MEM_WR, MEM_WR_PTL):
            self._error(out, E_BAD_MSG, addr, tag)
        elif line is None:
            self._error(out, E_BAD_ADDR, addr, tag)
        elif not self._meta_ok(msg):
            self._error(out, E_BAD_MSG, addr, tag)
        else:
            self._write(line, msg)
            t = self.snoop_of_line(line)
            if t is not None:                    # dirty writeback during BIP: absorbed, state kept
                self.tags[t].wb_seen = True
            elif msg["meta_field"] == MF_META0:
                self.state[line] = {MV_I: HI, MV_S: HS, MV_A: HA}[msg["meta_value"]]
        self._ndr(out, CMP, tag)
        return None

    def _birsp(self, msg, out):
        t, op = msg["bitag"], msg["opcode"]
        if msg["bi_id"] != self.bi_id or t >= self.n_tags or self.tags[t] is None:
            self._error(out, E_UNKNOWN_TAG, 0, t)
            return None
        s = self.tags[t]
        if op not in LEGAL_RSP[s.opcode]:
            self._error(out, E_ILLEGAL_RSP, s.line, t)   # the snoop stays outstanding
            return None
        self.state[s.line] = RSP_STATE[op]
        if s.opcode == BISNP_INV:                # BIRspI: the line is HI, release its latest data
            self._policy_rsp(out, R_RELEASED, s.line, HI, self.store[s.line])
        else:
            self._policy_rsp(out, R_DONE, s.line, self.state[s.line], self.store[s.line])
        if s.parked:
            s.draining = True
            return t                             # freed after the parked requests replay
        self.tags[t] = None
        return None

    def _policy(self, msg, out):
        op, addr = msg["op"], msg["addr"]
        line = self._line(addr)
        if op not in (P_EVICT, P_DOWNGRADE, P_PROBE):
            self._error(out, E_BAD_MSG, addr, 0)
            self._policy_rsp(out, R_REFUSED, addr)
            return None
        if line is None:
            self._error(out, E_BAD_ADDR, addr, 0)
            self._policy_rsp(out, R_REFUSED, addr)
            return None
        st = self.state[line]
        if self.snoop_of_line(line) is not None:
            self._policy_rsp(out, R_BUSY, addr, st)
            return None
        if st == HI and op == P_EVICT:
            self._policy_rsp(out, R_RELEASED, addr, HI, self.store[line])
            return None
        if st == HI or (st == HS and op == P_DOWNGRADE):
            self._policy_rsp(out, R_DONE, addr, st, self.store[line])
            return None
        free = [t for t, s in enumerate(self.tags) if s is None]
        if not free:
            self._policy_rsp(out, R_BUSY, addr, st)
            return None
        t = free[0]
        self.tags[t] = Snoop(line=line, opcode=POLICY_SNOOP[op])
        out.append(("s2m_bisnp", {"opcode": POLICY_SNOOP[op], "bi_id": self.bi_id, "bitag": t, "addr": addr}))
        return None


# -- scenarios (contract: "BI-snoop scenarios") ---------------------------------------------

def _enc(names, value, what, lineno):
    if isinstance(value, bool):
        raise CxlkvError(f"line {lineno}: {what} must be a name or an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise CxlkvError(f"line {lineno}: unknown {what} {value!r} (known: {', '.join(names)})")


def _int(rec, key, lineno, default=None, bits=None, hexstr=False):
    if key not in rec:
        if default is None:
            raise CxlkvError(f"line {lineno}: missing field '{key}'")
        return default
    v = rec[key]
    if hexstr and isinstance(v, str):
        try:
            v = int(v, 16)
        except ValueError:
            raise CxlkvError(f"line {lineno}: field '{key}' is not hexadecimal: {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, int):
        raise CxlkvError(f"line {lineno}: field '{key}' must be an integer{' or hex string' if hexstr else ''}, got {v!r}")
    if v < 0 or (bits is not None and v >> bits):
        raise CxlkvError(f"line {lineno}: field '{key}'={v} does not fit {bits} unsigned bits")
    return v


def _addr(rec, lineno):
    a = _int(rec, "addr", lineno, bits=ADDR_BITS + 6)
    if a % LINE_BYTES:
        raise CxlkvError(f"line {lineno}: addr {a:#x} is not 64-byte aligned")
    return a >> 6


def _field(names, rec, key, lineno, default, bits):
    v = _enc(names, rec.get(key, default), key, lineno)
    if not 0 <= v < 1 << bits:
        raise CxlkvError(f"line {lineno}: {key}={v} does not fit {bits} bits")
    return v


def _meta(rec, lineno):
    """(meta_field, meta_value): meta_value absent means MetaField NoOp."""
    if "meta_value" in rec:
        mf = _field(META_FIELDS, rec, "meta_field", lineno, "Meta0State", 2)
        return mf, _field(META_VALUES, rec, "meta_value", lineno, 0, 2)
    return _field(META_FIELDS, rec, "meta_field", lineno, "NoOp", 2), 0


def parse_scenario(text: str, data_width: int, source="scenario") -> list:
    """JSON lines -> [(channel, fields)], channel also "tick" ({"n"}) and "config".

    Raises CxlkvError naming the line number for anything malformed.
    """
    items = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CxlkvError(f"{source}: line {lineno}: not JSON: {exc.msg}") from None
        try:
            items.append(_parse_record(rec, lineno, data_width))
        except CxlkvError as exc:
            raise CxlkvError(f"{source}: {exc}") from None
    return items


def _parse_record(rec, lineno, dw):
    if not isinstance(rec, dict):
        raise CxlkvError(f"line {lineno}: expected a JSON object, got {type(rec).__name__}")
    ch = rec.get("ch")
    known = {"m2s_req": {"ch", "op", "addr", "tag", "meta_field", "meta_value", "snp_type"},
             "m2s_rwd": {"ch", "op", "addr", "tag", "meta_field", "meta_value", "snp_type", "data", "be"},
             "m2s_birsp": {"ch", "op", "tag", "bi_id", "low_addr"},
             "policy": {"ch", "op", "addr"},
             "tick": {"ch", "n"},
             "config": {"ch", "timeout", "bi_id"}}
    if ch not in known:
        raise CxlkvError(f"line {lineno}: unknown channel {ch!r} (known: {', '.join(known)})")
    extra = set(rec) - known[ch]
    if extra:
        raise CxlkvError(f"line {lineno}: unknown field(s) {', '.join(sorted(extra))} for channel {ch}")
    if ch == "m2s_req":
        mf, mv = _meta(rec, lineno)
        return ch, {"opcode": _field(REQ_OPS, rec, "op", lineno, None, 4) if "op" in rec else _missing("op", lineno),
                    "snp_type": _field(SNP_TYPES, rec, "snp_type", lineno, "NoOp", 3),
                    "meta_field": mf, "meta_value": mv,
                    "tag": _int(rec, "tag", lineno, 0, TAG_BITS), "addr": _addr(rec, lineno)}
    if ch == "m2s_rwd":
        mf, mv = _meta(rec, lineno)
        if "op" not in rec:
            _missing("op", lineno)
        return ch, {"opcode": _field(RWD_OPS, rec, "op", lineno, None, 4),
                    "snp_type": _field(SNP_TYPES, rec, "snp_type", lineno, "NoOp", 3),
                    "meta_field": mf, "meta_value": mv,
                    "tag": _int(rec, "tag", lineno, 0, TAG_BITS), "addr": _addr(rec, lineno),
                    "be": _int(rec, "be", lineno, (1 << dw // 8) - 1, dw // 8, hexstr=True),
                    "data": _int(rec, "data", lineno, 0, dw, hexstr=True)}
    if ch == "m2s_birsp":
        if "op" not in rec:
            _missing("op", lineno)
        return ch, {"opcode": _field(BIRSP_OPS, rec, "op", lineno, None, 4),
                    "bi_id": _int(rec, "bi_id", lineno, 0, BI_ID_BITS),
                    "bitag": _int(rec, "tag", lineno, None, BITAG_BITS),
                    "low_addr": _int(rec, "low_addr", lineno, 0, 2)}
    if ch == "policy":
        if "op" not in rec:
            _missing("op", lineno)
        return ch, {"op": _field(POLICY_OPS, rec, "op", lineno, None, 2), "addr": _addr(rec, lineno)}
    if ch == "tick":
        n = _int(rec, "n", lineno, 1, 20)
        return ch, {"n": n}
    return ch, {"timeout": _int(rec, "timeout", lineno, 0, TIMEOUT_BITS),
                "bi_id": _int(rec, "bi_id", lineno, 0, BI_ID_BITS)}


def _missing(key, lineno):
    raise CxlkvError(f"line {lineno}: missing field '{key}'")


def _name(names, v):
    for k, code in names.items():
        if code == v:
            return k
    return v


def format_output(ch, m, data_width) -> dict:
    """One output message as the contract's JSON object."""
    digits = data_width // 4
    if ch == "s2m_ndr":
        return {"ch": ch, "op": _name(NDR_OPS, m["opcode"]), "tag": m["tag"]}
    if ch == "s2m_drs":
        return {"ch": ch, "op": _name(DRS_OPS, m["opcode"]), "tag": m["tag"], "data": f"{m['data']:0{digits}x}"}
    if ch == "s2m_bisnp":
        return {"ch": ch, "op": _name(BISNP_OPS, m["opcode"]), "addr": m["addr"] << 6, "tag": m["bitag"],
                "bi_id": m["bi_id"]}
    if ch == "policy_rsp":
        return {"ch": ch, "op": _name(POLICY_RSP_OPS, m["op"]), "addr": m["addr"] << 6,
                "state": STATE_NAMES.get(m["state"], m["state"]), "data": f"{m['data']:0{digits}x}"}
    if ch == "error":
        return {"ch": ch, "kind": _name(ERROR_KINDS, m["kind"]), "addr": m["addr"] << 6, "tag": m["tag"]}
    raise ValueError(ch)


def run_model(items, config=None) -> tuple[list, BISnoopModel]:
    """Run parsed scenario items through the model: [(channel, fields)] of output, and the model.

    Each input is fully handled before the next. A request the device cannot accept
    (its line is in BIP and the park queue is full) waits on its channel, as it would
    on the wire; it is offered again after every later input, and later requests queue
    behind it.
    """
    cfg = dict(SCENARIO_CONFIG, **(config or {}))
    model = BISnoopModel(**cfg)
    out = []
    waiting = deque()                            # requests held on the m2s_req channel

    def retry():
        while waiting and model.can_accept("m2s_req", waiting[0]):
            out.extend(model.accept("m2s_req", waiting.popleft()))

    for ch, msg in items:
        if ch == "config":
            model.timeout, model.bi_id = msg["timeout"], msg["bi_id"]
        elif ch == "tick":
            for _ in range(msg["n"]):
                out.extend(model.tick())
        elif ch == "m2s_req" and (waiting or not model.can_accept(ch, msg)):
            waiting.append(msg)
        else:
            out.extend(model.accept(ch, msg))
        retry()
    return out, model


def scenario_lines(outputs, data_width) -> list[str]:
    return [json.dumps(format_output(ch, m, data_width)) for ch, m in outputs]
