"""Golden model of the Back-Invalidate engine: state table, conflicts, errors, the scenario
format, random host-cache runs (and proof that their checks can fail), and the CLI."""
import json
import random
from pathlib import Path

import pytest

from cxlkv.errors import CxlkvError
from cxlkv.models import bisnoop as M
from cxlkv.sw import cli
from cxlkv.tb.bisnoop.host import HostCheckError, model_run

SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "tb" / "bisnoop" / "scenarios").glob("*.jsonl"))


def req(op, line, tag=1, mv=None):
    return {"opcode": op, "snp_type": 0, "meta_field": M.MF_NOOP if mv is None else M.MF_META0,
            "meta_value": 0 if mv is None else mv, "tag": tag, "addr": line}


def rwd(op, line, tag=1, mv=None, data=0, be=0xFF):
    return dict(req(op, line, tag, mv), be=be, data=data)


def birsp(op, tag, bi_id=0):
    return {"opcode": op, "bi_id": bi_id, "bitag": tag, "low_addr": 0}


def ops(out):
    return [(ch, m.get("opcode", m.get("op", m.get("kind")))) for ch, m in out]


def test_encodings_are_the_references():
    assert M.REQ_OPS == {"MemInv": 0, "MemRd": 1, "MemRdData": 2, "MemRdFwd": 3, "MemWrFwd": 4,
                         "MemSpecRd": 8, "MemInvNT": 9, "MemClnEvct": 10}
    assert M.RWD_OPS == {"MemWr": 1, "MemWrPtl": 2, "BIConflict": 4}
    assert M.BIRSP_OPS == {"BIRspI": 0, "BIRspS": 1, "BIRspE": 2, "BIRspIBlk": 4, "BIRspSBlk": 5, "BIRspEBlk": 6}
    assert M.NDR_OPS == {"Cmp": 0, "Cmp-S": 1, "Cmp-E": 2, "BIConflictAck": 4}
    assert M.DRS_OPS == {"MemData": 0, "MemData-NXM": 1}
    assert M.BISNP_OPS == {"BISnpCur": 0, "BISnpData": 1, "BISnpInv": 2, "BISnpCurBlk": 4, "BISnpDataBlk": 5,
                           "BISnpInvBlk": 6}
    assert M.SNP_TYPES == {"NoOp": 0, "SnpData": 1, "SnpCur": 2, "SnpInv": 3}
    assert M.META_FIELDS == {"Meta0State": 0, "NoOp": 3} and M.META_VALUES == {"I": 0, "A": 2, "S": 3}


@pytest.mark.parametrize("op,mv,grant,state", [
    (M.MEM_RD, M.MV_S, M.CMP_S, M.HS), (M.MEM_RD_DATA, M.MV_S, M.CMP_S, M.HS),
    (M.MEM_RD, M.MV_A, M.CMP_E, M.HA), (M.MEM_RD, M.MV_I, M.CMP, M.HI), (M.MEM_RD, None, M.CMP, M.HI),
])
def test_reads_grant_and_track(op, mv, grant, state):
    dev = M.BISnoopModel()
    dev.store[3] = 0x1234
    out = dev.accept("m2s_req", req(op, 3, 7, mv))
    assert out == [("s2m_drs", {"opcode": M.MEM_DATA, "meta_field": M.MF_NOOP, "meta_value": 0, "tag": 7,
                                "data": 0x1234}),
                   ("s2m_ndr", {"opcode": grant, "meta_field": M.MF_NOOP, "meta_value": 0, "tag": 7})]
    assert dev.state[3] == state


def test_read_without_state_leaves_the_filter():
    dev = M.BISnoopModel()
    dev.accept("m2s_req", req(M.MEM_RD, 2, 1, M.MV_A))
    dev.accept("m2s_req", req(M.MEM_RD, 2, 2, M.MV_I))
    dev.accept("m2s_req", req(M.MEM_RD, 2, 3))
    assert dev.state[2] == M.HA


