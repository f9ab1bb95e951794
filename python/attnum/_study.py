"""The head study, the loss, the whole study and capture files from Python: the same library
calls as `attnum heads`, `attnum loss`, `attnum study` and the capture reader, in this process
(the GIL released while they compute), writing the same result files, bit for bit."""
from __future__ import annotations

import json as _json
import os as _os
import shutil as _shutil
import tempfile as _tempfile
from pathlib import Path as _Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as _np

from . import _core

_DEFAULT_CONDITIONS = tuple(c["name"] for c in _core.conditions())


def _names(x, what: str) -> List[str]:
    """A list of names from "a,b", ["a", "b"] or ("a",)."""
    if isinstance(x, str):
        out = [p for p in x.split(",") if p]
    else:
        out = [str(p) for p in x]
    if not out:
        raise ValueError(f"{what}: no name given")
    return out


# --------------------------------------------------------------------------------------------
# Capture files

class Capture:
    """One capture file (`attnum capture`, `attnum study`): the post-RoPE q, k, v of every layer of
    a model on one text. layers[l] is {"q": [n_head, n_tok, d_head], "k", "v": [n_head_kv, n_tok,
    d_head]} float32 (bf16 values, exactly); metadata the file's string map (model, text, tokens,
    linear precision, ...); tensors every tensor by name; path the file."""

    def __init__(self, path: str, metadata: Dict[str, str], tensors: Dict[str, _np.ndarray], dtypes: Dict[str, str]):
        self.path = path
        self.metadata = metadata
        self.tensors = tensors
        self.dtypes = dtypes
        n = 0
        while f"layers.{n}.q" in tensors:
            n += 1
        self.layers = [{c: tensors[f"layers.{i}.{c}"] for c in ("q", "k", "v")} for i in range(n)]

    @property
    def n_layer(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        shape = tuple(self.layers[0]["q"].shape) if self.layers else ()
        return f"Capture({self.path!r}, {self.n_layer} layers, q {list(shape)}, model {self.metadata.get('model')!r})"

    def __fspath__(self) -> str:
        return self.path


def load_capture(path) -> Capture:
    """Reads a capture file (safetensors; validated as the CLI validates it) into a Capture."""
    path = _os.fspath(path)
    from . import _call
    got = _call(_core.load_capture, path)
    tensors = {name: a for name, _, a in got["tensors"]}
    dtypes = {name: dt for name, dt, _ in got["tensors"]}
    return Capture(path, dict(got["metadata"]), tensors, dtypes)


def capture(model, texts: Sequence = (), out=None, tokens: int = 1024, token_ids: Sequence = (),
            tokenizer: str = "", linear: str = "auto", quiet: bool = False) -> List[Capture]:
    """`attnum capture`: runs `model` (a llama2.c .bin or a Hugging Face folder) on the first
    `tokens` tokens of each text file (or token-id file) and writes one capture file per text
    into folder `out` (the CLI's files, bit for bit); returns them loaded. out=None: a temporary
    folder, read and removed."""
    from . import _call
    texts = [_os.fspath(t) for t in ([texts] if isinstance(texts, (str, _os.PathLike)) else texts)]
    ids = [_os.fspath(t) for t in token_ids]

    def run(folder):
        return _call(_core.capture, _os.fspath(model), texts, ids, tokenizer, int(tokens), linear, folder, not quiet)

    if out is not None:
        return [load_capture(p) for p in run(_os.fspath(out))]
    tmp = _tempfile.mkdtemp(prefix="attnum_capture_")
    try:
        caps = [load_capture(p) for p in run(_os.path.join(tmp, "captures"))]
        for c in caps:
            c.path = None  # the file is gone; the tensors are in memory
        return caps
    finally:
        _shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Results

def _jsonl_table(text: str) -> Dict[str, _np.ndarray]:
    """A JSONL file as a dict of arrays, one per field (float64, int64, bool or str; None -> NaN)."""
    rows = [_json.loads(line) for line in text.splitlines() if line.strip()]
    cols: Dict[str, list] = {}
    for r in rows:
        for k in r:
            cols.setdefault(k, [])
    out = {}
    for k in cols:
        vals = [r.get(k) for r in rows]
        kinds = {type(v) for v in vals if v is not None}
        if not kinds and k.endswith(("_lo", "_hi")):  # interval bounds, none available: NaN
            out[k] = _np.full(len(vals), _np.nan)
        elif kinds <= {bool}:
            out[k] = _np.array([bool(v) for v in vals]) if None not in vals else _np.array(vals, dtype=object)
        elif kinds <= {int}:
            out[k] = _np.array(vals, dtype=_np.int64) if None not in vals else _np.array(
                [_np.nan if v is None else v for v in vals], dtype=_np.float64)
        elif kinds <= {int, float}:
            out[k] = _np.array([_np.nan if v is None else v for v in vals], dtype=_np.float64)
        elif kinds <= {str}:
            out[k] = _np.array(["" if v is None else v for v in vals], dtype=str)
        else:
            out[k] = _np.array(vals, dtype=object)
    return out


class StudyResult:
    """The result files of a head study or a whole study, held in memory.

    files: {relative path: bytes} of every result file (checkpoints aside), exactly as the CLI
    writes them; summary: summary.json parsed; meta: meta.json parsed (when present); rows, heads:
    the per-(head, condition, kernel) and per-head tables as dicts of NumPy arrays (head studies);
    out: the folder the files were written to (None when it was a temporary one, removed).
    to_csv(dir) / to_json(dir) write the CSV / JSON and JSONL files; save(dir) writes them all."""

    def __init__(self, files: Dict[str, bytes], out: Optional[str]):
        self.files = files
        self.out = out
        self.summary = _json.loads(files["summary.json"]) if "summary.json" in files else None
        self.meta = _json.loads(files["meta.json"]) if "meta.json" in files else None
        self._tables: Dict[str, Dict[str, _np.ndarray]] = {}

    def table(self, name: str) -> Dict[str, _np.ndarray]:
        """The table `name` as a dict of arrays: NAME.jsonl (e.g. "rows", "heads"), or NAME.json
        when it is a JSON array of row objects (e.g. "loss", "loss_paired")."""
        if name not in self._tables:
            stem = name[:-len(".jsonl")] if name.endswith(".jsonl") else name
            if stem + ".jsonl" in self.files:
                text = self.files[stem + ".jsonl"].decode()
            elif stem + ".json" in self.files and isinstance(_json.loads(self.files[stem + ".json"]), list):
                text = "\n".join(_json.dumps(r) for r in _json.loads(self.files[stem + ".json"]))
            else:
                raise ValueError(f"table {name!r}: no {stem}.jsonl or {stem}.json array among the result files "
                                 f"({', '.join(sorted(self.files))})")
            self._tables[name] = _jsonl_table(text)
        return self._tables[name]

    @property
    def rows(self) -> Dict[str, _np.ndarray]:
        return self.table("rows")

    @property
    def heads(self) -> Dict[str, _np.ndarray]:
        return self.table("heads")

    def _write(self, out, keep) -> List[str]:
        out = _Path(out)
        written = []
        for rel, data in sorted(self.files.items()):
            if not keep(rel):
                continue
            p = out / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            written.append(str(p))
        return written

    def to_csv(self, out) -> List[str]:
        """Writes the CSV files into folder `out` (the CLI's bytes); returns their paths."""
        return self._write(out, lambda rel: rel.endswith(".csv"))

    def to_json(self, out) -> List[str]:
        """Writes the JSON and JSONL files into folder `out` (the CLI's bytes); returns their paths."""
        return self._write(out, lambda rel: rel.endswith(".json") or rel.endswith(".jsonl"))

    def save(self, out) -> List[str]:
        """Writes every result file into folder `out`."""
        return self._write(out, lambda rel: True)

    def __repr__(self) -> str:
        n = len(self.summary) if isinstance(self.summary, list) else "-"
        return f"StudyResult({len(self.files)} files, summary {n} rows, out {self.out!r})"


class LossResult(StudyResult):
    """The result files of a loss run (`attnum loss ... --out DIR`), held in memory: rows is
    loss.json (one row per kernel and condition: ce_ref, ce_variant, ppl_ratio and the KL, top-1
    and dp statistics with their intervals; docs/results.md) and paired is loss_paired.json (the
    paired differences between conditions), both as dicts of NumPy arrays."""

    @property
    def rows(self) -> Dict[str, _np.ndarray]:
        return self.table("loss")

    @property
    def paired(self) -> Dict[str, _np.ndarray]:
        if "loss_paired.json" not in self.files:
            return {}
        return self.table("loss_paired")

    def __repr__(self) -> str:
        n = len(self.rows.get("condition", []))
        return f"LossResult({len(self.files)} files, {n} rows, out {self.out!r})"


def _read_results(out: str) -> Dict[str, bytes]:
    files = {}
    root = _Path(out)
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith("checkpoints/") and "/checkpoints/" not in rel:
            files[rel] = p.read_bytes()
    return files


def _run_into(out, name: str, run, kind=StudyResult) -> StudyResult:
    """Runs `run(folder)` into `out`, or into a temporary folder that is read and removed."""
    if out is not None:
        out = _os.fspath(out)
        run(out)
        return kind(_read_results(out), out)
    tmp = _tempfile.mkdtemp(prefix=f"attnum_{name}_")
    try:
        folder = _os.path.join(tmp, name)
        run(folder)
        return kind(_read_results(folder), None)
    finally:
        _shutil.rmtree(tmp, ignore_errors=True)


def heads(captures: Optional[Sequence[Union[str, Capture]]] = None, zoo: bool = False,
          kernels: Union[str, Sequence[str]] = "fa3", conditions: Union[str, Sequence[str]] = _DEFAULT_CONDITIONS,
          rotation=None, knobs=None, predictor_model: str = "kernel", zoo_dtype: str = "bf16", n_tok: int = 1024,
          layers: int = 0, texts: int = 3, out=None, quiet: bool = False,
          predictor_version: str = "v1") -> StudyResult:
    """The head study (`attnum heads`): which heads each transform harms under each kernel, and the
    predictor's call. Give capture files (paths or Capture objects, one per (model, text)) or
    zoo=True (the synthetic head zoo; n_tok tokens per head, the first `layers` layers of each model
    (0 = all), `texts` token draws). kernels, conditions: names as lists or comma-separated; knobs
    and rotation as in attend. out: the result folder (resumed from its checkpoints, as the CLI's
    --out); None: a temporary one. quiet=False prints progress lines on stderr. predictor_version:
    "v1" or "v2" (the CLI's --predictor-version; docs/predictor.md).
    The result's files are byte for byte those of `attnum heads ... --out DIR`."""
    from . import _call, _knob_list, _rotation_args
    caps = [] if captures is None else [_os.fspath(c) for c in captures]
    spec, matrix = _rotation_args(rotation)
    ks, cs = _names(kernels, "kernels"), _names(conditions, "conditions")
    _call(_core.check_conditions, cs, True)  # before any work
    return _run_into(out, "heads", lambda folder: _call(
        _core.heads, caps, bool(zoo), ks, _knob_list(knobs), spec, matrix, zoo_dtype, cs, int(n_tok), int(layers),
        int(texts), predictor_model, predictor_version, folder, not quiet))


def study(model: Optional[str] = None, texts: Sequence[str] = (), kernels: Union[str, Sequence[str]] = "fa3,sage2pp-sm89",
          conditions: Union[str, Sequence[str]] = _DEFAULT_CONDITIONS, rotation=None, knobs=None,
          tokens: int = 1024, tokenizer: str = "", predictor_model: str = "kernel", linear: str = "auto",
          report: bool = True, full_pcast: bool = False, zoo_layers: int = 0, zoo_tokens: int = 1024,
          out=None, quiet: bool = False, predictor_version: str = "v1") -> StudyResult:
    """The whole study (`attnum study`): captures of `model` on `texts` (default: the synthetic
    zoo; the three books), the head study for every kernel and condition, the loss, P-cast and the
    report. The result's files are byte for byte those of `attnum study ... --out DIR`; summary is
    summary.json. predictor_version: "v1" or "v2" (the CLI's --predictor-version)."""
    from . import _call, _knob_list, _rotation_args
    spec, matrix = _rotation_args(rotation)
    ks, cs = _names(kernels, "kernels"), _names(conditions, "conditions")
    _call(_core.check_conditions, cs, True)
    return _run_into(out, "study", lambda folder: _call(
        _core.study, _os.fspath(model) if model else "", [_os.fspath(t) for t in texts], tokenizer, int(tokens), ks,
        _knob_list(knobs), spec, matrix, cs, predictor_model, predictor_version, linear, folder, bool(report), bool(full_pcast),
        int(zoo_layers), int(zoo_tokens), not quiet))


def loss(model, texts: Sequence = (), kernels: Union[str, Sequence[str]] = "fa3",
         conditions: Union[str, Sequence[str]] = _DEFAULT_CONDITIONS, rotation=None, knobs=None,
         tokens: int = 1024, windows: int = 1, token_ids: Sequence = (), tokenizer: str = "",
         reference: str = "bf16", linear: str = "auto", save_reference=None, reference_file=None,
         out=None, quiet: bool = False) -> LossResult:
    """The downstream loss (`attnum loss`): teacher-forced cross-entropy of `model` on `texts`
    (text files; default: the three books) or `token_ids` (files of ids) in `windows` windows of
    `tokens` labels (clamped to the model's context), with every attention layer run by each
    kernel under each condition, against the `reference` attention ("bf16" or "fp64").
    save_reference=PATH computes the reference logits once, writes them to PATH and uses them;
    reference_file=PATH reads them from an earlier save instead of computing them (the same
    numbers, bit for bit). out: the result folder (resumed from its checkpoints, as the CLI's
    --out); None: a temporary one. quiet=False prints progress lines and notices on stderr.
    The result's files are byte for byte those of `attnum loss ... --out DIR`."""
    from . import _call, _knob_list, _rotation_args
    spec, matrix = _rotation_args(rotation)
    ks, cs = _names(kernels, "kernels"), _names(conditions, "conditions")
    _call(_core.check_conditions, cs, False)  # before any work

    def path(p):
        return "" if p is None else _os.fspath(p)

    return _run_into(out, "loss", lambda folder: _call(
        _core.loss, _os.fspath(model), [_os.fspath(t) for t in texts], [_os.fspath(t) for t in token_ids], tokenizer,
        int(tokens), int(windows), ks, _knob_list(knobs), spec, matrix, cs, reference, linear, path(save_reference),
        path(reference_file), folder, not quiet), kind=LossResult)
