"""The tracker's metadata channels on AXI4: the golden model of ``cxlkv.hdl.metaaxi``.

One definition of what the AXI4 master does with the tracker's metadata traffic
(docs/metaaxi.md):

* a read of word ``a`` is one AR beat at ``base + 8 a`` (ARLEN 0, ARSIZE 3 = 8 bytes, INCR,
  ARID ``READ_ID``); its data is R's, or 0 when RRESP is SLVERR/DECERR (counted);
* a write is one AW at the same address and one W beat (WSTRB all ones, WLAST), AWID
  ``WRITE_ID``; it is *pending* until its B response (B responses come in order: one ID);
  an error BRESP is counted;
* the ordering rule: a read of a word with a pending write is not issued until that write's B
  has arrived (``read_may_issue``), so every read returns the latest write the tracker made,
  whatever the interconnect does between its read and write channels;
* at most ``PENDING_WRITES`` writes pending (then ``meta_wr`` waits) and ``MAX_READS`` reads;
* a B or R beat with nothing outstanding, or an R beat without RLAST, is a protocol error:
  dropped and counted.
"""
from __future__ import annotations

ADDR_WIDTH = 40          # AXI byte address bits (1 TiB): the 640 MiB metadata region of the full geometry fits anywhere
ID_WIDTH = 4
READ_ID = 0
WRITE_ID = 0
PENDING_WRITES = 8
MAX_READS = 64
RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR = 0, 1, 2, 3


def byte_address(base: int, word: int, addr_width: int = ADDR_WIDTH) -> int:
    """AXI address of metadata word ``word``."""
    return (base + 8 * word) % (1 << addr_width)


def read_data(rdata: int, rresp: int) -> int:
    """What the tracker receives for an R beat."""
    return 0 if rresp in (RESP_SLVERR, RESP_DECERR) else rdata


class PendingWrites:
    """The writes in flight between their acceptance and their B response."""

    def __init__(self, limit: int = PENDING_WRITES):
        self.limit = limit
        self.addrs: list[int] = []

    def full(self) -> bool:
        return len(self.addrs) >= self.limit

    def write(self, word: int):
        if self.full():
            raise OverflowError("more pending writes than the master holds")
        self.addrs.append(word)

    def b_response(self) -> int | None:
        """The oldest pending write retires; None (a protocol error) when none is pending."""
        return self.addrs.pop(0) if self.addrs else None

    def read_may_issue(self, word: int) -> bool:
        return word not in self.addrs