@pytest.mark.parametrize("mv,state", [(M.MV_I, M.HI), (M.MV_S, M.HS), (M.MV_A, M.HA)])
def test_memwr_meta_sets_state(mv, state):
    dev = M.BISnoopModel()
    dev.accept("m2s_req", req(M.MEM_RD, 1, 1, M.MV_A))
    out = dev.accept("m2s_rwd", rwd(M.MEM_WR, 1, 2, mv, data=0xAB))
    assert ops(out) == [("s2m_ndr", M.CMP)] and dev.state[1] == state and dev.store[1] == 0xAB


def test_memwrptl_merges_bytes():
    dev = M.BISnoopModel()
    dev.accept("m2s_rwd", rwd(M.MEM_WR, 0, 1, M.MV_I, data=0x1122334455667788))
    dev.accept("m2s_rwd", rwd(M.MEM_WR_PTL, 0, 2, M.MV_I, data=0xFFFFFFFFFFFFFFFF, be=0b00100001))
    assert dev.store[0] == 0x1122FF44556677FF


def test_clean_evict_and_evict_from_hi():
    dev = M.BISnoopModel()
    dev.accept("m2s_req", req(M.MEM_RD, 4, 1, M.MV_S))
    assert ops(dev.accept("m2s_req", req(M.MEM_CLN_EVCT, 4, 2, M.MV_I))) == [("s2m_ndr", M.CMP)]
    assert dev.state[4] == M.HI
    out = dev.accept("policy", {"op": M.P_EVICT, "addr": 4})
    assert ops(out) == [("policy_rsp", M.R_RELEASED)]


def test_snoop_park_writeback_release_replay():
    dev = M.BISnoopModel(park_depth=2)
    dev.accept("m2s_req", req(M.MEM_RD, 5, 1, M.MV_A))
    out = dev.accept("policy", {"op": M.P_EVICT, "addr": 5})
    assert out == [("s2m_bisnp", {"opcode": M.BISNP_INV, "bi_id": 0, "bitag": 0, "addr": 5})]
    assert dev.accept("m2s_req", req(M.MEM_RD, 5, 2, M.MV_S)) == []       # parked
    assert dev.accept("m2s_req", req(M.MEM_RD, 5, 3, M.MV_S)) == []
    assert not dev.can_accept("m2s_req", req(M.MEM_RD, 5, 4, M.MV_S))     # park queue full: backpressure
    assert dev.can_accept("m2s_req", req(M.MEM_RD, 6, 4, M.MV_S))
    assert ops(dev.accept("policy", {"op": M.P_EVICT, "addr": 5})) == [("policy_rsp", M.R_BUSY)]
    assert ops(dev.accept("m2s_rwd", rwd(M.MEM_WR, 5, 9, M.MV_I, data=0x77))) == [("s2m_ndr", M.CMP)]
    assert dev.state[5] == M.HA and dev.tags[0].wb_seen                  # state decided by the BIRsp
    assert ops(dev.accept("m2s_rwd", rwd(M.BI_CONFLICT, 5, 10))) == [("s2m_ndr", M.BI_CONFLICT_ACK)]
    out = dev.accept("m2s_birsp", birsp(M.BIRSP_I, 0))
    assert out[0] == ("policy_rsp", {"op": M.R_RELEASED, "state": M.HI, "addr": 5, "data": 0x77})
    assert [m["tag"] for ch, m in out if ch == "s2m_ndr"] == [2, 3]       # replayed in order
    assert dev.tags == [None] * 4 and dev.state[5] == M.HS


def test_tag_pool_exhaustion_is_busy():
    dev = M.BISnoopModel(n_tags=2)
    for line in range(3):
        dev.accept("m2s_req", req(M.MEM_RD, line, line, M.MV_S))
    assert ops(dev.accept("policy", {"op": M.P_EVICT, "addr": 0})) == [("s2m_bisnp", M.BISNP_INV)]
    assert ops(dev.accept("policy", {"op": M.P_EVICT, "addr": 1})) == [("s2m_bisnp", M.BISNP_INV)]
    assert ops(dev.accept("policy", {"op": M.P_EVICT, "addr": 2})) == [("policy_rsp", M.R_BUSY)]


