"""attnum: bit-faithful CPU emulation of FP8/INT8 attention kernels, from Python.

The same library as the `attnum` command-line tool (docs/python.md). Arrays are NumPy arrays or
PyTorch CPU tensors; results come back as the kind that went in (a torch tensor when `q` is one).

    import numpy as np, attnum
    q = np.random.default_rng(0).standard_normal((8, 256, 64), dtype=np.float32)
    k = v = q[::2].copy()                      # 4 kv heads: GQA
    r = attnum.attend(q, k, v, kernel="fa3")   # r.o [8, 256, 64], r.rel_err [8]

The head study, the whole study and capture files: attnum.heads, attnum.study, attnum.load_capture
(the same library calls and result files as `attnum heads`, `attnum study`).
"""
from __future__ import annotations

import json as _json
import math as _math
import os as _os
import re as _re
import warnings as _warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _core
from . import pcast  # noqa: F401  (attnum.pcast.theory and friends)

__all__ = [
    "AttendResult", "AttnumWarning", "attend", "cast", "kernels", "kernel", "predict", "reference",
    "set_threads", "threads", "version", "pcast", "load_capture", "Capture", "capture", "heads", "study",
    "StudyResult", "loss", "LossResult",
]


class AttnumWarning(UserWarning):
    """The warnings the CLI prints on stderr (e.g. inputs a bf16 transform rounds), as Python warnings."""


# The CLI's flags in the library's messages, as the Python parameters that carry them.
_PY_NAMES = [("--rotation FILE.npy", "rotation=<[d, d] array>"),
             ("--knob transform_dtype=fp32", "knobs={'transform_dtype': 'fp32'}"),
             ("--rotation", "rotation"), ("--knob", "knobs"), ("--kernels", "kernels"), ("--kernel", "kernel"),
             ("--conditions", "conditions"), ("--condition", "condition"), ("--predictor-model", "predictor_model"),
             ("--predictor-version", "predictor_version"),
             ("--zoo-dtype", "zoo_dtype"), ("--tokens", "tokens"), ("--captures", "captures"),
             ("--save-reference", "save_reference"), ("--reference-file", "reference_file"),
             ("--reference", "reference"), ("--windows", "windows"), ("--token-ids", "token_ids"),
             ("--linear-precision", "linear"), ("--text", "texts")]


def _python_message(text: str) -> str:
    for flag, name in _PY_NAMES:
        text = _re.sub(_re.escape(flag) + r"(?![\w-])", name, text)
    return text


def _call(fn, *args):
    """Calls into the library; its ValueError comes back with the CLI's flags named as Python parameters."""
    try:
        return fn(*args)
    except ValueError as e:
        raise ValueError(_python_message(str(e))) from None

#: The default rotation seed of `rotate` conditions (the CLI's --seed default).
DEFAULT_ROTATION_SEED = 0x5EED


def version() -> str:
    """Returns the library version (the same as `attnum version`)."""
    return _core.version()


def set_threads(n: int) -> None:
    """Sets the threads every later call uses (0 = all cores). Results never depend on it."""
    _core.set_threads(int(n))


def threads() -> int:
    """Returns the thread count calls use."""
    return _core.threads()


def kernels() -> list:
    """Returns every preset as a dict of its knobs (what `attnum kernels --json` prints)."""
    return _json.loads(_core.kernels_json())


def kernel(name: str = "generic", knobs: Optional[Union[Mapping[str, Any], Sequence[str]]] = None) -> dict:
    """Returns one preset with `knobs` applied, as a dict (raises ValueError for unknown names)."""
    return _json.loads(_call(_core.knobs_json, name, _knob_list(knobs)))


# --------------------------------------------------------------------------------------------
# Arrays in and out

def _is_torch(x) -> bool:
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")


def _bf16_bits_to_f32(bits: _np.ndarray) -> _np.ndarray:
    """bfloat16 bit patterns (uint16) -> the float32 values they encode (exact)."""
    return (_np.ascontiguousarray(bits).astype(_np.uint32) << 16).view(_np.float32)


