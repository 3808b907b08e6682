"""Real attention traces from a Llama-architecture model (Hugging Face ``transformers``).

Two jobs, both behind the optional extra ``pip install -e .[traces]`` (torch, transformers):

* :func:`dump_trace` runs a causal LM with eager attention and
  ``output_attentions`` one token at a time with a KV cache, exactly as a
  decoder serves a request: a prefill of ``prefill`` tokens, then ``steps``
  decode steps, teacher-forced over given text (or generated, greedy). At
  decode step ``s`` (query position ``t = prefill + s - 1``) it records, for
  every (layer, KV head), the step's append write of position ``t`` and then
  the reads: the positions ``0 .. t`` whose attention weight, averaged over the
  query heads of the KV group (GQA), is in the top-k or at least a threshold.
  The result is a contract trace (:mod:`cxlkv.models.trace`) with provenance
  in ``meta``. The same code runs a local checkpoint of any Llama-family model
  (``--model /path``); it never downloads anything.
* :func:`train_tiny` builds a small Llama-architecture model (RoPE, grouped-query
  attention, a byte-level vocabulary of 256 so no tokenizer is needed), trains
  it on CPU for a bounded time on the Python standard library's source, and
  saves it with its training record and held-out text.

torch and transformers are imported inside the functions, so this module
imports (and its pure-numpy helpers work) without the extra.

Event layout of a dumped trace (``step`` is int32, non-decreasing):

* step 0: the prefill's writes, positions ``0 .. prefill - 1`` of every queue
  (queue = (layer, KV head)), in queue order;
* step ``s >= 1``: for each queue in order, the write of position
  ``prefill + s - 1`` (the new token's K and V are appended before its query
  attends, and the query attends to itself), then that queue's reads in
  ascending position, each with its group-averaged attention weight as
  ``score``.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from cxlkv.errors import CxlkvError
from cxlkv.models.trace import OP_READ, OP_WRITE, Trace, save_trace

#: ``--model`` value that builds a tiny randomly initialised model instead of loading one.
TINY = "tiny"
#: Geometry of the ``tiny`` random model (the tests' and the smoke runs').
TINY_RANDOM = dict(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, max_positions=1024)
#: Geometry trained by ``cxlkv trace train-tiny`` by default.
TINY_TRAINED = dict(layers=4, hidden=128, heads=8, kv_heads=2, intermediate=384, max_positions=512)
#: File name of the training record written next to the weights.
TRAINING_RECORD = "cxlkv_training.json"
#: File name of the held-out text written next to the weights.
HELDOUT_TEXT = "heldout.txt"
#: The byte vocabulary: token = byte value.
BYTE_VOCAB = 256


# --------------------------------------------------------------------------- helpers (numpy only)

def group_average(attn: np.ndarray, n_kv_heads: int) -> np.ndarray:
    """Average attention over the query heads of each KV group.

    ``attn`` is ``[n_heads, n_keys]`` (one query row per head). Query head ``h``
    reads KV head ``h // (n_heads // n_kv_heads)``: the grouping of
    ``transformers``' ``repeat_kv`` (and of every GQA implementation that
    repeats each KV head over consecutive query heads). Returns ``[n_kv_heads, n_keys]``.
    """
    attn = np.asarray(attn)
    n_heads = attn.shape[0]
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise CxlkvError(f"{n_heads} query heads cannot be grouped over {n_kv_heads} KV heads")
    return attn.reshape(n_kv_heads, n_heads // n_kv_heads, -1).mean(axis=1)


def select_positions(weights: np.ndarray, *, topk: int | None = None,
                     threshold: float | None = None) -> np.ndarray:
    """Positions that a step reads from one queue, in ascending order.

    ``weights`` is the group-averaged attention over positions ``0 .. t``.
    Top-k keeps the ``topk`` largest (all of them when fewer exist; ties go to
    the smaller position); threshold keeps every position with weight
    ``>= threshold``. Exactly one of the two is given.
    """
    w = np.asarray(weights, dtype=np.float64)
    if (topk is None) == (threshold is None):
        raise CxlkvError("give exactly one of topk and threshold")
    if topk is not None:
        if topk < 1:
            raise CxlkvError(f"--topk must be >= 1, got {topk}")
        if topk >= len(w):
            return np.arange(len(w))
        # Stable sort of -w: among equal weights the smaller position ranks first.
        order = np.argsort(-w, kind="stable")[:topk]
        return np.sort(order)
    if not 0.0 < threshold <= 1.0:
        raise CxlkvError(f"--threshold must be in (0, 1], got {threshold}")
    return np.flatnonzero(w >= threshold)


#: Windows (positions either side of the newest) for the full-row locality statistics.
FULL_ROW_WINDOWS = (4, 16, 64, 256)
#: Positions counted as sinks in the full-row statistics (StreamingLLM keeps 4).
SINK_POSITIONS = 4


class FullRowStats:
    """Statistics of the complete attention rows (before top-k/threshold), per layer.

    The trace keeps only the selected reads; these numbers say what the
    selection dropped: ``selected_mass`` (share of the row the reads carry),
    ``sink_share`` (mass on positions < 4), ``local_share[W]`` (mass within W
    positions of the query), ``near_zero`` (share of the row's entries below 1%
    of its largest), ``argmax_is_sink`` (rows whose largest weight is on a sink).
    Means over (step, KV head) rows.
    """

    def __init__(self, n_layers):
        self.n_layers = n_layers
        self.acc = [dict(rows=0, selected_mass=0.0, sink_share=0.0, near_zero=0.0, argmax_is_sink=0.0,
                         **{f"local_{w}": 0.0 for w in FULL_ROW_WINDOWS}) for _ in range(n_layers)]

    def add(self, layer, w, picked):
        a = self.acc[layer]
        t = len(w) - 1
        a["rows"] += 1
        a["selected_mass"] += float(w[picked].sum())
        a["sink_share"] += float(w[:SINK_POSITIONS].sum())
        a["near_zero"] += float((w < 0.01 * w.max()).mean())
        a["argmax_is_sink"] += float(int(np.argmax(w)) < SINK_POSITIONS)
        for win in FULL_ROW_WINDOWS:
            a[f"local_{win}"] += float(w[max(0, t - win):].sum())

    def result(self) -> dict:
        def norm(a):
            n = max(a["rows"], 1)
            out = {k: round(v / n, 5) for k, v in a.items() if k != "rows" and not k.startswith("local_")}
            out["local_share"] = {str(w): round(a[f"local_{w}"] / n, 5) for w in FULL_ROW_WINDOWS}
            return out
        total = {k: sum(a[k] for a in self.acc) for k in self.acc[0]}
        return {"definition": self.__doc__.split("\n\n")[1].strip().replace("\n    ", " "),
                "sink_positions": SINK_POSITIONS, **norm(total),
                "per_layer": [norm(a) for a in self.acc]}


class TraceBuilder:
    """Accumulates events in the dump's layout and turns them into a :class:`Trace`."""

    def __init__(self, n_layers: int, n_kv_heads: int):
        self.n_layers, self.n_kv_heads = n_layers, n_kv_heads
        self._chunks = []   # (step, layer, head, pos[], op[], score[])

    def prefill(self, n_tokens: int):
        pos = np.arange(n_tokens, dtype=np.uint32)
        for layer in range(self.n_layers):
            for head in range(self.n_kv_heads):
                self._chunks.append((0, layer, head, pos, np.full(n_tokens, OP_WRITE, np.uint8),
                                     np.zeros(n_tokens, np.float32)))

    def decode_step(self, step: int, new_pos: int, group_weights, select, full_rows=None):
        """One decode step; ``group_weights[layer]`` is ``[n_kv_heads, new_pos + 1]``."""
        for layer in range(self.n_layers):
            for head in range(self.n_kv_heads):
                w = group_weights[layer][head]
                picked = select(w)
                if full_rows is not None:
                    full_rows.add(layer, w, picked)
                pos = np.concatenate(([new_pos], picked)).astype(np.uint32)
                op = np.full(len(pos), OP_READ, np.uint8)
                op[0] = OP_WRITE
                score = np.concatenate(([0.0], w[picked])).astype(np.float32)
                self._chunks.append((step, layer, head, pos, op, score))

    def build(self, meta: dict) -> Trace:
        lengths = [len(c[3]) for c in self._chunks]

        def rep(i, dtype):
            return np.repeat(np.array([c[i] for c in self._chunks], dtype=dtype), lengths)

        def cat(i, dtype):
            if not self._chunks:
                return np.zeros(0, dtype)
            return np.concatenate([c[i] for c in self._chunks]).astype(dtype)

        return Trace(step=rep(0, np.int32), layer=rep(1, np.uint16), head=rep(2, np.uint16),
                     pos=cat(3, np.uint32), op=cat(4, np.uint8), score=cat(5, np.float32),
                     n_layers=self.n_layers, n_kv_heads=self.n_kv_heads, meta=meta)