@pytest.mark.parametrize("snoop,legal", [(M.P_EVICT, {0}), (M.P_DOWNGRADE, {0, 1}), (M.P_PROBE, {0, 1, 2})])
def test_legal_responses(snoop, legal):
    for op in M.BIRSP_OPS.values():
        dev = M.BISnoopModel()
        dev.accept("m2s_req", req(M.MEM_RD, 1, 1, M.MV_A))
        dev.accept("policy", {"op": snoop, "addr": 1})
        out = dev.accept("m2s_birsp", birsp(op, 0))
        if op in legal:
            assert out[0][0] == "policy_rsp" and dev.tags[0] is None
            assert dev.state[1] == M.RSP_STATE[op]
        else:
            assert out == [("error", {"kind": M.E_ILLEGAL_RSP, "addr": 1, "tag": 0})]
            assert dev.tags[0] is not None and dev.counters[M.E_ILLEGAL_RSP - 1] == 1


def test_unknown_tag_and_conflict_none_are_counted():
    dev = M.BISnoopModel()
    assert ops(dev.accept("m2s_birsp", birsp(M.BIRSP_I, 0))) == [("error", M.E_UNKNOWN_TAG)]
    assert ops(dev.accept("m2s_rwd", rwd(M.BI_CONFLICT, 3, 4))) == [("s2m_ndr", M.BI_CONFLICT_ACK),
                                                                     ("error", M.E_CONFLICT_NONE)]
    assert dev.counters[:3] == [1, 0, 1] and dev.status == 0b101


def test_counters_saturate():
    dev = M.BISnoopModel()
    dev.counters[0] = (1 << M.COUNTER_BITS) - 2
    for _ in range(3):
        dev.accept("m2s_birsp", birsp(M.BIRSP_I, 1))
    assert dev.counters[0] == (1 << M.COUNTER_BITS) - 1


def test_timeout_keeps_the_line_in_bip():
    dev = M.BISnoopModel(timeout=2)
    dev.accept("m2s_req", req(M.MEM_RD, 1, 1, M.MV_A))
    dev.accept("policy", {"op": M.P_EVICT, "addr": 1})
    assert dev.tick() == []
    assert dev.tick() == [("error", {"kind": M.E_TIMEOUT, "addr": 1, "tag": 0})]
    assert dev.tick() == []                                               # reported once
    assert dev.snoop_of_line(1) == 0 and dev.status == 1 << (M.E_TIMEOUT - 1)
    assert ops(dev.accept("policy", {"op": M.P_EVICT, "addr": 1})) == [("policy_rsp", M.R_BUSY)]
    assert ops(dev.accept("m2s_birsp", birsp(M.BIRSP_I, 0))) == [("policy_rsp", M.R_RELEASED)]


@pytest.mark.parametrize("bad", [dict(lines=12), dict(n_tags=0), dict(park_depth=0), dict(data_width=12)])
def test_model_refuses_bad_parameters(bad):
    with pytest.raises(ValueError):
        M.BISnoopModel(**bad)


# -- scenarios ------------------------------------------------------------------------------------

def test_every_state_table_row_and_error_has_a_scenario():
    names = {p.stem.split("_")[0] for p in SCENARIOS}
    assert {f"row{i:02d}" for i in range(1, 13)} <= names
    assert {f"err{i:02d}" for i in range(1, 6)} <= names
    assert {"row09b", "row09c"} <= names                                 # both conflict orders
    assert "row04b" in names                                             # MemClnEvct that keeps a copy


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenarios_run_on_the_model(path):
    items = M.parse_scenario(path.read_text(), 64, path.name)
    out, model = M.run_model(items)
    assert out, "a scenario must make the device say something"
    lines = M.scenario_lines(out, 64)
    assert all(json.loads(line)["ch"] in M.OUT_CHANNELS for line in lines)
    if not path.stem.startswith("err"):
        assert not [line for line in lines if '"error"' in line], "a clean scenario raised an error"
        assert model.counters == [0] * M.N_ERROR_KINDS


