"""`cxlkv policy`: replay (text and JSON, budgets as counts or percentages), sweep (CSV + PNG),
and clean refusal of every malformed trace the issue lists (exit 2, one line naming the key)."""
import csv
import json

import numpy as np
import pytest

from cxlkv.models import policy as P
from cxlkv.models.trace import Trace, save_trace
from cxlkv.sw import cli


def _trace(n_pos=30, steps=40, seed=0):
    """One small decode-like trace: prefill writes, then per step an append and a few reads."""
    rng = np.random.default_rng(seed)
    rows = [(0, q // 2, q % 2, p, 1, 0.0) for q in range(4) for p in range(n_pos)]
    for s in range(1, steps + 1):
        for q in range(4):
            newest = n_pos + s - 1
            rows.append((s, q // 2, q % 2, newest, 1, 0.0))
            picks = sorted(set(rng.integers(0, newest + 1, 6).tolist()) | {0, newest})
            w = rng.random(len(picks)).astype(np.float32)
            rows += [(s, q // 2, q % 2, p, 0, float(x)) for p, x in zip(picks, w / w.sum())]
    a = np.array(rows, dtype=object)
    return Trace(a[:, 0].astype(np.int32), a[:, 1].astype(np.uint16), a[:, 2].astype(np.uint16),
                 a[:, 3].astype(np.uint32), a[:, 4].astype(np.uint8), a[:, 5].astype(np.float32), 2, 2)


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.npz"
    save_trace(path, _trace())
    return path


def test_replay_json_has_the_contract_keys(trace_file, capsys):
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "lru", "--entries", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("policy", "entries", "events", "reads", "read_hits", "hit_rate", "writes", "fills", "evictions",
                "prefetches", "prefetch_hits", "attention_recall"):
        assert key in out, key
    assert out["policy"] == "lru" and out["entries"] == 8
    assert out["fills"] == out["reads"] - out["read_hits"]
    assert out["hit_rate"] == out["read_hits"] / out["reads"]
    # the CLI prints what the model computes
    want = P.replay(_trace(), "lru", 8).summary()
    assert {k: out[k] for k in want if k != "params"} == {k: v for k, v in want.items() if k != "params"}


def test_replay_percentage_budget_and_text(trace_file, capsys):
    ctx = 30 + 40    # prefill positions + appended positions
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "hw", "--entries", "10%"]) == 0
    out = capsys.readouterr().out
    assert f"{-(-ctx // 10)} entries per queue" in out and "hit rate" in out
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "hw", "--entries", "10%", "--json",
                     "--per-queue", "--param", "hw_tau=9", "--param", "hw_pinned=1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["entries"] == 7 and len(out["per_queue"]) == 4
    assert out["params"]["hw_tau"] == 9 and out["params"]["hw_pinned"] == 1


def test_replay_prefetch_reports_accuracy_and_bytes(trace_file, capsys):
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "ema+prefetch", "--entries", "12",
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prefetches"] > 0 and 0 <= out["prefetch_accuracy"] <= 1
    assert out["bytes_moved"] == (out["fills"] + out["prefetches"]) * 512


def test_replay_prefetch_trigger_on_misses(trace_file, capsys):
    """--param prefetch_trigger_all=0 starts windows on demand misses only (policy.replay's
    prefetch_trigger), 1 (the default) on every read."""
    from cxlkv.models import prefetch as PF
    from cxlkv.models.trace import load_trace
    base = ["policy", "replay", str(trace_file), "--policy", "hw", "--entries", "8", "--param", "window=2", "--json"]
    got = {}
    for t in (None, 0, 1):
        extra = [] if t is None else ["--param", f"prefetch_trigger_all={t}"]
        assert cli.main(base + extra) == 0
        got[t] = json.loads(capsys.readouterr().out)
    trace = load_trace(trace_file)
    params = P.make_params("hw", window=2)
    for t, trig in ((0, PF.TRIGGER_MISS), (1, PF.TRIGGER_READ)):
        ref = P.replay(trace, "hw", 8, params=params, prefetch_trigger=trig)
        assert (got[t]["prefetches"], got[t]["read_hits"]) == (ref.total("prefetches"), ref.total("read_hits"))
    assert got[None] == got[1] and got[0]["prefetches"] < got[1]["prefetches"]


@pytest.mark.parametrize("argv,message", [
    (["--policy", "hw", "--entries", "4", "--param", "window=2", "--param", "prefetch_trigger_all=2"],
     "prefetch_trigger_all must be 0"),
    (["--policy", "lru", "--entries", "0"], "--entries must be at least 1"),
    (["--policy", "lru", "--entries", "ten"], "neither an integer nor a percentage"),
    (["--policy", "lru", "--entries", "150%"], "(0, 100]"),
    (["--policy", "hw", "--entries", "4", "--param", "hw_tau"], "NAME=VALUE"),
    (["--policy", "hw", "--entries", "4", "--param", "hw_tau=x"], "not an integer"),
    (["--policy", "hw", "--entries", "4", "--param", "hw_tau=0"], "hw_tau"),
    (["--policy", "hw", "--entries", "4", "--param", "bogus=1"], "bogus: not a parameter of policy 'hw'"),
    (["--policy", "min", "--entries", "4", "--param", "window=2"], "window: not a parameter of policy 'min'"),
    (["--policy", "hw", "--entries", "4", "--param", "hw_tau=3", "--param", "hw_tau=4"],
     "--param 'hw_tau' given twice ('hw_tau=3', 'hw_tau=4')"),
])
def test_replay_bad_arguments_are_refused(trace_file, capsys, argv, message):
    assert cli.main(["policy", "replay", str(trace_file), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: ") and message in err and "Traceback" not in err


def _arrays():
    t = _trace(n_pos=6, steps=3)
    a = {k: getattr(t, k) for k in ("step", "layer", "head", "pos", "op", "score")}
    a["n_layers"], a["n_kv_heads"] = np.array(2), np.array(2)
    return a


def _decreasing_step(a):
    a["step"] = a["step"].copy()
    a["step"][30] = 0     # events 24.. are step 1
    return 30


def _layer_out_of_range(a):
    a["layer"] = a["layer"].copy()
    a["layer"][7] = 2
    return 7


def _nan_score(a):
    a["score"] = a["score"].copy()
    a["score"][27] = np.nan
    return 27


def _missing_key(a):
    del a["pos"]


def _unequal_lengths(a):
    a["op"] = a["op"][:-3]
    return len(a["op"])        # the first event 'op' lacks


@pytest.mark.parametrize("mutate,key,with_index", [
    (_decreasing_step, "step", True),
    (_layer_out_of_range, "layer", True),
    (_nan_score, "score", True),
    (_missing_key, "pos", False),
    (_unequal_lengths, "op", True),
])
def test_malformed_traces_are_refused_cleanly(tmp_path, capsys, mutate, key, with_index):
    a = _arrays()
    index = mutate(a)
    path = tmp_path / "bad.npz"
    with open(path, "wb") as f:
        np.savez(f, **a)
    for argv in (["policy", "replay", str(path), "--policy", "hw", "--entries", "4"],
                 ["policy", "sweep", "--traces", str(path), "--budgets", "10", "--out", str(tmp_path / "o")]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("cxlkv: error: ") and err.count("\n") == 1 and "Traceback" not in err
        assert f"key '{key}'" in err
        if with_index:
            assert f"event {index}" in err
    assert not (tmp_path / "o" / "sweep.csv").exists()      # nothing half-written


@pytest.mark.parametrize("content", [b"this is not a zip archive", b"", b"PK\x03\x04 truncated"])
def test_not_an_npz_is_refused_cleanly(tmp_path, capsys, content):
    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    assert cli.main(["policy", "replay", str(path), "--policy", "lru", "--entries", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: ") and "key '(file)'" in err and "Traceback" not in err


def test_missing_file_is_refused_cleanly(tmp_path, capsys):
    assert cli.main(["policy", "replay", str(tmp_path / "nope.npz"), "--policy", "lru", "--entries", "4"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_sweep_writes_csv_and_png(trace_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), "--policies", "lru,min,hw,ema+prefetch",
                     "--budgets", "10,50", "--param", "hw:hw_tau=8", "--out", str(out)]) == 0
    rows = _csv(out / "sweep.csv")
    assert len(rows) == 8 and {r["policy"] for r in rows} == {"lru", "min", "hw", "ema+prefetch"}
    for r in rows:
        want = P.replay(_trace(), r["policy"], int(r["entries"]),
                        **({"hw_tau": 8} if r["policy"] == "hw" else {})).summary()
        assert int(r["read_hits"]) == want["read_hits"] and int(r["evictions"]) == want["evictions"]
        if r["policy"] == "min":
            assert float(r["hit_rate_vs_min"]) == 1.0
    assert json.loads(next(r for r in rows if r["policy"] == "hw")["params"])["hw_tau"] == 8
    md = (out / "sweep.md").read_text()
    assert "| t | **hw** |" in md and "| 10% | 50% |" in md
    png = (out / "sweep_t.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_synthetic_family(tmp_path, capsys):
    out = tmp_path / "s"
    assert cli.main(["policy", "sweep", "--families", "recent", "--policies", "lru,hw", "--budgets", "20",
                     "--no-png", "--out", str(out)]) == 0
    rows = _csv(out / "sweep.csv")
    assert [(r["trace"], r["family"], r["policy"]) for r in rows] == [
        ("synth-recent", "recent", "lru"), ("synth-recent", "recent", "hw")]


@pytest.mark.parametrize("argv,message", [
    (["--policies", "lru,fifo"], "unknown policy 'fifo'"),
    (["--budgets", "10,x"], "comma-separated"),
    (["--budgets", "0"], "not in (0, 100]"),
    (["--families", "nope"], "unknown trace family"),
    (["--param", "hw:bogus=1"], "bogus: not a parameter of policy 'hw'"),
    (["--policies", ","], "no policy in ','"),
    (["--policies", "lru,lru"], "names a policy twice"),
    (["--budgets", ","], "no percentage in ','"),
    (["--budgets", "10,10.0"], "names a budget twice"),
    (["--budgets", "nan"], "not in (0, 100]"),
    (["--param", "x:hw_tau=3"], "unknown policy 'x'"),
    (["--param", "hw_tau=3", "--param", "hw_tau=4"], "given twice"),
])
def test_sweep_bad_arguments(tmp_path, capsys, argv, message):
    assert cli.main(["policy", "sweep", "--out", str(tmp_path / "o"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_sweep_refuses_a_bad_trace_before_replaying_any(trace_file, tmp_path, capsys):
    """A bad trace anywhere in the list stops the sweep before the first replay or file: nothing
    is half-swept (the contract's rule for a replay)."""
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"garbage")
    out = tmp_path / "s"
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), str(bad), "--policies", "lru",
                     "--budgets", "10", "--no-png", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad.npz" in err and "%: lru" not in err
    assert not out.exists()


def test_sweep_out_that_is_a_file_is_refused(trace_file, tmp_path, capsys):
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), "--policies", "lru", "--budgets", "10",
                     "--no-png", "--out", str(trace_file)]) == 2
    assert "cannot make the directory" in capsys.readouterr().err


def test_default_sweep_takes_every_family_and_shipped_access_traces(tmp_path, monkeypatch, capsys):
    import argparse

    from cxlkv.models import tracegen
    from cxlkv.sw import cli_policy
    (tmp_path / "traces").mkdir()
    save_trace(tmp_path / "traces" / "real.npz", _trace())
    with open(tmp_path / "traces" / "kv.npz", "wb") as f:
        np.savez(f, k_0=np.zeros(3), v_0=np.zeros(3))
    monkeypatch.setattr("cxlkv.repo_root", lambda: tmp_path)
    sources = cli_policy._sweep_sources(argparse.Namespace(traces=None, families=None, seed=0))
    labels = [label for label, _, _ in sources]
    assert labels == ["real"] + [f"synth-{f}" for f in tracegen.FAMILIES]
    assert "skipping" in capsys.readouterr().err
    assert len(sources[0][2]()) == len(_trace())


def test_param_help_states_the_model_defaults():
    """The help text is static (no numpy at --help), so check it against the model."""
    import re

    from cxlkv.sw import cli_policy
    stated = dict(re.findall(r"^  (\w+)=(\d+)", cli_policy._PARAM_HELP, re.M))     # whole-number defaults
    assert {k: int(v) for k, v in stated.items()} == P.PolicyParams().__dict__
    assert cli_policy.POLICIES == P.POLICIES


def test_replay_refuses_a_parameter_its_policy_would_ignore(trace_file, capsys):
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "lru", "--entries", "8",
                     "--param", "hw_alpha=5"]) == 2
    assert ("hw_alpha: not a parameter of policy 'lru' (its parameters: entry_bytes, fast_lat_ns, fast_gbytes_s, "
            "slow_lat_us, slow_gbytes_s)") in capsys.readouterr().err
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "ema", "--entries", "8",
                     "--param", "ema_tau=50"]) == 0
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "lru", "--entries", "8",
                     "--param", "prefetch_trigger_all=0"]) == 2
    assert "prefetch_trigger_all: not a parameter of policy 'lru'" in capsys.readouterr().err
    # entry_bytes sizes every policy's bytes moved; the trigger goes with a prefetching policy
    for policy in ("lru", "hw"):
        assert cli.main(["policy", "replay", str(trace_file), "--policy", policy, "--entries", "8",
                         "--param", "entry_bytes=128", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["bytes_moved"] % 128 == 0
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "hw", "--entries", "8",
                     "--param", "prefetch_trigger_all=0", "--param", "window=1"]) == 0


def test_replay_per_queue_prints_a_table_without_json(trace_file, capsys):
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "lru", "--entries", "8", "--per-queue"]) == 0
    out = capsys.readouterr().out.splitlines()
    i = out.index("layer  head  reads  hits  hit rate  attention recall")
    assert len(out) - i - 1 == 4                                  # the trace's 2 x 2 queues


