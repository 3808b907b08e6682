"""`make formal` in the test suite: every SymbiYosys job passes, and the proofs can fail:
engines with a deliberately planted bug are caught by the property they break."""
import pytest

from cxlkv.hdl.bisnoop import BISnoopEngine
from cxlkv.models import bisnoop as M
from cxlkv.tb.bisnoop import formal as F
from cxlkv.tb.formal import formal_modules

JOBS = [(mod, job) for mod in formal_modules() for job in mod.JOBS]


@pytest.mark.parametrize("mod,job", JOBS, ids=[j.name for _, j in JOBS])
def test_formal_job_passes(mod, job, tmp_path):
    status, seconds, jobdir = mod.run_job(job, tmp_path)
    assert status == "PASS", f"{job.name}: {status}; see {jobdir}/sby.log"


def test_every_invariant_1_to_10_has_a_job():
    assert {j.invariant for j in F.JOBS} >= {str(i) for i in range(1, 11)}
    assert all(j.mode in ("prove", "bmc", "cover") for j in F.JOBS)


class DropsWritebacks(BISnoopEngine):
    """Planted bug: MemWr/MemWrPtl are answered with Cmp but never reach the store."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.ev_write.eq(0)
        return m


class IgnoresBIP(BISnoopEngine):
    """Planted bug: the engine does not see that a line is in BIP, so requests are served, not parked."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.ev_bip.eq(0)
        return m


class _RequestRule(BISnoopEngine):
    """Planted bugs in the filter's request rules: ``when(rq)`` picks the served request that sets HI."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        rq = self.ev_req
        served = ((self.ev_kind == self.EV_REQ) | (self.ev_kind == self.EV_DRAIN)) & ~self.ev_bip & self.ev_addr_ok
        with m.If(served & self.when(rq)):
            m.d.comb += [self.ev_set_state.eq(1), self.ev_new_state.eq(M.HI)]
        return m


class LowersOnReadI(_RequestRule):
    """Planted bug: a MemRd with MetaValue I lowers the filter to HI (the table: unchanged)."""

    @staticmethod
    def when(rq):
        return (rq.opcode == M.MEM_RD) & (rq.meta_field == M.MF_META0) & (rq.meta_value == M.MV_I)


class CleanEvictIgnoresMeta(_RequestRule):
    """Planted bug, the engine's old rule: every MemClnEvct lowers the filter to HI, also with
    MetaValue S / A (the host keeps a copy) or MetaField NoOp."""

    @staticmethod
    def when(rq):
        meta_ok = (rq.meta_field == M.MF_NOOP) | ((rq.meta_field == M.MF_META0) & (rq.meta_value != 1))
        return (rq.opcode == M.MEM_CLN_EVCT) & meta_ok


@pytest.mark.parametrize("engine,job", [(DropsWritebacks, "inv5_dirty_data_kept"), (IgnoresBIP, "inv4_no_grant_in_bip"),
                                        (LowersOnReadI, "inv7_filter_conservative"),
                                        (CleanEvictIgnoresMeta, "inv7_filter_conservative")])
def test_a_planted_bug_is_caught(engine, job, tmp_path):
    status, _, jobdir = F.run_job(next(j for j in F.JOBS if j.name == job), tmp_path, engine=engine)
    assert status == "FAIL", f"{job} did not catch {engine.__name__}: {status}; see {jobdir}/sby.log"
    assert "failed assertion" in (jobdir / "sby.log").read_text()
