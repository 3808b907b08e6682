"""The `cxlkv` command: help for every subcommand, clean errors, a lean start-up."""
import subprocess
import sys

import pytest

from cxlkv.sw import cli


def test_top_level_help(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert "COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("name", [n for n in cli.SUBCOMMANDS if cli._load(n) is not None])
def test_subcommand_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([name, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip()


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2


def test_console_script_starts_without_heavy_imports():
    code = ("import sys; from cxlkv.sw import cli; cli.build_parser(); "
            "heavy = [m for m in ('numpy', 'numba', 'amaranth', 'cocotb') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "", f"start-up imports {out.strip()}"
