"""``controller_cxl``: the top's ``decision`` and ``route`` streams against ``ControllerModel``.

In this build (``host_data=True, bisnoop=True``) the HDM decode's accesses do not come from a port:
the CXL.mem front end puts every MemRd/MemRdData and MemWr (a MemWrPtl with every byte enabled) with a
legal MetaField/MetaValue into the 16-entry access queue (``bi_access_queue``), whose head goes to the
decode (``hdm.access``) while CONTROL.enable = 1; hints come from the ``hint`` port or HINT_PUSH through
a holding register into ``hdm.hint``. So :class:`TopCheck` feeds the model where the decode takes them:
the ``hdm`` instance's ``access`` and ``hint`` handshakes (``access__valid``/``hint__valid`` and the one
ready of both, ``adv`` in the Verilog: hdl/hdm.py drives ``access.ready`` and ``hint.ready`` from it),
sampled in the ReadOnly phase through the Verilated hierarchy, the hint first when both go in one clock
(the decode's rule). Each taken item goes through ``ControllerModel.accesses`` of a model built with the
bench's parameters (``tb/controller/__init__.py`` CXL_PARAMS, from the runner) and configured by the
bench's own register writes (the driver's transport is topenv's :class:`MirrorTransport`: every write
goes to the DUT and then to the model, same response required). Its routes and decisions (the slot
from ``ControllerModel.tracker_decisions``) are the predictions of two :class:`InOrderScoreboard`,
compared field for field with what the top's ``route`` and ``decision`` ports give.

Why the taken order is all the model needs (hdl/controller.py): the decode's route is a function of
the access and the configuration; the tracker's events are the decode's line-0 events in access order
(the sequencer lets an HDM event in only while its route is at its head), the lookups of lines 1 ... go
between them and change nothing (``TrackerModel.lookup``; the decision fork keeps them off the port,
as it keeps prefetch decisions), the direct ``event`` port idles in this bench (its ``valid`` held
at 0: an event there would meet the decode's in an order the ports do not show), PREFETCH.window
stays 0 (the bench never writes it; mirrored anyway). The BI-snoop engine, the evict gate (Busy retries, a line left to the host after BI_BUSY_LIMIT Busy
answers: BI_SNOOPS_SKIPPED) and the tier mover's host ops act behind the tracker's decisions or in
front of the access queue: they delay accesses and decisions (backpressure) but neither reorder nor
change what the decode takes, so nothing is excluded (test_busy_limit_skip compares decisions and
routes around a line left to the host; an access the host serves from a copy it was left never reaches
the decode, so it is neither predicted nor produced). ``accesses`` rather than ``lines``: both give
the same routes and decisions (``lines`` adds the lookups and the mover's host ops, whose data the
bench checks end to end); the tracker's and the decode's counter registers are compared with the
model's at the end (``counter_diffs``), the tier mover's are not (the model is fed no line data).
"""
from __future__ import annotations

from cxlkv.models import hdm as MH
from cxlkv.models import regmap
from cxlkv.models.controller import COUNTER_SOURCES, HDM_COUNTERS, ControllerModel
from cxlkv.tb.common import Packer
from cxlkv.tb.controller.topenv import MirrorTransport, TopPredictor

#: counter registers compared with the model at the end of a run: the tracker's and the HDM decode's
MODEL_COUNTERS = (*COUNTER_SOURCES, "FILLS", *HDM_COUNTERS)
#: the HDM decode's instance name in the top (``m.submodules.hdm``)
HDM_NAME = "hdm"
#: the decode's ready of access and hint: Amaranth names the shared signal ``adv`` in the Verilog
READY_NAMES = ("access__ready", "adv")


def _first(handle, names, what):
    for name in names:
        try:
            return handle[name]
        except (AttributeError, KeyError, LookupError):
            continue
    raise AssertionError(f"{what}: none of {names} in {handle._path}")