@pytest.mark.parametrize("policy", P.POLICIES)
def test_replay_lists_exactly_the_names_it_takes(trace_file, capsys, policy):
    """The refusal of a name lists the names the policy takes (prefetch_trigger_all too, with a
    prefetching policy), and each of those is taken."""
    base = ["policy", "replay", str(trace_file), "--policy", policy, "--entries", "8"]
    assert cli.main(base + ["--param", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cxlkv: error: bogus: not a parameter of policy '{policy}' (its parameters: ")
    listed = err.strip().rsplit("(its parameters: ", 1)[1].rstrip(")").split(", ")
    assert ("prefetch_trigger_all" in listed) == ("window" in listed)
    for name in listed:
        value = 1 if name == "prefetch_trigger_all" else getattr(P.make_params(policy), name)
        # the trigger applies only with a prefetch window (hw's default window is 0)
        window = ["--param", "window=1"] if name == "prefetch_trigger_all" and policy == "hw" else []
        assert cli.main(base + ["--param", f"{name}={value}", *window, "--json"]) == 0, name
        capsys.readouterr()
    for name in set(P.PARAM_NAMES) - set(listed):
        assert cli.main(base + ["--param", f"{name}=1"]) == 2, name
        assert f"{name}: not a parameter of policy '{policy}'" in capsys.readouterr().err


@pytest.mark.parametrize("policies,param,message", [
    ("hw", "hw:ema_alpha=100", "ema_alpha: not a parameter of policy 'hw' (its parameters: hw_alpha, "),
    ("hw", "hw:prefetch_trigger_all=0", "prefetch_trigger_all: not a parameter of policy 'hw'"),
    ("lru", "hw:hw_tau=9", "--param hw:hw_tau: policy 'hw' is not swept (--policies lru)"),
    ("hw,lru", "ema_alpha=100", "ema_alpha: not a parameter of any policy swept (hw, lru; their parameters: "),
    ("lru,min", "window=2", "window: not a parameter of any policy swept (lru, min"),
])
def test_sweep_refuses_a_parameter_no_swept_policy_takes(trace_file, tmp_path, capsys, policies, param, message):
    out = tmp_path / "s"
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), "--policies", policies, "--budgets", "50",
                     "--param", param, "--out", str(out), "--no-png"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: ") and message in err
    assert not out.exists()


def test_sweep_gives_each_policy_the_parameters_it_takes(trace_file, tmp_path, capsys):
    """An unprefixed NAME reaches every swept policy that takes it, MIN too (its bytes moved)."""
    out = tmp_path / "s"
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), "--policies", "min,lru,ema", "--budgets", "20",
                     "--param", "entry_bytes=64", "--param", "ema_tau=50", "--out", str(out), "--no-png"]) == 0
    rows = {r["policy"]: r for r in _csv(out / "sweep.csv")}
    for r in rows.values():
        assert int(r["bytes_moved"]) == int(r["fills"]) * 64, r["policy"]
    assert json.loads(rows["ema"]["params"]) == {"ema_alpha": P.PolicyParams().ema_alpha, "ema_tau": 50}