def _operand(x, name: str, check: bool = True, ranks=(2, 3)) -> Tuple[_np.ndarray, bool]:
    """Returns (float32 C-contiguous [n_head, n_tok, d_head] view or exact copy, had 2 dims); a
    4-D [batch, n_head, n_tok, d_head] array stays 4-D where `ranks` allows it.
    check=False skips the finite-values check (for calls whose library side checks them: attend).
    bfloat16 arrives as torch.bfloat16, as an ml_dtypes-style NumPy bfloat16 array, or as raw
    uint16 bit patterns (NumPy uint16, or a torch uint16 tensor where torch has that dtype)."""
    if _is_torch(x):
        import torch
        if x.device.type != "cpu":
            raise ValueError(f"{name}: a torch tensor on {x.device}; expected a CPU tensor (x.cpu())")
        if x.requires_grad:
            x = x.detach()
        if x.dtype in (torch.bfloat16, torch.float16):
            if not x.is_contiguous():
                raise ValueError(f"{name}: expected a contiguous tensor (x.contiguous()), got strides {tuple(x.stride())}")
            x = x.float()  # exact: every bf16/fp16 value is a float32
        elif getattr(torch, "uint16", None) is not None and x.dtype == torch.uint16:
            x = x.numpy()  # bf16 bit patterns, converted below
        elif x.dtype != torch.float32:
            raise ValueError(f"{name}: dtype {x.dtype}: expected torch.float32, bfloat16 or float16")
        else:
            x = x.numpy()  # shares memory
        if not isinstance(x, _np.ndarray):
            x = x.numpy()
    if not isinstance(x, _np.ndarray):
        raise ValueError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    if x.dtype == _np.float16 or x.dtype == _np.uint16 or x.dtype.name == "bfloat16":
        if not x.flags.c_contiguous:
            raise ValueError(f"{name}: expected a C-contiguous array (np.ascontiguousarray(x)), got strides {x.strides}")
        if x.dtype == _np.float16:
            x = x.astype(_np.float32)  # exact
        else:  # uint16 bit patterns, or ml_dtypes.bfloat16 (the same bits)
            x = _bf16_bits_to_f32(x.view(_np.uint16))
    if x.dtype != _np.float32:
        raise ValueError(f"{name}: dtype {x.dtype}: expected float32 (or float16, bfloat16, uint16 bfloat16 bits); "
                         f"convert with x.astype(np.float32) if rounding to float32 is what you mean")
    if x.ndim not in ranks:
        want = " or ".join(["[n_tok, d_head]", "[n_head, n_tok, d_head]", "[batch, n_head, n_tok, d_head]"][:max(ranks) - 1])
        raise ValueError(f"{name}: expected shape {want}, got {x.ndim} dims {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous array (np.ascontiguousarray(x)), got strides {x.strides}")
    # min and max are NaN or infinite exactly when some element is not finite: two reductions
    # without the temporaries of isfinite (this check was 4% of a 2-head attend call)
    if check and x.size and not (_np.isfinite(x.min()) and _np.isfinite(x.max())):
        bad = ~_np.isfinite(x)
        at = tuple(int(i) for i in _np.argwhere(bad)[0])
        raise ValueError(f"{name}: element {list(at)} is not finite ({x[at]}); attention inputs must be finite")
    two = x.ndim == 2
    return (x[None] if two else x), two


def _operands(q, k, v, check: bool = True):
    (q3, two), (k3, _), (v3, _) = _operand(q, "q", check), _operand(k, "k", check), _operand(v, "v", check)
    return q3, k3, v3, two, _is_torch(q)


def _out(a: _np.ndarray, two: bool, torch_out: bool):
    if two:
        a = a[0]
    if torch_out:
        import torch
        return torch.from_numpy(a)
    return a


def _knob_list(knobs) -> list:
    if knobs is None:
        return []
    if isinstance(knobs, Mapping):
        def text(v):
            if isinstance(v, bool):
                return "true" if v else "false"
            return str(v)
        return [f"{k}={text(v)}" for k, v in knobs.items()]
    if isinstance(knobs, str):
        return [knobs]
    return [str(k) for k in knobs]


