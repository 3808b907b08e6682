"""Verilator lint of every generated top, and proof that the lint still catches real width bugs."""
import pytest

from cxlkv import discover
from cxlkv.tb.lint import lint_file
from cxlkv.tb.runner import generate_verilog

TOPS = discover.verilog_tops()


@pytest.mark.parametrize("name", sorted(TOPS))
def test_generated_verilog_lints_clean(name, tmp_path):
    path = tmp_path / f"{name}.v"
    path.write_text(generate_verilog(TOPS[name](), name))
    fatal = [f for f in lint_file(path) if f.waived_by is None]
    assert not fatal, "\n".join(f"{f.code} {f.file}:{f.line}: {f.message}" for f in fatal)


def test_lint_keeps_assignment_width_bugs_fatal(tmp_path):
    path = tmp_path / "bad.v"
    path.write_text(
        "module bad(input wire [7:0] a, output wire [3:0] y, output wire [15:0] z);\n"
        "  assign y = a;\n"          # truncating assignment: a real bug
        "  assign z = a;\n"          # widening assignment: a real bug too
        "endmodule\n")
    fatal = [f for f in lint_file(path) if f.waived_by is None]
    assert {f.code for f in fatal} >= {"WIDTHTRUNC", "WIDTHEXPAND"}


def test_zero_initialisers_are_blanked_with_line_numbers_kept(tmp_path):
    """The lint skips memories' zero initialisers (tb/lint.py) but keeps non-zero ones and the line
    numbers: a bug after them is reported at its own line of the original file."""
    path = tmp_path / "mem.v"
    path.write_text(
        "module mem(input wire clk, input wire [1:0] a, input wire [7:0] w, output wire [3:0] y,\n"
        "           output wire [7:0] r);\n"
        "  reg [7:0] m [0:3];\n"
        "  reg [7:0] rom [0:1];\n"
        "  initial begin\n"
        "    m[0] = 8'h00;\n"
        "    m[1] = 8'h00;\n"
        "    rom[0] = 8'h5a;\n"
        "    rom[1] = 8'h00;\n"
        "  end\n"
        "  always @(posedge clk) m[a] <= w;\n"
        "  assign r = m[a] ^ rom[a[0]];\n"
        "  assign y = w;\n"                     # line 13: a truncating assignment
        "endmodule\n")
    from cxlkv.tb.lint import _without_zero_inits
    work = tmp_path / "work"
    work.mkdir()
    lines = _without_zero_inits(path, work).read_text().splitlines()
    assert len(lines) == 14 and lines[5] == lines[6] == lines[8] == ""
    assert lines[7].strip() == "rom[0] = 8'h5a;"
    work.joinpath("mem.v").unlink()
    work.rmdir()
    fatal = [f for f in lint_file(path) if f.waived_by is None]
    assert [(f.code, f.line, f.file) for f in fatal] == [("WIDTHTRUNC", 13, str(path.resolve()))], fatal
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mem.v"]