@pytest.mark.parametrize("text,where", [
    ("{", "line 1: not JSON"),
    ('{"ch":"m2s_req","op":"MemRd","addr":64}\n[1]', "line 2: expected a JSON object"),
    ('{"ch":"m2s_bogus"}', "line 1: unknown channel"),
    ('{"ch":"m2s_req","addr":64}', "line 1: missing field 'op'"),
    ('{"ch":"m2s_req","op":"MemRead","addr":64}', "line 1: unknown op 'MemRead'"),
    ('{"ch":"m2s_req","op":"MemRd","addr":65}', "line 1: addr 0x41 is not 64-byte aligned"),
    ('{"ch":"m2s_req","op":"MemRd","addr":-64}', "line 1: field 'addr'=-64 does not fit"),
    ('{"ch":"m2s_req","op":"MemRd","addr":64,"tag":65536}', "line 1: field 'tag'=65536 does not fit 16"),
    ('{"ch":"m2s_req","op":"MemRd","addr":64,"meta_value":"X"}', "line 1: unknown meta_value 'X'"),
    ('{"ch":"m2s_req","op":"MemRd","addr":64,"colour":1}', "line 1: unknown field(s) colour"),
    ('{"ch":"m2s_rwd","op":"MemWr","addr":0,"data":"zz"}', "line 1: field 'data' is not hexadecimal"),
    ('{"ch":"m2s_rwd","op":"MemWr","addr":0,"data":"1ffffffffffffffff"}', "line 1: field 'data'=36893488147419103231 does not fit 64"),
    ('{"ch":"m2s_birsp","op":"BIRspI"}', "line 1: missing field 'tag'"),
    ('{"ch":"m2s_req","op":true,"addr":0}', "line 1: op must be a name or an integer"),
    ('{"ch":"m2s_req","op":16,"addr":0}', "line 1: op=16 does not fit 4 bits"),
    ('\n# comment\n{"ch":"tick","n":"3"}', "line 3: field 'n' must be an integer"),
])
def test_malformed_scenarios_name_the_line(text, where):
    with pytest.raises(CxlkvError) as exc:
        M.parse_scenario(text, 64, "s.jsonl")
    assert str(exc.value).startswith("s.jsonl: line ") and where in str(exc.value)


def test_blocked_request_waits_on_its_channel():
    text = "\n".join(json.dumps(r) for r in [
        {"ch": "m2s_req", "op": "MemRd", "addr": 64, "tag": 1, "meta_value": "A"},
        {"ch": "policy", "op": "evict", "addr": 64},
        *[{"ch": "m2s_req", "op": "MemRd", "addr": 64, "tag": t, "meta_value": "S"} for t in (2, 3, 4)],
        {"ch": "m2s_req", "op": "MemRd", "addr": 128, "tag": 5, "meta_value": "S"},
        {"ch": "m2s_birsp", "op": "BIRspI", "tag": 0}])
    out, _ = M.run_model(M.parse_scenario(text, 64))
    tags = [m["tag"] for ch, m in out if ch == "s2m_ndr"]
    assert tags == [1, 2, 3, 4, 5], "parked, then waiting, then queued behind: order kept, nothing dropped"


# -- random host-cache runs ------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_host_cache_random_runs(seed):
    host, dev = model_run(50_000, random.Random(seed))
    s = host.stats
    assert s["snoops"] > 1500 and s["released"] > 1000 and s["writebacks"] > 1000
    assert s["conflict_ack_first"] and s["conflict_cmp_first"] and s["partial_writes"] > 300


def test_host_cache_small_pools_and_deep_races():
    for seed in range(4):
        model_run(10_000, random.Random(100 + seed), config={"lines": 4, "n_tags": 1, "park_depth": 1},
                  policy_rate=0.3, deliver=0.2)