def _rotation_args(rotation) -> Tuple[str, Optional[_np.ndarray]]:
    """The rotation as (the CLI's --rotation spec, a [d, d] float64 matrix or None): None -> ""
    (the default random-sign Hadamard, seed DEFAULT_ROTATION_SEED); an int -> "random-hadamard:SEED";
    a string is passed on as is ("random-hadamard:SEED", "hadamard", a FILE.npy holding a [d, d]
    orthogonal matrix, or FILE.safetensors:TENSOR); an array or tensor [d, d] (orthogonal; rows
    become x @ R) is used as the matrix."""
    if rotation is None:
        return "", None
    if isinstance(rotation, (int, _np.integer)) and not isinstance(rotation, bool):
        if rotation < 0 or rotation >= 2 ** 64:
            raise ValueError(f"rotation seed {rotation}: expected 0 <= seed < 2**64")
        return f"random-hadamard:{int(rotation)}", None
    if isinstance(rotation, (str, _os.PathLike)):
        return _os.fspath(rotation), None
    if _is_torch(rotation):
        rotation = rotation.detach().cpu().double().numpy()
    if isinstance(rotation, _np.ndarray):
        if rotation.dtype.kind not in "fiu":
            raise ValueError(f"rotation: dtype {rotation.dtype}: expected a float [d, d] array")
        return "", _np.ascontiguousarray(rotation, dtype=_np.float64)
    raise ValueError(f"rotation {rotation!r}: expected None, an integer seed, 'random-hadamard:SEED', "
                     "'hadamard', a FILE.npy path or a [d, d] orthogonal array")


def _rotation_spec(rotation) -> str:
    """The rotation as the CLI's --rotation names it (see _rotation_args; arrays are refused here)."""
    spec, matrix = _rotation_args(rotation)
    if matrix is not None:
        raise ValueError("rotation: an array is accepted by attend, predict, heads and study; here give a seed or spec")
    return spec


def _torch_out(a):
    import torch
    return torch.from_numpy(_np.ascontiguousarray(a))


# --------------------------------------------------------------------------------------------
# The API

_HEAD_FIELDS = ("rel_err", "log_err", "cosine", "max_row_err", "kv_head", "p_count", "p_underflow",
                "p_saturated", "nan_flagged")


