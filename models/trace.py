"""KV access trace files: the format of ``../shared/spec/contracts.md``, validated.

A trace is a ``.npz`` of equal-length arrays, one element per event, in time
order (``step``, ``layer``, ``head``, ``pos``, ``op``, ``score``) plus the 0-d
geometry ``n_layers`` and ``n_kv_heads`` and an optional 0-d JSON ``meta``.
:func:`load_trace` refuses a file that breaks the rules with a
:class:`~cxlkv.errors.TraceFormatError` naming the key and the first bad event;
nothing downstream ever sees a half-valid trace.
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cxlkv.errors import CxlkvError, TraceFormatError

#: queues (n_layers x n_kv_heads) the simulators keep per-queue state for: Llama-70B has 640; the
#: format allows 65536 x 65536, whose per-queue counters alone would take hundreds of GB
MAX_QUEUES = 1 << 22

OP_READ, OP_WRITE = 0, 1

#: Per-event arrays and the dtype each is stored in.
EVENT_KEYS = {
    "step": np.int32,
    "layer": np.uint16,
    "head": np.uint16,
    "pos": np.uint32,
    "op": np.uint8,
    "score": np.float32,
}
GEOMETRY_KEYS = ("n_layers", "n_kv_heads")


@dataclass
class Trace:
    step: np.ndarray
    layer: np.ndarray
    head: np.ndarray
    pos: np.ndarray
    op: np.ndarray
    score: np.ndarray
    n_layers: int
    n_kv_heads: int
    meta: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.step)

    @property
    def n_queues(self) -> int:
        return self.n_layers * self.n_kv_heads

    def check_queue_state(self, tool: str) -> None:
        """Raise CxlkvError when the geometry has more queues than ``tool`` (a simulator that keeps
        counters per queue) holds state for: a clear refusal instead of an allocation of gigabytes."""
        if self.n_queues > MAX_QUEUES:
            raise CxlkvError(f"the trace's geometry has {self.n_queues:,} queues ({self.n_layers} layers x "
                             f"{self.n_kv_heads} KV heads); {tool} keeps state per queue and holds at most "
                             f"{MAX_QUEUES:,}")

    @property
    def queue(self) -> np.ndarray:
        """Queue index of every event: ``layer * n_kv_heads + head``."""
        return self.layer.astype(np.int64) * self.n_kv_heads + self.head

    def validate(self, path="<trace>"):
        """Check the contract's rules; raise TraceFormatError on the first violation."""
        _validate_arrays(path, {k: getattr(self, k) for k in EVENT_KEYS},
                         self.n_layers, self.n_kv_heads)
        if not isinstance(self.meta, dict):
            raise TraceFormatError(path, "meta", f"must be a dict (a JSON object), got {type(self.meta).__name__}")
        return self


def _first(mask) -> int:
    return int(np.flatnonzero(mask)[0])


def _integer_array(path, key, arr, dtype):
    arr = np.asarray(arr)
    if arr.ndim != 1:
        raise TraceFormatError(path, key, f"must be a 1-d array, got shape {arr.shape}")
    if np.dtype(dtype).kind in "iu":
        if arr.dtype.kind not in "iu":
            raise TraceFormatError(path, key, f"must be an integer array, got dtype {arr.dtype}")
        info = np.iinfo(dtype)
        if arr.size:
            bad = (arr < info.min) | (arr > info.max)
            if bad.any():
                raise TraceFormatError(path, key, f"value {arr[_first(bad)]} does not fit {np.dtype(dtype)}",
                                       _first(bad))
    else:
        if arr.dtype.kind != "f":
            raise TraceFormatError(path, key, f"must be a float array, got dtype {arr.dtype}")
        if arr.size and arr.dtype.itemsize > np.dtype(dtype).itemsize:
            # a wider float beyond the stored type's range would become inf in the cast: say so first
            bad = np.isfinite(arr) & (np.abs(arr) > float(np.finfo(dtype).max))
            if bad.any():
                raise TraceFormatError(path, key, f"value {arr[_first(bad)]:g} does not fit {np.dtype(dtype)}",
                                       _first(bad))
    return arr.astype(dtype, copy=False)


def _geometry_value(path, key, value) -> int:
    arr = np.asarray(value)
    if arr.ndim != 0 or arr.dtype.kind not in "iu":
        raise TraceFormatError(path, key, f"must be a 0-d integer, got dtype {arr.dtype} shape {arr.shape}")
    v = int(arr)
    if not 1 <= v <= 65536:
        raise TraceFormatError(path, key, f"must be in 1..65536, got {v}")
    return v


def _validate_arrays(path, arrays: dict, n_layers: int, n_kv_heads: int) -> dict:
    out = {key: _integer_array(path, key, arrays[key], dtype) for key, dtype in EVENT_KEYS.items()}
    n = len(out["step"])
    for key, arr in out.items():
        if len(arr) != n:
            raise TraceFormatError(path, key, f"has {len(arr)} events but 'step' has {n}",
                                   min(len(arr), n))
    if n == 0:
        return out
    checks = (
        ("layer", out["layer"] >= n_layers, f"layer index out of range (n_layers = {n_layers})"),
        ("head", out["head"] >= n_kv_heads, f"head index out of range (n_kv_heads = {n_kv_heads})"),
        ("op", out["op"] > OP_WRITE, "op must be 0 (read) or 1 (write)"),
        ("score", ~np.isfinite(out["score"]), "score is not finite (NaN or Inf)"),
        ("score", out["score"] < 0, "score is negative"),
        ("score", (out["op"] == OP_WRITE) & (out["score"] != 0), "a write's score must be 0"),
    )
    # the earliest bad event in the file, whichever rule it breaks (ties: the order above)
    found = [(_first(bad), k, key, f"{message}: {out[key][_first(bad)].item()!r}")
             for k, (key, bad, message) in enumerate(checks) if bad.any()]
    dec = np.diff(out["step"].astype(np.int64)) < 0
    if dec.any():
        i = _first(dec) + 1
        found.append((i, len(checks), "step", f"step decreases ({out['step'][i - 1]} -> {out['step'][i]})"))
    if found:
        i, _, key, message = min(found)
        raise TraceFormatError(path, key, message, i)
    return out


