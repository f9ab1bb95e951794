"""attnum: bit-faithful CPU emulation of FP8/INT8 attention kernels, from Python.

The same library as the `attnum` command-line tool (docs/python.md). Arrays are NumPy arrays or
PyTorch CPU tensors; results come back as the kind that went in (a torch tensor when `q` is one).

    import numpy as np, attnum
    q = np.random.default_rng(0).standard_normal((8, 256, 64), dtype=np.float32)
    k = v = q[::2].copy()                      # 4 kv heads: GQA
    r = attnum.attend(q, k, v, kernel="fa3")   # r.o [8, 256, 64], r.rel_err [8]
"""
from __future__ import annotations

import json as _json
import os as _os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _core
from . import pcast  # noqa: F401  (attnum.pcast.theory and friends)

__all__ = [
    "AttendResult", "attend", "cast", "kernels", "kernel", "predict", "reference",
    "set_threads", "threads", "version", "pcast",
]

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
    return _json.loads(_core.knobs_json(name, _knob_list(knobs)))


# --------------------------------------------------------------------------------------------
# Arrays in and out

def _is_torch(x) -> bool:
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")


def _operand(x, name: str, check: bool = True) -> Tuple[_np.ndarray, bool]:
    """Returns (float32 C-contiguous [n_head, n_tok, d_head] view or exact copy, had 2 dims).
    check=False skips the finite-values check (for calls whose library side checks them: attend)."""
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
        elif x.dtype != torch.float32:
            raise ValueError(f"{name}: dtype {x.dtype}: expected torch.float32, bfloat16 or float16")
        x = x.numpy()  # shares memory
    if not isinstance(x, _np.ndarray):
        raise ValueError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    if x.dtype == _np.float16:
        if not x.flags.c_contiguous:
            raise ValueError(f"{name}: expected a C-contiguous array (np.ascontiguousarray(x)), got strides {x.strides}")
        x = x.astype(_np.float32)  # exact
    if x.dtype != _np.float32:
        raise ValueError(f"{name}: dtype {x.dtype}: expected float32 (or float16/bfloat16); "
                         f"convert with x.astype(np.float32) if rounding to float32 is what you mean")
    if x.ndim not in (2, 3):
        raise ValueError(f"{name}: expected shape [n_tok, d_head] or [n_head, n_tok, d_head], got {x.ndim} dims {x.shape}")
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


def _rotation_spec(rotation) -> str:
    """The rotation as the CLI's --rotation names it: None -> "" (the default random-sign Hadamard,
    seed DEFAULT_ROTATION_SEED); an int -> "random-hadamard:SEED"; a string is passed on as is
    ("random-hadamard:SEED", "hadamard", or a FILE.npy holding a [d, d] orthogonal matrix)."""
    if rotation is None:
        return ""
    if isinstance(rotation, (int, _np.integer)) and not isinstance(rotation, bool):
        if rotation < 0 or rotation >= 2 ** 64:
            raise ValueError(f"rotation seed {rotation}: expected 0 <= seed < 2**64")
        return f"random-hadamard:{int(rotation)}"
    if isinstance(rotation, (str, _os.PathLike)):
        return _os.fspath(rotation)
    raise ValueError(f"rotation {rotation!r}: expected None, an integer seed, 'random-hadamard:SEED', "
                     "'hadamard' or a FILE.npy path")


# --------------------------------------------------------------------------------------------
# The API

@dataclass
class AttendResult:
    """One layer through a kernel (what `attnum attend --json --stages` prints, as arrays).

    o: the kernel's output, float32, shaped like q. Per query head ([n_head] arrays): rel_err
    (||O - O_fp64||_F / ||O_fp64||_F), log_err (log1p(rel_err)), cosine, max_row_err, kv_head,
    p_count, p_underflow, p_saturated, nan_flagged. stages: {stage: [n_head] rel_err} with each
    quantization point alone ("qk_cast", "qk_acc", "p_cast", "v_cast", "pv_acc", "o_cast") and
    all of them ("all"); empty with stages=False. kernel: the spec's knobs; condition: its name.
    """
    o: Any
    rel_err: _np.ndarray
    log_err: _np.ndarray
    cosine: _np.ndarray
    max_row_err: _np.ndarray
    kv_head: _np.ndarray
    p_count: _np.ndarray
    p_underflow: _np.ndarray
    p_saturated: _np.ndarray
    nan_flagged: _np.ndarray
    stages: Dict[str, _np.ndarray] = field(default_factory=dict)
    kernel: dict = field(default_factory=dict)
    condition: str = "plain"

    def rows(self) -> list:
        """Returns one dict per head with the fields of `attnum attend --json`."""
        out = []
        for h in range(len(self.rel_err)):
            r = {"head": h, "kv_head": int(self.kv_head[h]), "kernel": self.kernel.get("name"),
                 "condition": self.condition, "rel_err": float(self.rel_err[h]),
                 "log_err": float(self.log_err[h]), "cosine": float(self.cosine[h]),
                 "max_row_err": float(self.max_row_err[h]), "p_count": int(self.p_count[h]),
                 "p_underflow": int(self.p_underflow[h]), "p_saturated": int(self.p_saturated[h]),
                 "nan_flagged": bool(self.nan_flagged[h])}
            if self.stages:
                r["stage_rel_err"] = {s: float(a[h]) for s, a in self.stages.items()}
            out.append(r)
        return out