class AttendResult:
    """One layer through a kernel (what `attnum attend --json --stages` prints, as arrays).

    o: the kernel's output, float32, shaped like q. Per query head ([n_head] arrays, [batch,
    n_head] for 4-D input): rel_err (||O - O_fp64||_F / ||O_fp64||_F), log_err (log1p(rel_err)),
    cosine, max_row_err, kv_head, p_count, p_underflow, p_saturated, nan_flagged. stages: {stage:
    [n_head] rel_err} with each quantization point alone ("qk_cast", "qk_acc", "p_cast", "v_cast",
    "pv_acc", "o_cast") and all of them ("all"). kernel: the spec's knobs; condition: its name.
    Every array field is a torch tensor when q was one.
    """

    def __init__(self, o, rel_err, log_err, cosine, max_row_err, kv_head, p_count, p_underflow, p_saturated,
                 nan_flagged, stages=None, kernel=None, condition="plain", stages_fn=None):
        self.o = o
        self.rel_err, self.log_err, self.cosine, self.max_row_err = rel_err, log_err, cosine, max_row_err
        self.kv_head, self.p_count, self.p_underflow, self.p_saturated = kv_head, p_count, p_underflow, p_saturated
        self.nan_flagged = nan_flagged
        self._stages = dict(stages) if stages is not None else None
        self._stages_fn = stages_fn
        self.kernel = kernel if kernel is not None else {}
        self.condition = condition

    @property
    def stages(self) -> dict:
        """{stage: rel_err per head}; computed on first access when the call left stages=None."""
        if self._stages is None:
            self._stages = self._stages_fn() if self._stages_fn is not None else {}
            self._stages_fn = None
        return self._stages

    def __repr__(self) -> str:
        rel = _np.asarray(self.rel_err, dtype=_np.float64).ravel()
        fin = rel[_np.isfinite(rel)]
        err = (f"rel_err {fin.min():.3e}..{fin.max():.3e} (mean {fin.mean():.3e})" if fin.size else "rel_err -")
        shape = "x".join(str(n) for n in tuple(self.o.shape))
        nan = int(_np.asarray(self.nan_flagged).sum())
        return (f"AttendResult(kernel={self.kernel.get('name')!r}, condition={self.condition!r}, o float32[{shape}], "
                f"{rel.size} heads, {err}, nan_flagged {nan})")

    def rows(self) -> list:
        """Returns one dict per head with the fields of `attnum attend --json --stages` (batch-major
        for 4-D input; `stage_rel_err` unless the call had stages=False or measure=False)."""
        arr = {f: _np.asarray(getattr(self, f)).reshape(-1) for f in _HEAD_FIELDS}
        stages = {s: _np.asarray(a).reshape(-1) for s, a in self.stages.items()}
        out = []
        for h in range(len(arr["rel_err"])):
            r = {"head": h, "kv_head": int(arr["kv_head"][h]), "kernel": self.kernel.get("name"),
                 "condition": self.condition, "rel_err": float(arr["rel_err"][h]),
                 "log_err": float(arr["log_err"][h]), "cosine": float(arr["cosine"][h]),
                 "max_row_err": float(arr["max_row_err"][h]), "p_count": int(arr["p_count"][h]),
                 "p_underflow": int(arr["p_underflow"][h]), "p_saturated": int(arr["p_saturated"][h]),
                 "nan_flagged": bool(arr["nan_flagged"][h])}
            if stages:
                r["stage_rel_err"] = {s: float(a[h]) for s, a in stages.items()}
            out.append(r)
        return out


def _check_scale(softmax_scale, d: int) -> None:
    if softmax_scale is None:
        return
    want = 1.0 / _math.sqrt(d)
    if not (abs(float(softmax_scale) - want) <= 1e-6 * want):
        raise ValueError(f"softmax_scale={softmax_scale}: the kernels are emulated with their own scale "
                         f"1/sqrt(d_head) = {want:.9g} (d_head {d}); another scale is not emulated "
                         "(give softmax_scale=None)")


def attend(q, k, v, kernel: str = "fa3", condition: str = "plain", rotation=None,
           knobs: Optional[Union[Mapping[str, Any], Sequence[str]]] = None, causal: bool = True,
           stages: Optional[bool] = None, causal_center: bool = False, measure: bool = True,
           softmax_scale: Optional[float] = None) -> AttendResult:
    """Runs one layer through a kernel and measures each head against fp64 attention.

    q [n_head, n_tok, d_head] (or [n_tok, d_head], or [batch, n_head, n_tok, d_head] as PyTorch's
    scaled_dot_product_attention takes it: each batch entry an independent sequence); k, v
    [n_head_kv, n_kv, d_head] (with the same batch axis for 4-D q), n_head a multiple of n_head_kv
    (query head h uses kv head h // (n_head // n_head_kv)). float32 arrays are used in place;
    float16, bfloat16 (torch.bfloat16, NumPy bfloat16, uint16 bit patterns) are converted exactly.
    Bit for bit `attnum attend --kernel KERNEL --condition CONDITION --knob ... --json --stages`.

    causal=True (the default, as the CLI's attend and every capture of a decoder): the mask is
    bottom-right aligned; PyTorch's is_causal=False is causal=False here.
    softmax_scale: None means 1/sqrt(d_head), the only scale the kernels are emulated with.
    stages: None (default) computes the stage attribution only when `.stages` is first read;
    True computes it now; False never (`.stages` is {}).
    With measure=False only the kernel runs: `o` and the P counters are the same bits, the fp64
    reference is skipped, the error metrics are NaN and `stages` is empty.
    rotation: None (random-sign Hadamard, seed 0x5eed), an int seed, a spec string, or a [d, d]
    orthogonal array. Inputs a bf16 transform would round (the CLI's warning) raise AttnumWarning.
    """
    q_nd = q.ndim if hasattr(q, "ndim") else None
    if q_nd == 4:
        return _attend_batched(q, k, v, kernel, condition, rotation, knobs, causal, stages, causal_center,
                               measure, softmax_scale)
    # The library checks every value before it runs (q, then k, then v) and names a flat index;
    # only when it refuses one does the check here run, for the [h, t, c] message (a pass over
    # each operand fewer on every good call).
    q3, k3, v3, two, torch_out = _operands(q, k, v, check=False)
    _check_scale(softmax_scale, q3.shape[-1])
    r = _attend3(q3, k3, v3, kernel, condition, rotation, knobs, causal, stages, causal_center, measure,
                 (q, k, v))
    _warn(r)
    return _result(r, two, torch_out)


