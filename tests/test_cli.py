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


@pytest.mark.parametrize("name", cli.SUBCOMMANDS)
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


def test_every_subcommand_has_its_module():
    """No placeholder: a listed subcommand without its module would fail the parser, not vanish."""
    import importlib
    for name in cli.SUBCOMMANDS:
        assert importlib.import_module(f"cxlkv.sw.cli_{name}").run


def test_trace_description_names_every_action():
    import argparse
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    trace = sub.choices["trace"]
    actions = next(a for a in trace._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"synth", "info", "validate", "dump-hf"} <= set(actions)
    text = " ".join(trace.description.split())
    assert f"ACTION is one of: {', '.join(actions)} " in text


def test_ctl_build_names_are_the_models():
    """cxlkv ctl --build's names (kept in the module so --help imports no model) are ControllerModel's."""
    import inspect

    from cxlkv.models.controller import ControllerModel
    from cxlkv.sw import cli_ctl
    names = list(inspect.signature(ControllerModel.__init__).parameters)[1:]
    assert list(cli_ctl.BUILD_NAMES) == names
    assert set(cli_ctl.BUILD_TEXT + cli_ctl.BUILD_FLAGS) <= set(names)
