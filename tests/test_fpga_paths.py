"""Failing endpoints from nextpnr's SDF (cxlkv.sw.fpga_paths, `python -m cxlkv.sw.fpga paths`),
on small SDF files written here in nextpnr-ecp5's form."""
from __future__ import annotations

import pytest

from cxlkv.errors import CxlkvError
from cxlkv.sw import fpga
from cxlkv.sw.fpga_paths import analyse, load_sdf, report, signal_of


def _cell(ctype, name, arcs, checks=""):
    """One CELL as nextpnr-ecp5 writes it: ``arcs`` [(from, to, ps)], ``checks`` its TIMINGCHECK body."""
    paths = "\n".join(f"        (IOPATH {a} {b} (200:220:{d}) (200:220:{d}))" for a, b, d in arcs)
    timing = f"\n    (TIMINGCHECK\n      {checks}\n    )" if checks else ""
    return f"""  (CELL
    (CELLTYPE "{ctype}")
    (INSTANCE {name})
    (DELAY
      (ABSOLUTE
{paths}
      )
    ){timing}
  )
"""


def _ff(name, clk_q=500, setup_di=0):
    return _cell("TRELLIS_FF", name, [("CLK", "Q", clk_q)],
                 f"(SETUPHOLD (posedge DI) (posedge CLK) ({setup_di}:{setup_di}:{setup_di}) (0:0:0))")


def _lut(name, a_f=250, b_f=240):
    return _cell("TRELLIS_COMB", name, [("A", "F", a_f), ("B", "F", b_f)])


def _sdf(wires, cells):
    nets = "\n".join(f"        (INTERCONNECT {a} {b} (0:0:{d}) (0:0:{d}))" for a, b, d in wires)
    return f"""(DELAYFILE
  (SDFVERSION "3.0")
  (DESIGN "top")
  (VENDOR "nextpnr")
  (DIVIDER /)
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
{nets}
      )
    )
  )
{''.join(cells)})
"""


# a.q_TRELLIS_FF_Q (0.5) -> 1.0 -> lut A->F (0.25) -> 1.5 -> b.q_TRELLIS_FF_Q_3 DI (setup 0.3): 3.55 ns
# c.q_TRELLIS_FF_Q (0.5) -> 0.2 -> lut B->F (0.24) -> the same wire: 2.44 ns (not the worst into b)
# a.q -> 0.4 -> d.q_TRELLIS_FF_Q CE (no setup listed: 0): 0.9 ns
DESIGN = _sdf(
    [("a.q_TRELLIS_FF_Q/Q", "l/A", 1000), ("c.q_TRELLIS_FF_Q/Q", "l/B", 200),
     ("l/F", "b.q_TRELLIS_FF_Q_3/DI", 1500), ("a.q_TRELLIS_FF_Q/Q", "d.q_TRELLIS_FF_Q/CE", 400),
     (r"\$gbuf\$clk/CLKO", "a.q_TRELLIS_FF_Q/CLK", 0)],
    [_ff("a.q_TRELLIS_FF_Q"), _ff("b.q_TRELLIS_FF_Q_3", setup_di=300), _ff("c.q_TRELLIS_FF_Q"),
     _ff("d.q_TRELLIS_FF_Q"), _lut("l")])


@pytest.fixture
def design(tmp_path):
    path = tmp_path / "top.sdf"
    path.write_text(DESIGN)
    return path


def test_worst_path_is_the_latest_arrival(design):
    a = analyse(load_sdf(design), 8.0)
    worst, pin = a.endpoints[0]
    assert pin == "b.q_TRELLIS_FF_Q_3/DI" and worst == pytest.approx(3.55)
    assert [p for _, p in a.path(pin)] == ["a.q_TRELLIS_FF_Q/Q", "l/A", "l/F", "b.q_TRELLIS_FF_Q_3/DI"]
    assert dict((p, t) for t, p in a.endpoints)["d.q_TRELLIS_FF_Q/CE"] == pytest.approx(0.9)
    assert not a.failing
    # one LUT; 2.5 ns of its 3.25 ns arrival are the two routes (the LUT's 0.25 and clock-to-out are not)
    assert a.levels(pin) == 1 and a.levels("d.q_TRELLIS_FF_Q/CE") == 0
    assert a.route_ns(pin) == pytest.approx(2.5) and a.route_ns("d.q_TRELLIS_FF_Q/CE") == pytest.approx(0.4)