def _attend3(q3, k3, v3, kernel, condition, rotation, knobs, causal, stages, causal_center, measure, given):
    spec, matrix = _rotation_args(rotation)
    args = (kernel, condition, _knob_list(knobs), bool(causal), spec, bool(causal_center))
    try:
        r = _call(_core.attend, q3, k3, v3, *args, bool(stages) and measure, bool(measure), matrix)
    except ValueError as e:
        if "is not finite" in str(e):
            try:
                _operands(*given)  # the check on the arrays as given: raises the [h, t, c] message
            except ValueError as named:
                raise named from None
        raise
    r = dict(r)
    if stages is None and measure:
        # Stage attribution later, from copies of the operands as they are now.
        cq, ck, cv = q3.copy(), k3.copy(), v3.copy()
        r["stages_fn"] = lambda: dict(_call(_core.attend, cq, ck, cv, *args, True, True, matrix)["stages"])
    elif stages is None:
        r["stages"] = {}
    return r


def _warn(r) -> None:
    # As `attnum attend` warns: scores beyond fp32's exp2 range (the library's text), else NaN outputs.
    big = r["large_score_warning"]
    if r["transform_rounds_inputs"]:
        dt = r["transform_dtype"]
        _warnings.warn(f"q/k hold values that are not {dt}: the transformed operands are rounded to {dt} "
                       f"(transform_dtype) but plain ones are used as given; round the inputs to {dt} or pass "
                       "knobs={'transform_dtype': 'fp32'} for a like-for-like comparison with plain",
                       AttnumWarning, stacklevel=3)
    if big:
        _warnings.warn(big, AttnumWarning, stacklevel=3)
    elif _np.any(r["nan_flagged"]):
        _warnings.warn("NaN in the output where the real kernel produces it (nan_flagged; e.g. an all-zero V "
                       "channel without eps)", AttnumWarning, stacklevel=3)


def _result(r, two: bool, torch_out: bool) -> AttendResult:
    conv = _torch_out if torch_out else (lambda a: a)
    fields = {f: conv(r[f]) for f in _HEAD_FIELDS}
    stages = None if "stages_fn" in r else {s: conv(a) for s, a in dict(r["stages"]).items()}
    fn = r.get("stages_fn")
    if fn is not None and torch_out:
        fn = (lambda f: (lambda: {s: _torch_out(a) for s, a in f().items()}))(fn)
    return AttendResult(o=_out(r["o"], two, torch_out), **fields, stages=stages, kernel=_json.loads(r["kernel"]),
                        condition=r["condition"], stages_fn=fn)


