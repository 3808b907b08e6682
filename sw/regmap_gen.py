"""Generate everything that derives from the register map source, ``hdl/regs.rdl``.

    python -m cxlkv.sw.regmap_gen          # write the generated files
    python -m cxlkv.sw.regmap_gen --check  # exit 1 if any generated file is stale

Outputs: ``models/regmap.py`` (the table the CSR gateware, the register-file
model and the driver use), ``sw/include/cxlkv_regs.h`` (PeakRDL cheader) and
``docs/regmap.md``. Needs ``systemrdl-compiler`` and ``peakrdl-cheader`` (test extra).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "hdl" / "regs.rdl"
OUT_TABLE = ROOT / "models" / "regmap.py"
OUT_HEADER = ROOT / "sw" / "include" / "cxlkv_regs.h"
OUT_DOC = ROOT / "docs" / "regmap.md"


def _compile():
    from systemrdl import RDLCompiler
    rdlc = RDLCompiler()
    rdlc.compile_file(str(SOURCE))
    return rdlc.elaborate().top


def _text(node, prop):
    v = node.get_property(prop)
    return " ".join(str(v).split()) if v else ""


def _collect(top):
    from systemrdl.node import FieldNode, MemNode, RegNode
    regs, mems = [], []
    for node in top.children():
        if isinstance(node, RegNode):
            fields = []
            for f in node.fields():
                assert isinstance(f, FieldNode)
                sw = ("r" if f.is_sw_readable else "") + ("w" if f.is_sw_writable else "")
                hw = ("r" if f.is_hw_readable else "") + ("w" if f.is_hw_writable else "") or "na"
                onwrite = f.get_property("onwrite")
                fields.append(dict(
                    name=f.inst_name, lsb=f.lsb, width=f.width, sw=sw, hw=hw,
                    reset=f.get_property("reset"),
                    woclr=bool(onwrite is not None and onwrite.name == "woclr"),
                    singlepulse=bool(f.get_property("singlepulse")),
                    hwset=bool(f.get_property("hwset")),
                    range_min=f.get_property("range_min", default=None),
                    range_max=f.get_property("range_max", default=None),
                    desc=_text(f, "desc")))
            regs.append(dict(name=node.inst_name, offset=node.absolute_address, width=node.size * 8,
                             external=bool(node.external), desc=_text(node, "desc") or _text(node, "name"),
                             fields=fields))
        elif isinstance(node, MemNode):
            mems.append(dict(name=node.inst_name, offset=node.absolute_address,
                             entries=node.get_property("mementries"), width=node.get_property("memwidth"),
                             desc=_text(node, "desc")))
    return regs, mems


def render_table(regs, mems, digest) -> str:
    out = ['"""Register map table. GENERATED from hdl/regs.rdl by `python -m cxlkv.sw.regmap_gen`: do not edit."""',
           "from cxlkv.models.regdefs import Field, Memory, Register", "",
           f'SOURCE_SHA256 = "{digest}"', "", "REGISTERS = ("]
    for r in regs:
        out.append(f"    Register({r['name']!r}, {r['offset']:#05x}, {r['width']}, external={r['external']}, "
                   f"desc={r['desc']!r}, fields=(")
        for f in r["fields"]:
            rst = "None" if f["reset"] is None else f"{f['reset']:#x}"
            out.append(f"        Field({f['name']!r}, {f['lsb']}, {f['width']}, {f['sw']!r}, {f['hw']!r}, {rst}, "
                       f"woclr={f['woclr']}, singlepulse={f['singlepulse']}, hwset={f['hwset']}, range_min={f['range_min']}, "
                       f"range_max={f['range_max']}, desc={f['desc']!r}),")
        out.append("    )),")
    out.append(")")
    out.append("")
    out.append("MEMORIES = (")
    for m in mems:
        out.append(f"    Memory({m['name']!r}, {m['offset']:#05x}, {m['entries']}, {m['width']}, desc={m['desc']!r}),")
    out.append(")")
    out.append("")
    out.append("BY_NAME = {r.name: r for r in REGISTERS}")
    out.append("")
    return "\n".join(out)


def render_doc(regs, mems) -> str:
    out = ["# Register map", "",
           "GENERATED from `hdl/regs.rdl` by `python -m cxlkv.sw.regmap_gen`; do not edit.",
           "Bus, access rules and error behaviour: [regs.md](regs.md).", "",
           "| offset | register | width | description |", "| --- | --- | --- | --- |"]
    for r in regs:
        ext = " (external)" if r["external"] else ""
        out.append(f"| `{r['offset']:#05x}` | [{r['name']}](#{r['name'].lower()}) | {r['width']}{ext} | {r['desc']} |")
    for m in mems:
        out.append(f"| `{m['offset']:#05x}` | [{m['name']}](#{m['name'].lower()}) | {m['entries']} x {m['width']} | {m['desc']} |")
    for r in regs:
        out += ["", f"## {r['name']}", "", f"Offset `{r['offset']:#05x}`, {r['width']} bits. {r['desc']}", "",
                "| bits | field | sw | hw | reset | range | description |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for f in r["fields"]:
            bits = f"{f['lsb'] + f['width'] - 1}:{f['lsb']}" if f["width"] > 1 else f"{f['lsb']}"
            sw = f["sw"] + (" (w1c)" if f["woclr"] else "") + (" (pulse)" if f["singlepulse"] else "")
            hw = f["hw"] + (" (set)" if f["hwset"] else "")
            rng = ""
            if f["range_min"] is not None or f["range_max"] is not None:
                rng = f"{f['range_min'] or 0} … {f['range_max'] if f['range_max'] is not None else (1 << f['width']) - 1}"
            rst = "" if f["reset"] is None else f"`{f['reset']:#x}`"
            out.append(f"| {bits} | {f['name']} | {sw} | {hw} | {rst} | {rng} | {f['desc']} |")
    for m in mems:
        out += ["", f"## {m['name']}", "", f"Offset `{m['offset']:#05x}`, {m['entries']} entries of {m['width']} bits, "
                f"read only, low word first. {m['desc']}"]
    return "\n".join(out) + "\n"


#: what the C header's user must know that PeakRDL's text does not say
HEADER_PREAMBLE = """\
// cxlkv register map: generated from hdl/regs.rdl by `make regmap` (sw/regmap_gen.py); do not edit.
// Needs C11 or C++11 (static_assert); the register struct uses GCC/Clang's packed attribute.
// 64-bit counters: read the low word first, then the high word: the low word's read latches the
// high word (one latch per counter, docs/regs.md). A single 64-bit access through the struct
// member is split by the bus in an order C does not fix: read counters as two 32-bit words.
"""


def render_header(top) -> str:
    from peakrdl_cheader.exporter import CHeaderExporter
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cxlkv_regs.h"
        # reuse_typedefs=False: each counter gets a macro named after it (CXLKV_REGS__READS__...),
        # not after a hash of its shared type's description
        CHeaderExporter().export(top, str(path), reuse_typedefs=False)
        return HEADER_PREAMBLE + path.read_text()


def generate() -> dict[Path, str]:
    top = _compile()
    regs, mems = _collect(top)
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    return {OUT_TABLE: render_table(regs, mems, digest), OUT_DOC: render_doc(regs, mems),
            OUT_HEADER: render_header(top)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cxlkv.sw.regmap_gen", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that the generated files are current")
    args = ap.parse_args(argv)
    stale = []
    for path, text in generate().items():
        current = path.read_text() if path.is_file() else None
        if current != text:
            stale.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    for p in stale:
        print(f"{'stale' if args.check else 'wrote'}: {p.relative_to(ROOT)}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