def load_trace(path) -> Trace:
    """Read and validate a trace file. Raises TraceFormatError (a CxlkvError) on any violation."""
    path = Path(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise TraceFormatError(path, "(file)", "no such file") from None
    except OSError as exc:
        raise TraceFormatError(path, "(file)", f"cannot be opened ({exc.strerror})") from None
    # Our own file object: numpy leaks its handle when the archive is corrupt.
    with f:
        head = f.read(6)
        f.seek(0)
        if not head.startswith((b"PK", b"\x93NUMPY")):
            # numpy would try the bytes as a pickle and advise loading it unsafely
            raise TraceFormatError(path, "(file)", "not an .npz archive (no zip header): a trace is the .npz of "
                                   "docs/contracts.md (\"Trace files\"), as `cxlkv trace synth` or `dump-hf` write it")
        try:
            npz = np.load(f, allow_pickle=False)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise TraceFormatError(path, "(file)", f"not a readable .npz trace ({exc})") from None
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise TraceFormatError(path, "(file)", "not an .npz archive (a bare .npy array?)")
        with npz:
            for key in (*EVENT_KEYS, *GEOMETRY_KEYS):
                if key not in npz.files:
                    raise TraceFormatError(path, key, "missing")
            try:
                arrays = {key: npz[key] for key in EVENT_KEYS}
                geometry = {key: npz[key] for key in GEOMETRY_KEYS}
                meta_raw = npz["meta"] if "meta" in npz.files else None
            except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
                raise TraceFormatError(path, "(file)", f"corrupt archive member ({exc})") from None
    n_layers = _geometry_value(path, "n_layers", geometry["n_layers"])
    n_kv_heads = _geometry_value(path, "n_kv_heads", geometry["n_kv_heads"])
    out = _validate_arrays(path, arrays, n_layers, n_kv_heads)
    meta = {}
    if meta_raw is not None:
        if meta_raw.ndim != 0 or meta_raw.dtype.kind not in "US":
            raise TraceFormatError(path, "meta", "must be a 0-d string array holding JSON")
        text = meta_raw.item()
        try:
            if isinstance(text, bytes):         # a byte-string array (dtype S) holds UTF-8 JSON too
                text = text.decode("utf-8")
            meta = json.loads(text)
        except UnicodeDecodeError:
            raise TraceFormatError(path, "meta", "a byte string that is not UTF-8") from None
        except json.JSONDecodeError as exc:
            raise TraceFormatError(path, "meta", f"not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise TraceFormatError(path, "meta", f"must hold a JSON object (provenance by name), got {type(meta).__name__}")
    return Trace(**out, n_layers=n_layers, n_kv_heads=n_kv_heads, meta=meta)


def save_trace(path, trace: Trace, *, compress=True):
    """Write a trace in the contract's format (validated first: a bad trace is never written)."""
    trace.validate(path)
    arrays = {key: np.asarray(getattr(trace, key), dtype=dtype) for key, dtype in EVENT_KEYS.items()}
    arrays["n_layers"] = np.array(trace.n_layers, dtype=np.int64)
    arrays["n_kv_heads"] = np.array(trace.n_kv_heads, dtype=np.int64)
    arrays["meta"] = np.array(json.dumps(trace.meta, sort_keys=True))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:  # np.savez would append .npz to a name without it
        (np.savez_compressed if compress else np.savez)(f, **arrays)


def shuffle_reads(trace: Trace, seed: int) -> Trace:
    """``trace`` with the reads of each (step, queue) in a random order: every read moves to another
    read's place of the same step and queue, so writes, steps and each queue's write/read pattern
    stay where they were; only the order in which a query's reads arrive changes. Deterministic
    per ``seed`` (numpy PCG64). A robustness check: anything that gains from reads arriving in
    ascending position order (neighbour prefetch on the synthetic and dumped traces) shows it."""
    n = len(trace)
    reads = np.flatnonzero(np.asarray(trace.op) == OP_READ)
    queue = trace.queue[reads]
    step = np.asarray(trace.step, dtype=np.int64)[reads]
    # the places, in file order within each (step, queue) group, and the same reads in a random
    # order within each group: the k-th place of a group receives the group's k-th shuffled read
    places = reads[np.lexsort((reads, queue, step))]
    shuffled = reads[np.lexsort((np.random.default_rng(seed).random(len(reads)), queue, step))]
    order = np.arange(n)
    order[places] = shuffled
    meta = dict(trace.meta)
    meta["shuffled_reads"] = {"seed": int(seed), "note": "reads of each (step, queue) in a random order; "
                                                         "writes and steps in place"}
    out = Trace(*(np.asarray(getattr(trace, k))[order] for k in EVENT_KEYS), trace.n_layers, trace.n_kv_heads,
                meta=meta)
    return out.validate()