def _attend_batched(q, k, v, kernel, condition, rotation, knobs, causal, stages, causal_center, measure,
                    softmax_scale) -> AttendResult:
    q4, _ = _operand(q, "q", False, (4,))
    k4, _ = _operand(k, "k", False, (4,))
    v4, _ = _operand(v, "v", False, (4,))
    if not (q4.shape[0] == k4.shape[0] == v4.shape[0]):
        raise ValueError(f"q, k, v: batch sizes {q4.shape[0]}, {k4.shape[0]}, {v4.shape[0]} differ")
    _check_scale(softmax_scale, q4.shape[-1])
    torch_out = _is_torch(q)
    parts = [_attend3(q4[b], k4[b], v4[b], kernel, condition, rotation, knobs, causal, stages, causal_center,
                      measure, (q4[b], k4[b], v4[b])) for b in range(q4.shape[0])]
    merged = dict(parts[0])
    merged["o"] = _np.stack([p["o"] for p in parts])
    for f in _HEAD_FIELDS:
        merged[f] = _np.stack([p[f] for p in parts])
    merged["transform_rounds_inputs"] = any(p["transform_rounds_inputs"] for p in parts)
    # The warning of the batch entry whose scores reach furthest (NaN exp2_arg_max: not measured).
    big = [p for p in parts if p["large_score_warning"]]
    merged["large_score_warning"] = max(big, key=lambda p: _np.nanmax(p["exp2_arg_max"]))["large_score_warning"] if big else ""
    if "stages_fn" in parts[0]:
        fns = [p["stages_fn"] for p in parts]
        merged["stages_fn"] = lambda: (lambda got: {s: _np.stack([g[s] for g in got]) for s in got[0]})(
            [f() for f in fns])
    else:
        st = [dict(p["stages"]) for p in parts]
        merged["stages"] = {s: _np.stack([x[s] for x in st]) for s in st[0]} if st[0] else {}
    _warn(merged)
    return _result(merged, False, torch_out)


def reference(q, k, v, causal: bool = True):
    """Returns fp64 attention (softmax scale 1/sqrt(d_head); causal bottom-right aligned),
    float64 [n_head, n_q, d_head] (shaped like q; a torch tensor when q is one)."""
    q3, k3, v3, two, torch_out = _operands(q, k, v)
    return _out(_call(_core.reference, q3, k3, v3, bool(causal)), two, torch_out)


def predict(q, k, v, kernel: str = "fa3", condition: str = "plain", rotation=None) -> _np.ndarray:
    """Returns the rounding-noise predictor's expected rel_err per query head, float64 [n_head]
    (causal; n_q == n_kv), as the head study computes its `predicted_rel_err` (a torch tensor
    when q is one). rotation as in attend (a [d, d] array too)."""
    q3, k3, v3, _, torch_out = _operands(q, k, v)
    spec, matrix = _rotation_args(rotation)
    out = _call(_core.predict, q3, k3, v3, kernel, condition, spec, matrix)
    return _torch_out(out) if torch_out else out


def cast(x, to: str = "e4m3fn", saturate: bool = True, scale: Optional[float] = None,
         round: str = "rne") -> Tuple[_np.ndarray, _np.ndarray]:
    """Casts every element of x to a number format: returns (codes, decoded), shaped like x
    (torch tensors when x is one: codes uint8, or int16 bit patterns for 16-bit formats where
    torch has no uint16).

    codes: uint8 (e4m3fn, e5m2, int8 as two's complement) or uint16 (bf16, fp16); decoded:
    float64. Values are taken as float64 and rounded once; with `scale` S, x/S is encoded and the
    decoded value is code * S. Bit for bit `attnum cast --to TO [--no-saturate] [--scale S] X...`.
    """
    torch_in = _is_torch(x)
    if torch_in:
        x = x.detach().cpu().double().numpy()
    a = _np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"cast: dtype {a.dtype}: expected numbers")
    with _np.errstate(invalid="ignore"):  # NaN inputs are legal (signalling ones warn otherwise)
        a = _np.ascontiguousarray(a, dtype=_np.float64)  # exact for float32/float16 and small ints
    codes, decoded = _call(_core.cast, a, to, bool(saturate), 1.0 if scale is None else float(scale), round)
    if torch_in:
        import torch
        # torch has no unsigned 16-bit dtype before 2.3: 16-bit codes come back as int16 bit patterns.
        wide = codes.dtype == _np.uint16
        if wide and getattr(torch, "uint16", None) is None:
            codes = codes.view(_np.int16)
        return _torch_out(codes), _torch_out(decoded)
    return codes, decoded


from ._study import Capture, LossResult, StudyResult, capture, heads, load_capture, loss, study  # noqa: E402  (they use the helpers above)