class TopCheck(TopPredictor):
    """The model of the top and its two scoreboards (TopPredictor), fed from the HDM decode inside the
    top; :meth:`sample` once per clock in ReadOnly."""

    def __init__(self, dut, p, *, corrupt_decision_at=None, corrupt_route_at=None):
        from cxlkv.hdl.controller import Controller
        super().__init__(ControllerModel(**p), corrupt_decision_at=corrupt_decision_at,
                         corrupt_route_at=corrupt_route_at)
        self.dut = dut
        top = Controller(**p)                    # for its port layouts only
        top._MustUse__silence = True
        hdm = top._new_hdm()
        hdm._MustUse__silence = True
        members, hmem = top.signature.members, hdm.signature.members

        def layout(mem, name):
            return mem[name].signature.members["payload"].shape
        self.pk = {"decision": Packer(layout(members, "decision")), "route": Packer(layout(members, "route")),
                   "access": Packer(layout(hmem, "access")), "hint": Packer(layout(hmem, "hint"))}
        try:
            h = dut[HDM_NAME]
            h["access__valid"]
        except (AttributeError, KeyError, LookupError) as exc:
            raise AssertionError(f"no HDM decode instance '{HDM_NAME}' with access__valid in the top") from exc
        self.acc_valid, self.acc_payload = h["access__valid"], h["access__payload"]
        self.hint_valid, self.hint_payload = h["hint__valid"], h["hint__payload"]
        self.ready = _first(h, READY_NAMES, "the HDM decode's ready")
        for name, handle in (("access", self.acc_payload), ("hint", self.hint_payload)):
            assert len(handle) == self.pk[name].width, \
                f"hdm.{name} payload of {len(handle)} bits, the layout {self.pk[name].width}"
        self.out = {name: (dut[f"{name}__valid"], dut[f"{name}__payload"]) for name in ("decision", "route")}
        self.taken = {"access": 0, "hint": 0}
        self.errors = []

    def transport(self, master):
        """The driver's transport: every register write to the DUT and, after its response, to the model."""
        return MirrorTransport(master, self.model)

    # -- the monitor ----------------------------------------------------------------------------
    def sample(self, ready):
        """One clock (ReadOnly): what the decode took, then what the ports gave; ``ready`` the bench's
        current ``ready`` of {route, decision}. Returns {route, decision}: 1 where the port gave one."""
        h, a = int(self.hint_valid.value), int(self.acc_valid.value)
        if (h or a) and self.ready.value:
            items = []
            if h:                               # a hint and an access of one clock: the hint first
                items.append(("hint", MH.Hint(**self.pk["hint"].unpack(int(self.hint_payload.value)))))
                self.taken["hint"] += 1
            if a:
                items.append(("access", MH.Access(**self.pk["access"].unpack(int(self.acc_payload.value)))))
                self.taken["access"] += 1
                self.cover["same_clock_hint"] += h
            self._feed(items)
        fired = {}
        for name in ("decision", "route"):
            valid, payload = self.out[name]
            fired[name] = f = int(ready[name] and bool(valid.value))
            if f:
                v = self.pk[name].unpack(int(payload.value))
                self.sb[name].actual(v if name == "decision" else MH.Route(**v))
        return fired

    def _feed(self, items):
        if not self.feed_accesses(items) and len(self.errors) < 10:
            self.errors.append(f"the HDM decode took {items} while the model takes no access "
                               f"(CONTROL.enable = 0 or STATUS.ring_error in the model)")

    # -- at the end -----------------------------------------------------------------------------
    async def counter_diffs(self, dev) -> dict:
        """The tracker's and the HDM decode's counter registers (MODEL_COUNTERS), DUT against the
        model: {name: (DUT, model)} of those that differ. The tier mover's are left out (the model
        here is fed no line data)."""
        diffs = {}
        for name in MODEL_COUNTERS:
            reg = regmap.BY_NAME[name]
            got = await dev.read_reg(name)
            want = 0
            for w in range(reg.words):                 # low word first, as the driver reads
                want |= self.model.read32(reg.offset + 4 * w)[0] << (32 * w)
            if got != want:
                diffs[name] = (got, want)
        return diffs

    def check(self):
        """Each scoreboard that saw anything: nothing owed, nothing unexpected, every item equal. One
        that saw nothing at all (no prediction, no output: a test without line-0 accesses) is left
        alone, since InOrderScoreboard.check fails on "nothing compared"; the random tests require
        traffic on both themselves."""
        if self.errors:
            raise AssertionError(self.errors[0])
        for sb in self.sb.values():
            if sb.compared or sb.expected or sb.unexpected:
                sb.check()

    def summary(self):
        return (f"top: taken {self.taken}; compared { {n: sb.compared for n, sb in self.sb.items()} }; "
                f"cover {self.cover}")
