"""`cxlkv quant`: error statistics, attention error, one line, and clean errors for bad input."""
import json

import numpy as np
import pytest

from cxlkv.models import quant as M
from cxlkv.sw import cli


def test_error_json_is_consistent_with_the_bounds(capsys):
    assert cli.main(["quant", "error", "--lines", "2000", "--dist", "outlier", "--json"]) == 0
    rows = {r["format"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(rows) == set(M.FORMATS)
    assert rows["fp16"]["rel_rms"] == 0 and rows["fp16"]["bits_per_value"] == 16
    assert rows["int8"]["max_err_over_amax"] <= 1 / 127
    assert rows["int4"]["max_err_over_amax"] <= 2 / 15 * (1 + 2 ** -10)     # span <= 2 amax
    assert rows["fp8"]["max_err_over_amax"] <= 2 ** -4 * (1 + 2 ** -10)
    assert rows["int8"]["snr_db"] > rows["fp8"]["snr_db"] > rows["int4"]["snr_db"] > 10
    assert rows["int4"]["bits_per_value"] == 5.0 and rows["int8"]["bits_per_value"] == 8.5


def test_json_is_standard_json(capsys):
    """fp16's SNR is infinite (no error at all): written as null, not as Python's Infinity, which
    strict JSON readers refuse."""
    assert cli.main(["quant", "error", "--lines", "10", "--fmt", "fp16", "--json"]) == 0
    text = capsys.readouterr().out
    assert "Infinity" not in text and "NaN" not in text
    row = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert row["snr_db"] is None and row["rel_rms"] == 0


def test_error_table_and_attention(capsys):
    assert cli.main(["quant", "error", "--lines", "500", "--fmt", "int4"]) == 0
    assert "int4" in capsys.readouterr().out
    assert cli.main(["quant", "attention", "--tokens", "64", "--json"]) == 0
    rows = {r["format"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["fp16"]["rel_l2"] == 0
    assert 0 < rows["int8"]["rel_l2"] < rows["int4"]["rel_l2"] < 1


def test_line(capsys):
    assert cli.main(["quant", "line", "--fmt", "int4", "1", "2", "3", "-4.5"]) == 0
    out = capsys.readouterr().out
    assert "20 bytes" in out and out.splitlines()[1][5:] == out.splitlines()[2][5:]
    assert cli.main(["quant", "line", "--fmt", "fp8", "1", "nan"]) == 0
    assert "raw (line holds Inf/NaN), 64 bytes" in capsys.readouterr().out
    # 65519 is within FP16's rounding to its largest value, 65504; 65520 rounds to Inf and is refused
    assert cli.main(["quant", "line", "--fmt", "int8", "65519", "-65519"]) == 0
    assert "in : 65504 -65504" in capsys.readouterr().out
    assert cli.main(["quant", "line", "--fmt", "int8", "-65520"]) == 2
    assert "-65520 is beyond FP16's range (it rounds to Inf" in capsys.readouterr().err
    # a number Python's float takes to inf is beyond the range too; the words inf and nan are values
    assert cli.main(["quant", "line", "--fmt", "int8", "1e400"]) == 2
    assert "1e400 is beyond FP16's range" in capsys.readouterr().err
    assert cli.main(["quant", "line", "--fmt", "int8", "--", "-1E400"]) == 2
    assert "-1E400 is beyond FP16's range" in capsys.readouterr().err
    assert cli.main(["quant", "line", "--fmt", "int8", "--", "-Infinity", "+inf", "-1e-3"]) == 0
    assert "raw (line holds Inf/NaN)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["quant", "error", "--lines", "0"], "--lines must be positive"),
    (["quant", "attention", "--head-dim", "48"], "head_dim must be a multiple of 32"),
    (["quant", "line", "--fmt", "int8", "1", "x"], "values must be numbers"),
])
def test_bad_input_is_one_clean_error(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_synthetic_lines_are_finite_and_seeded():
    a = M.synthetic_lines("outlier", 100, np.random.default_rng(4))
    b = M.synthetic_lines("outlier", 100, np.random.default_rng(4))
    assert np.array_equal(a, b) and ((a & 0x7C00) != 0x7C00).all()
    with pytest.raises(M.QuantError, match="unknown distribution"):
        M.synthetic_lines("cauchy", 1, np.random.default_rng(0))