def test_host_checks_catch_a_dropped_writeback(monkeypatch):
    """Negative test: a device that drops MemWr data during BIP must be caught (dirty data lost)."""
    real = M.BISnoopModel._write

    def lossy(self, line, msg):
        if self.snoop_of_line(line) is None:
            real(self, line, msg)
    monkeypatch.setattr(M.BISnoopModel, "_write", lossy)
    with pytest.raises(HostCheckError, match="dirty data lost|stale data|memory"):
        for seed in range(4):
            model_run(20_000, random.Random(seed))


def test_host_checks_catch_a_wrong_lane_merge(monkeypatch):
    """Negative test: a device that merges MemWrPtl with byte lane 0's enable inverted must be caught
    (the host's partial writebacks carry random bytes in the lanes left off)."""
    real = M.BISnoopModel._write

    def skewed(self, line, msg):
        real(self, line, dict(msg, be=msg["be"] ^ 1) if msg["opcode"] == M.MEM_WR_PTL else msg)
    monkeypatch.setattr(M.BISnoopModel, "_write", skewed)
    with pytest.raises(HostCheckError, match="stale data|dirty data lost|memory"):
        model_run(5_000, random.Random(0))


def test_clean_evict_lowers_to_hi_only_with_metavalue_i():
    """State table: HS/HA | MemClnEvct (MetaValue I) -> HI. With S / A the host keeps a copy (the filter
    takes the declared state); with MetaField NoOp it declares nothing (unchanged). Never a snoop-free
    release of a line the host may hold."""
    for mv, want in ((M.MV_I, M.HI), (M.MV_S, M.HS), (M.MV_A, M.HA), (None, M.HA)):
        dev = M.BISnoopModel()
        dev.accept("m2s_req", req(M.MEM_RD, 1, 1, M.MV_A))
        assert ops(dev.accept("m2s_req", req(M.MEM_CLN_EVCT, 1, 2, mv))) == [("s2m_ndr", M.CMP)]
        assert dev.state[1] == want
        evict = ops(dev.accept("policy", {"op": M.P_EVICT, "addr": 1}))
        assert evict == ([("policy_rsp", M.R_RELEASED)] if want == M.HI else [("s2m_bisnp", M.BISNP_INV)])


def test_host_checks_catch_a_filter_that_forgets_a_grant(monkeypatch):
    """Negative test: a device that grants E without recording HA must be caught (filter not conservative)."""
    real = M.BISnoopModel._req

    def forgetful(self, msg, out):
        before = list(self.state)
        r = real(self, msg, out)
        if msg["opcode"] == M.MEM_RD and msg["meta_value"] == M.MV_A:
            self.state[:] = before
        return r
    monkeypatch.setattr(M.BISnoopModel, "_req", forgetful)
    with pytest.raises(HostCheckError, match="filter says"):
        model_run(5_000, random.Random(0))


# -- CLI -----------------------------------------------------------------------------------------

def test_cli_run_model(capsys):
    path = next(p for p in SCENARIOS if p.stem.startswith("row09_"))
    assert cli.main(["bisnoop", "run", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    recs = [json.loads(x) for x in lines]
    assert [r["op"] for r in recs if r["ch"] == "s2m_ndr"] == ["Cmp-S", "BIConflictAck", "Cmp-E"]


def test_cli_errors_are_clean(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ch":"m2s_req","op":"MemRd","addr":64}\n{"ch":"policy","op":"evict"}\n')
    assert cli.main(["bisnoop", "run", str(bad)]) == 2
    assert "line 2: missing field 'addr'" in capsys.readouterr().err
    assert cli.main(["bisnoop", "run", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read scenario" in capsys.readouterr().err
    assert cli.main(["bisnoop", "host", "--steps", "0"]) == 2


def test_cli_host(capsys):
    assert cli.main(["bisnoop", "host", "--steps", "3000", "--runs", "2", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "seed 5: ok" in out and "seed 6: ok" in out