def test_sweep_refuses_traces_without_a_file(tmp_path, capsys):
    """`--traces` with nothing after it is not the default sweep (that is --traces left out)."""
    assert cli.main(["policy", "sweep", "--traces", "--out", str(tmp_path / "o"), "--no-png", "--policies", "lru",
                     "--budgets", "50"]) == 2
    err = capsys.readouterr().err
    assert err == "cxlkv: error: --traces given without any file\n"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("names", [("d1/t.npz", "d2/t.npz"), ("t.npz", "t.npz"), ("synth-mixed.npz", None)])
def test_sweep_refuses_two_traces_with_one_label(tmp_path, capsys, names):
    """A trace's label (its file stem, or synth-FAMILY) names its CSV rows, its sweep.md rows and
    its PNG: two traces with one label would be indistinguishable, so the sweep refuses them
    before replaying anything, naming both."""
    paths = []
    for name in names:
        if name is None:
            continue
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        save_trace(path, _trace())
        paths.append(str(path))
    extra = ["--families", "mixed"] if names[1] is None else []
    out = tmp_path / "s"
    assert cli.main(["policy", "sweep", "--traces", *paths, *extra, "--policies", "lru", "--budgets", "10",
                     "--no-png", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    label = "synth-mixed" if names[1] is None else "t"
    assert err.startswith(f"cxlkv: error: two traces would both be labelled '{label}'")
    assert paths[0] in err and (paths[-1] if names[1] else "--families mixed") in err
    assert "%: lru" not in err and not out.exists()


@pytest.mark.parametrize("policy,extra", [("hw", []), ("hw", ["--param", "window=0"]),
                                          ("ema+prefetch", ["--param", "window=0"])])
def test_replay_refuses_a_prefetch_trigger_without_a_window(trace_file, capsys, policy, extra):
    """prefetch_trigger_all changes nothing with window 0: refused rather than silently ignored."""
    assert cli.main(["policy", "replay", str(trace_file), "--policy", policy, "--entries", "8",
                     "--param", "prefetch_trigger_all=0", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: prefetch_trigger_all: applies only with a prefetch window")


def test_replay_reports_the_modelled_step_time_with_its_parameters(trace_file, capsys):
    """Text and JSON give the modelled time per decode step, its two references and the parameters
    it used (defaults, or --param, numbers not only integers, for every policy)."""
    base = ["policy", "replay", str(trace_file), "--entries", "8"]
    assert cli.main(base + ["--policy", "hw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in ("entry_bytes", "fast_lat_ns", "fast_gbytes_s", "slow_lat_us", "slow_gbytes_s")} == \
        {"entry_bytes": 512, "fast_lat_ns": 250.0, "fast_gbytes_s": 64.0, "slow_lat_us": 50.0, "slow_gbytes_s": 14.0}
    assert out["modelled_steps"] == 40                           # the decode steps; step 0 only writes
    assert out["modelled_step_us_all_fast"] <= out["modelled_step_us"] <= out["modelled_step_us_all_slow"]
    for policy in ("lru", "ema+prefetch"):
        assert cli.main(base + ["--policy", policy, "--param", "fast_lat_ns=140.5", "--param", "slow_gbytes_s=2e1",
                                "--param", "slow_lat_us=0.5", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["fast_lat_ns"], out["slow_gbytes_s"], out["slow_lat_us"]) == (140.5, 20.0, 0.5)
        want = P.replay(_trace(), policy, 8, fast_lat_ns=140.5, slow_gbytes_s=20, slow_lat_us=0.5).summary()
        assert out["modelled_step_us"] == want["modelled_step_us"]
    assert cli.main(base + ["--policy", "lru"]) == 0
    text = capsys.readouterr().out
    assert "modelled time per decode step" in text and "(every read from the fast tier" in text
    assert "fast tier 250 ns, 64 GB/s; slow tier 50 us, 14 GB/s; 512 B entries" in text


@pytest.mark.parametrize("value,message", [("0", "got 0.0"), ("-2", "got -2.0"), ("inf", "got inf"), ("nan", "got nan"),
                                           ("1e400", "got inf"), ("fast", "'fast' is not a number")])
@pytest.mark.parametrize("name", ["fast_lat_ns", "fast_gbytes_s", "slow_lat_us", "slow_gbytes_s"])
def test_replay_refuses_a_timing_parameter_that_is_not_a_positive_finite_number(trace_file, capsys, name, value,
                                                                               message):
    assert cli.main(["policy", "replay", str(trace_file), "--policy", "lru", "--entries", "8",
                     "--param", f"{name}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cxlkv: error: ") and message in err and "Traceback" not in err
    assert name in err and err.count("\n") == 1


def test_sweep_reports_the_modelled_step_time(trace_file, tmp_path, capsys):
    """sweep.csv keeps its columns, in order, and appends the step time and its parameters;
    sweep.md has the step-time table, its parameters in the title, with the two references."""
    out = tmp_path / "s"
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), "--policies", "lru,hw", "--budgets", "10,50",
                     "--param", "slow_lat_us=20", "--out", str(out), "--no-png"]) == 0
    with open(out / "sweep.csv", newline="") as f:
        header = next(csv.reader(f))
    old = ["trace", "family", "policy", "budget_pct", "entries", "events", "reads", "read_hits", "hit_rate",
           "attention_recall", "hit_rate_vs_min", "writes", "fills", "evictions", "prefetches", "prefetch_hits",
           "prefetch_accuracy", "bytes_moved", "no_victim", "params"]
    assert header[:len(old)] == old
    assert header[len(old):] == ["modelled_step_us", "modelled_step_us_all_fast", "modelled_step_us_all_slow",
                                 "entry_bytes", "fast_lat_ns", "fast_gbytes_s", "slow_lat_us", "slow_gbytes_s"]
    rows = _csv(out / "sweep.csv")
    for r in rows:
        assert (r["fast_lat_ns"], r["fast_gbytes_s"], r["slow_lat_us"], r["slow_gbytes_s"]) == ("250", "64", "20", "14")
        want = P.replay(_trace(), r["policy"], int(r["entries"]), slow_lat_us=20).summary()
        assert float(r["modelled_step_us"]) == pytest.approx(want["modelled_step_us"], abs=1e-6)
    md = (out / "sweep.md").read_text()
    assert ("#### Modelled time per decode step (µs; fast tier 250 ns, 64 GB/s; slow tier 20 us, 14 GB/s; "
            "512 B entries;") in md
    fast = rows[0]["modelled_step_us_all_fast"]
    assert f"| t | *every read from the fast tier* | {float(fast):.1f} | {float(fast):.1f} |" in md
    assert "| t | *every read from the slow tier* |" in md
    # parameters that differ between policies: the title says so, and no reference rows
    assert cli.main(["policy", "sweep", "--traces", str(trace_file), "--policies", "lru,hw", "--budgets", "10",
                     "--param", "hw:fast_gbytes_s=32.5", "--out", str(out), "--no-png"]) == 0
    md = (out / "sweep.md").read_text()
    assert "parameters per policy: sweep.csv" in md and "*every read from" not in md
    assert {r["policy"]: r["fast_gbytes_s"] for r in _csv(out / "sweep.csv")} == {"lru": "64", "hw": "32.5"}