def parse_layers(spec: str, n_layers: int) -> list[int]:
    """``"0,2,5"`` or ``"0-3"`` or ``"all"`` -> sorted layer indices, each checked ``< n_layers``."""
    if spec.strip().lower() == "all":
        return list(range(n_layers))
    out = set()
    try:
        for part in spec.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                out.update(range(int(a), int(b) + 1))
            elif part:
                out.add(int(part))
    except ValueError:
        raise CxlkvError(f"--save-kv: expected layer indices like '0,3' or '0-2' or 'all', got {spec!r}") from None
    bad = [x for x in out if not 0 <= x < n_layers]
    if not out or bad:
        raise CxlkvError(f"--save-kv: layers must be in 0..{n_layers - 1}, got {spec!r}")
    return sorted(out)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- the optional extra

def _require_torch():
    """Import torch and transformers, or raise a CxlkvError saying how to get them."""
    # Never reach a hub: a model is either built here or read from a local directory. Set before the
    # first import (huggingface_hub reads it then); from_pretrained also gets local_files_only=True.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise CxlkvError(f"this command needs the optional extra 'traces' ({exc.name} is missing): "
                         "pip install -e '.[traces]'") from None
    transformers.utils.logging.disable_progress_bar()  # progress bars would clutter logs and CI output
    return torch, transformers