def attend(q, k, v, kernel: str = "fa3", condition: str = "plain", rotation=None,
           knobs: Optional[Union[Mapping[str, Any], Sequence[str]]] = None, causal: bool = True,
           stages: bool = True, causal_center: bool = False, measure: bool = True) -> AttendResult:
    """Runs one layer through a kernel and measures each head against fp64 attention.

    q [n_head, n_tok, d_head] (or [n_tok, d_head]); k, v [n_head_kv, n_kv, d_head], n_head a
    multiple of n_head_kv (query head h uses kv head h // (n_head // n_head_kv)). float32 arrays
    are used in place; torch float32/bfloat16/float16 CPU tensors are accepted. Bit for bit
    `attnum attend --kernel KERNEL --condition CONDITION --knob ... --json --stages`.
    With measure=False only the kernel runs: `o` and the P counters are the same bits, the fp64
    reference is skipped, the error metrics are NaN and `stages` is empty.
    """
    # The library checks every value before it runs (q, then k, then v) and names a flat index;
    # only when it refuses one does the check here run, for the [h, t, c] message (a pass over
    # each operand fewer on every good call).
    q3, k3, v3, two, torch_out = _operands(q, k, v, check=False)
    try:
        r = _core.attend(q3, k3, v3, kernel, condition, _knob_list(knobs), bool(causal),
                         _rotation_spec(rotation), bool(causal_center), bool(stages), bool(measure))
    except ValueError as e:
        if "is not finite" in str(e):
            try:
                _operands(q, k, v)  # the check on the arrays as given: raises the [h, t, c] message
            except ValueError as named:
                raise named from None
        raise
    return AttendResult(o=_out(r["o"], two, torch_out), rel_err=r["rel_err"], log_err=r["log_err"],
                        cosine=r["cosine"], max_row_err=r["max_row_err"], kv_head=r["kv_head"],
                        p_count=r["p_count"], p_underflow=r["p_underflow"], p_saturated=r["p_saturated"],
                        nan_flagged=r["nan_flagged"], stages=dict(r["stages"]),
                        kernel=_json.loads(r["kernel"]), condition=r["condition"])


def reference(q, k, v, causal: bool = True):
    """Returns fp64 attention (softmax scale 1/sqrt(d_head); causal bottom-right aligned),
    float64 [n_head, n_q, d_head] (shaped like q; a torch tensor when q is one)."""
    q3, k3, v3, two, torch_out = _operands(q, k, v)
    return _out(_core.reference(q3, k3, v3, bool(causal)), two, torch_out)


def predict(q, k, v, kernel: str = "fa3", condition: str = "plain", rotation=None) -> _np.ndarray:
    """Returns the rounding-noise predictor's expected rel_err per query head, float64 [n_head]
    (causal; n_q == n_kv), as the head study computes its `predicted_rel_err`."""
    q3, k3, v3, _, _ = _operands(q, k, v)
    return _core.predict(q3, k3, v3, kernel, condition, _rotation_spec(rotation))


def cast(x, to: str = "e4m3fn", saturate: bool = True, scale: Optional[float] = None,
         round: str = "rne") -> Tuple[_np.ndarray, _np.ndarray]:
    """Casts every element of x to a number format: returns (codes, decoded), shaped like x.

    codes: uint8 (e4m3fn, e5m2, int8 as two's complement) or uint16 (bf16, fp16); decoded:
    float64. Values are taken as float64 and rounded once; with `scale` S, x/S is encoded and the
    decoded value is code * S. Bit for bit `attnum cast --to TO [--no-saturate] [--scale S] X...`.
    """
    if _is_torch(x):
        x = x.detach().cpu().double().numpy()
    a = _np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"cast: dtype {a.dtype}: expected numbers")
    with _np.errstate(invalid="ignore"):  # NaN inputs are legal (signalling ones warn otherwise)
        a = _np.ascontiguousarray(a, dtype=_np.float64)  # exact for float32/float16 and small ints
    return _core.cast(a, to, bool(saturate), 1.0 if scale is None else float(scale), round)
