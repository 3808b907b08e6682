"""`make formal` in the test suite: every SymbiYosys job passes, and the proofs can fail:
engines with a deliberately planted bug are caught by the property they break."""
import pytest

from cxlkv.hdl.bisnoop import BISnoopEngine
from cxlkv.tb.bisnoop import formal as F
from cxlkv.tb.formal import formal_modules

JOBS = [(mod, job) for mod in formal_modules() for job in mod.JOBS]


@pytest.mark.parametrize("mod,job", JOBS, ids=[j.name for _, j in JOBS])
def test_formal_job_passes(mod, job, tmp_path):
    status, seconds, jobdir = mod.run_job(job, tmp_path)
    assert status == "PASS", f"{job.name}: {status}; see {jobdir}/sby.log"


def test_every_invariant_1_to_9_has_a_job():
    assert {j.invariant for j in F.JOBS} >= {str(i) for i in range(1, 10)}
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


@pytest.mark.parametrize("engine,job", [(DropsWritebacks, "inv5_dirty_data_kept"), (IgnoresBIP, "inv4_no_grant_in_bip")])
def test_a_planted_bug_is_caught(engine, job, tmp_path):
    status, _, jobdir = F.run_job(next(j for j in F.JOBS if j.name == job), tmp_path, engine=engine)
    assert status == "FAIL", f"{job} did not catch {engine.__name__}: {status}; see {jobdir}/sby.log"
    assert "failed assertion" in (jobdir / "sby.log").read_text()
