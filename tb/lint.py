"""``make lint``: Verilator lint of the generated Verilog, with an explicit waiver list.

Amaranth's Verilog always triggers some Verilator warnings that are not bugs:
Amaranth defines its own operator semantics (operands are extended to the
result width before the operation), declares registers with their reset
values, names sub-modules ``top.sub`` inside one file, and leaves unused bits
of intermediate wires. Those classes are waived below, each with its reason.
Everything else is fatal, in particular width mismatches on *assignments* and
*port connections* (an Amaranth ``.eq()`` never produces one, so one appearing
means hand-written or instantiated Verilog is wrong), multiple drivers,
latches and combinational loops.

One class of statement is not given to Verilator at all: a memory's zero initialiser
(``mem[123] = 16'h0000;`` inside an ``initial`` block). Amaranth sets every memory's initial
value and yosys writes one such statement per word, 1.1 million lines in ``controller_llama70b``,
where they took nine tenths of the lint time. Each is a constant of the memory's own width
written by yosys, so the lint reads a copy with those lines blanked (line numbers kept);
non-zero initialisers (ROMs) stay.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: (warning code, regex on the message or None for all, why it is waived)
WAIVERS = (
    ("DECLFILENAME", None, "Amaranth emits every sub-module of a design into one file as `top.sub`"),
    ("PROCASSINIT", None, "Amaranth declares registers with their reset value and assigns them in always blocks"),
    ("UNUSEDSIGNAL", None, "Amaranth's intermediate wires keep bits no consumer reads (slices of products)"),
    ("UNUSEDPARAM", None, "Amaranth emits unused localparams for enum/const encodings"),
    ("CASEINCOMPLETE", None, "Amaranth's switch statements rely on the preceding default assignment"),
    ("WIDTHEXPAND", r"^(Operator (?!ASSIGN)\w+|Logical operator \w+) expects",
     "Amaranth's operators extend operands to the operation width by definition"),
    ("WIDTHTRUNC", r"^(Operator (?!ASSIGN)\w+|Logical operator \w+) expects",
     "Amaranth's logical operators (`!x` on a vector) reduce by definition"),
)

_WARN = re.compile(r"^%(Warning|Error)-([A-Z0-9_]+): ([^:]+):(\d+):(\d+): (.*)$")


@dataclass
class Finding:
    code: str
    file: str
    line: int
    message: str
    waived_by: str | None


#: a memory word's zero initialiser as yosys writes it (blanked before lint: see above)
_ZERO_INIT = re.compile(r"^[ \t]+\\?[\w$.]+ ?\[\d+\] = \d+'h0+;$", re.MULTILINE)


def _without_zero_inits(path: Path, workdir: Path) -> Path:
    """``path``, or a copy in ``workdir`` with the memories' zero initialisers blanked (same line numbers)."""
    text = path.read_text()
    blanked, n = _ZERO_INIT.subn("", text)
    if n == 0:
        return path
    out = workdir / path.name
    out.write_text(blanked)
    return out


def lint_file(path: Path) -> list[Finding]:
    from cxlkv.tb.runner import verilator_env
    env = verilator_env(dict(__import__("os").environ))
    path = path.resolve()
    with tempfile.TemporaryDirectory(prefix="cxlkv-lint-") as work:
        linted = _without_zero_inits(path, Path(work))
        proc = subprocess.run(["verilator", "--lint-only", "-Wall", "-Wno-fatal", str(linted)],
                              capture_output=True, text=True, env=env, cwd=path.parent)
    findings = []
    for line in proc.stderr.splitlines():
        m = _WARN.match(line)
        if not m:
            continue
        kind, code, file, lineno, _, msg = m.groups()
        file = str(path) if file == str(linted) else file
        waived = None
        if kind == "Warning":
            for wcode, pattern, why in WAIVERS:
                if wcode == code and (pattern is None or re.search(pattern, msg)):
                    waived = why
                    break
        findings.append(Finding(code, file, int(lineno), msg, waived))
    if proc.returncode != 0 and not any(f.waived_by is None for f in findings):
        findings.append(Finding("VERILATOR", str(path), 0, proc.stderr.strip()[-2000:], None))
    return findings


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.tb.lint", description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, help="Verilog files or directories of them")
    ap.add_argument("-v", "--verbose", action="store_true", help="also list waived warnings")
    args = ap.parse_args(argv)
    files = []
    for p in args.paths:
        files += sorted(p.glob("*.v")) if p.is_dir() else [p]
    if not files:
        print("lint: no Verilog files found (run `make verilog` first)", file=sys.stderr)
        return 1
    bad = 0
    for f in files:
        findings = lint_file(f)
        fatal = [x for x in findings if x.waived_by is None]
        waived = len(findings) - len(fatal)
        print(f"{f}: {len(fatal)} fatal, {waived} waived")
        for x in fatal + ([x for x in findings if x.waived_by] if args.verbose else []):
            tag = "WAIVED" if x.waived_by else "FATAL"
            print(f"  {tag} {x.code} {x.file}:{x.line}: {x.message}")
        bad += len(fatal)
    print(f"lint: {len(files)} files, {bad} fatal findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