@pytest.mark.parametrize("period,failing", [(3.55, 0), (3.5, 1), (0.85, 2)])
def test_failing_endpoints_at_a_period(design, period, failing):
    a = analyse(load_sdf(design), period)
    assert len(a.failing) == failing
    if failing:
        assert a.by_start() == [("a.q", failing)]
        # 3.55 - period, and 0.9 - period for d's CE when it fails too
        assert a.total_ns == pytest.approx(3.55 - period + (0.9 - period if failing == 2 else 0))
        assert a.by_end()[0] == ("b.q", 1, pytest.approx(3.55))
        assert a.by_levels()[-1] == (1, 1, pytest.approx(3.55), pytest.approx(2.5 / 3.25))
        # a.q drives two loads (l/A and d's CE): a wide net at a threshold of 2, not of 3
        assert a.loads["a.q_TRELLIS_FF_Q/Q"] == 2
        assert a.wide_nets(2) == [("a.q_TRELLIS_FF_Q/Q", 2, failing, pytest.approx(1.0))]
        assert a.wide_nets(3) == []


def test_signal_names_drop_the_cell_suffix():
    assert signal_of("core.tracker.snap_mx_TRELLIS_FF_Q_167/DI") == "core.tracker.snap_mx"
    assert signal_of("core.x_TRELLIS_FF_Q/Q") == "core.x"
    assert signal_of("core.mem.0.4$DPRAM_COMB3/WAD0") == "core.mem.0.4$DPRAM_COMB3"


def test_cli_reports_counts_and_the_path(design, capsys):
    assert fpga.main(["paths", str(design), "--period", "3.5", "--paths", "1"]) == 0
    out = capsys.readouterr().out
    assert "worst 3.55 ns" in out and "1 fail at 3.5 ns (285.71 MHz), 0.05 ns beyond it in all" in out
    assert "      1     3.55  b.q" in out and "l/F" in out
    assert "      1       1     3.55  0.77" in out
    assert "nets of 64 loads or more on failing paths: 0" in out


@pytest.mark.parametrize("text,message", [
    ("not an sdf", "no complete DELAYFILE"),
    ("(DELAYFILE (TIMESCALE 1ps)))", "unbalanced"),
    ("(DELAYFILE (TIMESCALE 1ps) (CELL (CELLTYPE \"top\") (INSTANCE )))", "no register"),
    ("(DELAYFILE (TIMESCALE 3fs))", "unknown TIMESCALE"),
    (DESIGN.replace("(0:0:1500)", "(0:0:fast)"), "bad delay"),
    (DESIGN.replace('(INTERCONNECT l/F b.q_TRELLIS_FF_Q_3/DI', '(INTERCONNECT l/F l/B (0:0:1)) (INTERCONNECT l/F b.q_TRELLIS_FF_Q_3/DI'),
     "combinational loop"),
])
def test_bad_sdf_is_a_clear_error(tmp_path, capsys, text, message):
    path = tmp_path / "top.sdf"
    path.write_text(text)
    with pytest.raises(CxlkvError, match=message):
        report(path, 8.0)
    assert fpga.main(["paths", str(path)]) == 2
    assert message.split()[0] in capsys.readouterr().err


def test_missing_sdf_and_bad_period(tmp_path, design, capsys):
    assert fpga.main(["paths", str(tmp_path / "none.sdf")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert fpga.main(["paths", str(design), "--period", "0"]) == 2
    assert "--period must be positive" in capsys.readouterr().err
    assert fpga.main(["paths", str(design), "--paths", "-1"]) == 2
    assert "0 or more" in capsys.readouterr().err


def test_cli_into_a_closed_pipe_ends_quietly(design, monkeypatch):
    # `python -m cxlkv.sw.fpga paths top.sdf | head -1`: the reader closes first; exit 0, no traceback
    def closed(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr("builtins.print", closed)
    assert fpga.main(["paths", str(design)]) == 0