def versions() -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import torch
        import transformers
        out.update(torch=torch.__version__, transformers=transformers.__version__)
    except ImportError:
        pass
    try:
        from importlib.metadata import version
        out["cxlkv"] = version("cxlkv")
    except Exception:  # noqa: BLE001 - provenance is best effort when run from a bare checkout
        pass
    return out


def llama_config(*, layers, hidden, heads, kv_heads, intermediate, max_positions,
                 rope_theta=10000.0, vocab=BYTE_VOCAB):
    """A ``LlamaConfig`` for a small byte-level model (RoPE, GQA, tied embeddings)."""
    _, transformers = _require_torch()
    if heads % kv_heads or hidden % heads:
        raise CxlkvError(f"hidden {hidden}, heads {heads}, kv heads {kv_heads}: "
                         "hidden must divide by heads and heads by kv heads")
    return transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions, rope_theta=rope_theta,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None)


def config_provenance(config) -> dict:
    """The model config fields that shape attention, with ``rope_theta`` spelled out."""
    d = config.to_dict()
    keep = ("model_type", "architectures", "vocab_size", "hidden_size", "intermediate_size",
            "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
            "max_position_embeddings", "rope_parameters", "rope_scaling", "rope_theta",
            "rms_norm_eps", "hidden_act", "tie_word_embeddings", "sliding_window", "_name_or_path")
    out = {k: d[k] for k in keep if k in d}
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    theta = d.get("rope_theta", rope.get("rope_theta") if isinstance(rope, dict) else None)
    out["rope_theta"] = theta
    out.setdefault("num_key_value_heads", d.get("num_attention_heads"))
    return out


def random_tiny_model(seed: int = 0, **geometry):
    """A randomly initialised tiny Llama (``--model tiny``): no weights are read from anywhere."""
    torch, transformers = _require_torch()
    g = {**TINY_RANDOM, **geometry}
    config = llama_config(**g)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    return model


def load_model(model_spec: str, seed: int = 0):
    """``tiny`` -> random tiny model; a directory -> that local checkpoint, eager attention, float32.

    Returns ``(model, tokenizer_or_None, provenance dict)``. A directory without
    a tokenizer whose vocabulary is 256 is taken to be byte-level (train-tiny's models).
    """
    torch, transformers = _require_torch()
    if model_spec == TINY:
        model = random_tiny_model(seed)
        model.set_attn_implementation("eager")
        return model.eval(), None, {"source": "random tiny LlamaConfig (no weights read)", "init_seed": seed}
    path = Path(model_spec)
    if not path.is_dir() or not (path / "config.json").is_file():
        raise CxlkvError(f"--model: {model_spec!r} is neither 'tiny' nor a local checkpoint directory "
                         "with a config.json (nothing is ever downloaded)")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, attn_implementation="eager", dtype=torch.float32, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CxlkvError(f"--model: cannot load a causal LM from {path}: {exc}") from None
    model.eval()
    tokenizer = None
    if model.config.vocab_size != BYTE_VOCAB or any(path.glob("tokenizer*")):
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise CxlkvError(f"--model: {path} has vocabulary {model.config.vocab_size} "
                             f"but no loadable tokenizer: {exc}") from None
    prov = {"source": f"local checkpoint {path.name}"}
    rec = path / TRAINING_RECORD
    if rec.is_file():
        prov["training"] = json.loads(rec.read_text())
    weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    if weights:
        h = hashlib.sha256()
        for w in weights:
            h.update(w.read_bytes())
        prov["weights_sha256"] = h.hexdigest()
    return model, tokenizer, prov


def _forward_kwargs(model):
    """transformers 5.x renamed ``past_key_values`` to ``cache``; use whichever forward() takes."""
    import inspect
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _out_cache(out):
    return out["cache"] if "cache" in out.keys() else out["past_key_values"]


def _cache_kv(cache, layer):
    """(K, V) of one layer from a transformers cache, ``[batch, kv_heads, positions, head_dim]``."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]


def dump_trace(model_spec: str, text: bytes, *, prefill: int, steps: int, topk: int | None = None,
               threshold: float | None = None, generate: bool = False, seed: int = 0,
               text_name: str = "<text>", text_offset: int = 0, save_kv: str | None = None,
               progress=None):
    """Run the model and return ``(Trace, kv_arrays_or_None)``; see the module docstring.

    ``text`` is the raw bytes of the source text (tokenised byte-wise for a
    byte-level model, by the checkpoint's tokenizer otherwise), starting at
    ``text_offset``. Teacher forcing needs ``prefill + steps`` tokens of text;
    ``generate`` needs ``prefill`` and feeds back the greedy next token.
    """
    torch, transformers = _require_torch()
    if prefill < 1:
        raise CxlkvError(f"--prefill must be >= 1, got {prefill}")
    if steps < 1:
        raise CxlkvError(f"--steps must be >= 1, got {steps}")
    if (topk is None) == (threshold is None):
        raise CxlkvError("give exactly one of --topk and --threshold")
    select_positions(np.ones(2) / 2, topk=topk, threshold=threshold)  # range checks up front
    if not 0 <= text_offset <= len(text):
        raise CxlkvError(f"--text-offset {text_offset} is outside the text ({len(text)} bytes)")
    torch.manual_seed(seed)
    model, tokenizer, model_prov = load_model(model_spec, seed)
    config = model.config
    n_layers = config.num_hidden_layers
    n_heads = config.num_attention_heads
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    kv_layers = parse_layers(save_kv, n_layers) if save_kv else []
    body = text[text_offset:]
    if tokenizer is None:
        ids = list(body)
        tokenization = "bytes (token = byte value)"
    else:
        ids = tokenizer(body.decode("utf-8", errors="replace"), add_special_tokens=True)["input_ids"]
        tokenization = f"tokenizer of the checkpoint ({type(tokenizer).__name__})"
    need = prefill if generate else prefill + steps
    if len(ids) < need:
        raise CxlkvError(f"--text: {text_name} gives {len(ids)} tokens from offset {text_offset}, "
                         f"{'prefill' if generate else 'prefill + steps'} needs {need}")
    limit = getattr(config, "max_position_embeddings", None)
    if limit and prefill + steps > limit:
        raise CxlkvError(f"prefill + steps = {prefill + steps} exceeds the model's "
                         f"max_position_embeddings {limit}")
    select = (lambda w: select_positions(w, topk=topk)) if topk is not None else \
             (lambda w: select_positions(w, threshold=threshold))
    builder = TraceBuilder(n_layers, n_kv)
    builder.prefill(prefill)
    full_rows = FullRowStats(n_layers)
    cache_kw = _forward_kwargs(model)
    tokens = list(ids[:prefill])
    t0 = time.monotonic()
    with torch.no_grad():
        # Prefill: the prompt's K/V enter the cache; its attention rows are not decode reads.
        out = model(input_ids=torch.tensor([ids[:prefill]]), use_cache=True)
        cache = _out_cache(out)
        next_id = ids[prefill] if not generate else int(out.logits[0, -1].argmax())
        nll, n_pred = 0.0, 0
        for s in range(1, steps + 1):
            t = prefill + s - 1  # position of the token fed at this step
            if not generate:
                nll -= float(torch.log_softmax(out.logits[0, -1].double(), -1)[next_id])
                n_pred += 1
            tokens.append(next_id)
            out = model(input_ids=torch.tensor([[next_id]]), use_cache=True, output_attentions=True,
                        **{cache_kw: cache})
            cache = _out_cache(out)
            if out.attentions is None or len(out.attentions) != n_layers:
                raise CxlkvError("the model returned no per-layer attentions: it needs an eager "
                                 "attention implementation that supports output_attentions")
            rows = [group_average(a[0, :, -1, :].double().numpy(), n_kv) for a in out.attentions]
            if rows[0].shape[1] != t + 1:
                raise CxlkvError(f"attention row covers {rows[0].shape[1]} keys at position {t}, "
                                 f"expected {t + 1} (does the model use a sliding window?)")
            builder.decode_step(s, t, rows, select, full_rows)
            if s < steps:
                next_id = int(out.logits[0, -1].argmax()) if generate else ids[t + 1]
            if progress and (s % 64 == 0 or s == steps):
                progress(f"step {s}/{steps} ({time.monotonic() - t0:.1f} s)")
    d = config_provenance(config)
    training = model_prov.get("training", {})
    meta = {
        "generator": "cxlkv.models.hftrace.dump_trace",
        "kind": "real attention (Hugging Face transformers, eager attention, output_attentions)",
        "model": {"spec": model_spec if model_spec == TINY else Path(model_spec).name, **model_prov,
                  "config": d},
        "rope_theta": d.get("rope_theta"),
        "num_key_value_heads": n_kv,
        "num_attention_heads": n_heads,
        "gqa_averaging": "score = mean of the attention weights of the query heads of the KV group "
                         "(query head h reads KV head h // (heads / kv_heads))",
        "selection": {"topk": topk} if topk is not None else {"threshold": threshold},
        "mode": "generated (greedy)" if generate else "teacher-forced",
        "prefill": prefill, "steps": steps,
        "layout": "step 0: prefill writes 0..prefill-1 per queue; step s>=1: per queue, write of "
                  "position prefill+s-1, then reads in ascending position",
        "seed": seed,
        "source_text": {"name": text_name, "offset": text_offset, "bytes": len(body),
                        "sha256": _sha256(text), "tokenization": tokenization,
                        "tokens_used": len(tokens),
                        # The text the trace comes from (byte-level: exactly; else as the tokenizer decodes it).
                        "text_used": (body[:len(tokens)].decode("utf-8", errors="replace") if tokenizer is None
                                      else tokenizer.decode(tokens))[:4096]},
        "training_seconds": training.get("train_seconds"),
        "versions": versions(),
        "dump_seconds": round(time.monotonic() - t0, 2),
        "full_rows": full_rows.result(),
    }
    if n_pred:
        meta["teacher_forced_bits_per_token"] = round(nll / n_pred / math.log(2), 4)
    kv = None
    if kv_layers:
        kv = {"meta": np.array(json.dumps({
            "layers": kv_layers, "layout": "k_L / v_L: [kv_heads, positions, head_dim] float16, "
            "K after RoPE as held in the KV cache", "positions": prefill + steps,
            "model": meta["model"], "source_text": meta["source_text"], "versions": meta["versions"]},
            sort_keys=True))}
        for L in kv_layers:
            k, v = _cache_kv(cache, L)
            kv[f"k_{L}"] = k[0].float().numpy().astype(np.float16)
            kv[f"v_{L}"] = v[0].float().numpy().astype(np.float16)
    return builder.build(meta), kv


def write_dump(out_path, trace, kv=None, kv_out=None):
    save_trace(out_path, trace)
    if kv is not None:
        kv_out = Path(kv_out)
        kv_out.parent.mkdir(parents=True, exist_ok=True)
        with open(kv_out, "wb") as f:
            np.savez_compressed(f, **kv)


# --------------------------------------------------------------------------- training

def stdlib_files() -> tuple[Path, list[Path]]:
    """The standard library's ``.py`` files, sorted by path relative to ``Lib/`` (site-packages excluded)."""
    import sysconfig
    root = Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise CxlkvError(f"the Python standard library is not at {root}")
    files = sorted((p for p in root.rglob("*.py")
                    if not {"site-packages", "dist-packages", "__pycache__"} & set(p.relative_to(root).parts)),
                   key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise CxlkvError(f"no .py files under {root}")
    return root, files


def is_heldout(rel: str, every: int = 20) -> bool:
    """Deterministic split: a file is held out when crc32 of its relative path is 0 mod ``every``."""
    return zlib.crc32(rel.encode()) % every == 0


def stdlib_corpus(every: int = 20):
    """``(train_bytes, heldout_bytes, info)``: files joined by a blank line, split by :func:`is_heldout`."""
    root, files = stdlib_files()
    train, held, held_names = [], [], []
    for p in files:
        rel = p.relative_to(root).as_posix()
        try:
            data = p.read_bytes()
        except OSError:
            continue
        if is_heldout(rel, every):
            held.append(data)
            held_names.append(rel)
        else:
            train.append(data)
    sep = b"\n\n"
    train_b, held_b = sep.join(train), sep.join(held)
    info = {"root": "Python %s standard library (Lib/)" % platform.python_version(),
            "files": len(files), "train_files": len(train), "heldout_files": len(held),
            "heldout_rule": f"crc32(path relative to Lib/) % {every} == 0",
            "train_bytes": len(train_b), "heldout_bytes": len(held_b),
            "train_sha256": _sha256(train_b), "heldout_sha256": _sha256(held_b),
            "heldout_first_files": held_names[:8]}
    return train_b, held_b, info


def train_tiny(out_dir, *, minutes: float = 13.0, max_steps: int = 1200, stop_at_step: int | None = None, batch: int = 8, seq: int = 512,
               lr: float = 2e-3, warmup: int = 50, seed: int = 0, threads: int = 2,
               layers=TINY_TRAINED["layers"], hidden=TINY_TRAINED["hidden"], heads=TINY_TRAINED["heads"],
               kv_heads=TINY_TRAINED["kv_heads"], intermediate=TINY_TRAINED["intermediate"],
               rope_theta: float = 10000.0, log=print):
    """Train the tiny model; stop at ``max_steps`` or after ``minutes`` of wall clock, whichever first.

    The learning rate warms up linearly over ``warmup`` steps and then follows
    a cosine to 10% at ``max_steps``: a function of the step only, so a run
    with ``--minutes 0`` (no time limit) and the same ``--max-steps`` repeats a
    time-limited run's schedule only up to its end: to repeat a run that the
    clock stopped at step N, give the same ``max_steps`` and ``stop_at_step=N``. Batches are random windows of the training
    bytes drawn from a numpy generator seeded with ``seed``.
    """
    torch, transformers = _require_torch()
    for name, v in (("max-steps", max_steps), ("batch", batch), ("seq", seq), ("threads", threads)):
        if v < 1:
            raise CxlkvError(f"--{name} must be >= 1, got {v}")
    if minutes < 0:
        raise CxlkvError(f"--minutes must be >= 0 (0: no time limit), got {minutes}")
    out_dir = Path(out_dir)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train_b, held_b, corpus = stdlib_corpus()
    data = np.frombuffer(train_b, dtype=np.uint8)
    held = np.frombuffer(held_b, dtype=np.uint8)
    config = llama_config(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                          intermediate=intermediate, max_positions=seq, rope_theta=rope_theta)
    model = transformers.LlamaForCausalLM(config)
    model.set_attn_implementation("sdpa")  # training needs no attention weights; eager is for the dump
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_at(step):
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = min(1.0, (step - warmup) / max(1, max_steps - warmup))
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))

    def windows(source, n, gen):
        starts = gen.integers(0, len(source) - seq - 1, size=n)
        return torch.from_numpy(np.stack([source[s:s + seq] for s in starts]).astype(np.int64))

    def heldout_loss(n=16):
        model.eval()
        with torch.no_grad():
            x = windows(held, n, np.random.default_rng(seed + 1))
            loss = float(model(input_ids=x, labels=x).loss)
        model.train()
        return loss

    n_params = sum(p.numel() for p in model.parameters())
    log(f"train-tiny: {layers} layers x {hidden} wide, {heads} query heads / {kv_heads} KV heads, "
        f"{n_params} parameters; batch {batch} x {seq} bytes; up to {max_steps} steps / "
        f"{minutes or 'unlimited'} min on {threads} threads; corpus {corpus['train_bytes']} bytes")
    t0 = time.monotonic()
    step, loss_ema, stop = 0, None, "max-steps"
    while step < max_steps:
        if stop_at_step is not None and step >= stop_at_step:
            stop = "stop-at-step"
            break
        if minutes and time.monotonic() - t0 >= minutes * 60:
            stop = "time limit"
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x = windows(data, batch, rng)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        lv = float(loss.detach())
        loss_ema = lv if loss_ema is None else 0.95 * loss_ema + 0.05 * lv
        if step % 25 == 0 or step == 1:
            el = time.monotonic() - t0
            log(f"step {step} loss {lv:.3f} (ema {loss_ema:.3f}, {loss_ema / math.log(2):.2f} bits/byte) "
                f"lr {lr_at(step - 1):.2e} {el:.0f} s {step * batch * seq / el:.0f} bytes/s")
    train_seconds = time.monotonic() - t0
    hl = heldout_loss()
    log(f"stopped ({stop}) after {step} steps, {train_seconds:.0f} s; held-out loss {hl:.3f} "
        f"({hl / math.log(2):.2f} bits/byte)")
    out_dir.mkdir(parents=True, exist_ok=True)
    model.set_attn_implementation("eager")
    model.save_pretrained(out_dir)
    (out_dir / HELDOUT_TEXT).write_bytes(held_b)
    record = {"generator": "cxlkv.models.hftrace.train_tiny", "seed": seed, "steps": step,
              "stopped_by": stop, "train_seconds": round(train_seconds, 1), "minutes_limit": minutes,
              "max_steps": max_steps, "stop_at_step": stop_at_step, "batch": batch, "seq": seq, "lr": lr, "warmup": warmup,
              "threads": threads, "optimizer": "AdamW(betas=(0.9, 0.95), weight_decay=0.1), clip 1.0, "
              "linear warmup then cosine to 10%", "parameters": n_params,
              "final_train_loss_ema": round(loss_ema, 4) if loss_ema is not None else None,
              "heldout_loss": round(hl, 4), "heldout_bits_per_byte": round(hl / math.log(2), 4),
              "corpus": corpus, "config": config_provenance(config), "versions": versions(),
              "command_line": " ".join(sys.argv)}
    (out_dir / TRAINING_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


# --------------------------------------------------------------------------- calibration of tracegen's `mixed`

#: Parameters of tracegen's ``mixed`` family that the fit moves: (lower, upper, step kind, first step).
#: ``mul`` steps multiply/divide by a factor, ``add`` steps add/subtract; both shrink as the search goes.
FIT_SPACE = {
    "sink_logit": (0.0, 16.0, "add", 2.0),
    "n_sinks": (0, 8, "int", 1),
    "recent_logit": (0.0, 16.0, "add", 2.0),
    "recent_tau": (1.0, 512.0, "mul", 2.0),
    "heavy_scale": (0.0, 4.0, "add", 0.4),
    "noise": (0.0, 4.0, "add", 0.4),
    "rho": (0.0, 0.98, "add", 0.15),
    "retrieval_frac": (0.0, 1.0, "add", 0.2),
    "needle_rate": (0.0, 0.2, "add", 0.01),
    "head_jitter": (0.0, 2.0, "add", 0.25),
}


def fit_features(stats: dict, selected_mass) -> dict:
    """The statistics the fit matches (all in [0, 1]), from tracestats and the selected-mass figure."""
    c = stats["concentration"]
    hs = stats["head_stability"]
    f = {"sink_share": stats["sink_share"],
         **{f"local_{w}": v for w, v in stats["local_share"].items()},
         "top1pct_share": c["top1pct_share"], "top10pct_share": c["top10pct_share"], "gini": c["gini"],
         "entropy_norm": c["entropy_norm"],
         "persistence": stats["persistence_jaccard"],
         "stability_min": hs["min"], "stability_median": hs["median"], "stability_max": hs["max"],
         "cold_reads_64": stats["cold_reads"]["64"]["reads"]}
    if selected_mass is not None:
        f["selected_mass"] = selected_mass
    return {k: float(v) for k, v in f.items() if v is not None}


def _loss(f, target):
    keys = [k for k in target if k in f]
    return float(sum((f[k] - target[k]) ** 2 for k in keys) / len(keys))


def fit_mixed(real, *, evals: int = 120, seed: int = 0, log=print):
    """Fit ``mixed``'s parameters so that its statistics match the real trace's.

    The synthetic trace has the real one's geometry (layers, KV heads, prefill,
    steps) and its reads per row (``k`` = the dump's top-k; ``dense_layers = 0``
    because the dump reads top-k in every layer). The loss is the mean squared
    difference of :func:`fit_features`; the search is a coordinate descent over
    :data:`FIT_SPACE` from ``mixed``'s preset, with steps halved after every
    pass that improves nothing, for at most ``evals`` synth+stats evaluations.
    Deterministic for a given trace, ``evals`` and ``seed`` (the synth seed).
    Returns ``(params, report)``.
    """
    from cxlkv.models import tracegen, tracestats
    meta = real.meta
    topk = (meta.get("selection") or {}).get("topk")
    if not topk:
        raise CxlkvError("fit-mixed needs a top-k dump (its reads per row set the synthetic k)")
    prefill, steps = int(meta["prefill"]), int(meta["steps"])
    target = fit_features(tracestats.trace_stats(real), (meta.get("full_rows") or {}).get("selected_mass"))
    geometry = dict(n_layers=real.n_layers, n_kv_heads=real.n_kv_heads, prefill=prefill, steps=steps)
    fixed = {"k": int(topk), "dense_layers": 0}
    preset = tracegen.FAMILY_PRESETS["mixed"]
    cur = {name: preset.get(name, getattr(tracegen.SynthParams(), name)) for name in FIT_SPACE}
    step = {name: spec[3] for name, spec in FIT_SPACE.items()}
    cache = {}

    def evaluate(params, synth_seed=seed):
        key = (synth_seed, tuple(sorted(params.items())))
        if key not in cache:
            t = tracegen.synth("mixed", seed=synth_seed, **geometry, **fixed, **params)
            cache[key] = fit_features(tracestats.trace_stats(t), t.meta.get("topk_mass_mean"))
        return cache[key]

    n_eval = 0
    best = _loss(evaluate(cur), target)
    start_loss = best
    n_eval += 1
    log(f"fit-mixed: start (mixed preset, k={topk}, dense_layers=0) loss {best:.5f}")
    while n_eval < evals:
        improved = False
        for name, (lo, hi, kind, _) in FIT_SPACE.items():
            for sign in (+1, -1):
                if n_eval >= evals:
                    break
                v = cur[name]
                if kind == "mul":
                    nv = v * step[name] if sign > 0 else v / step[name]
                elif kind == "int":
                    nv = int(v + sign * max(1, round(step[name])))
                else:
                    nv = v + sign * step[name]
                nv = min(max(nv, lo), hi)
                if kind != "int":
                    nv = round(float(nv), 6)
                if nv == v:
                    continue
                trial = {**cur, name: nv}
                loss = _loss(evaluate(trial), target)
                n_eval += 1
                if loss < best - 1e-9:
                    best, cur, improved = loss, trial, True
                    log(f"fit-mixed: eval {n_eval}: {name} = {nv} -> loss {loss:.5f}")
                    break
        if not improved:
            shrunk = False
            for name, (_, _, kind, _) in FIT_SPACE.items():
                if kind == "mul":
                    if step[name] > 1.05:
                        step[name] = step[name] ** 0.5
                        shrunk = True
                elif kind == "int":
                    continue
                else:
                    step[name] /= 2
                    shrunk = True
            if not shrunk:
                break
    fitted = evaluate(cur)
    held = evaluate(cur, seed + 1)   # a different synth seed: is the match more than the seed's luck?
    params = {**fixed, **cur}
    report = {"target": target, "fitted": fitted, "fitted_other_seed": held, "loss": best,
              "loss_other_seed": _loss(held, target), "start_loss": start_loss, "evaluations": n_eval,
              "geometry": geometry, "synth_seed": seed}
    return params, report


def calibrated_params_json(params: dict, report: dict, real_path, real_meta: dict) -> dict:
    """The JSON object ``tracegen.load_params`` reads: parameters, plus ``_``-keys of provenance."""
    return {
        "_comment": "tracegen 'mixed' parameters fitted to a real-model trace by cxlkv.models.hftrace.fit_mixed; "
                    "keys starting with '_' are provenance and are ignored by load_params. "
                    "Use with: cxlkv trace synth --family mixed --params THIS_FILE (and the geometry in _geometry).",
        "_fitted_to": {"trace": Path(real_path).name, "model": real_meta.get("model", {}).get("spec"),
                       "selection": real_meta.get("selection"), "source_text": real_meta.get("source_text")},
        "_geometry": report["geometry"],
        "_fit": {k: report[k] for k in ("loss", "loss_other_seed", "start_loss", "evaluations", "synth_seed")},
        "_target": {k: round(v, 4) for k, v in report["target"].items()},
        "_fitted": {k: round(v, 4) for k, v in report["fitted"].items()},
        **params,
    }
