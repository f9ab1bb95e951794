"""Runs the real kernels our presets model on captured layers, for `attnum transfer` (docs/gpu.md).

    python -m attnum.gpu run --captures CAP.safetensors ... --kernel fa3|sage2pp|sage2-sm90|flashinfer \
        --conditions plain,rotate,center,center+rotate --out DIR [--backend auto|torch-sdpa] \
        [--rotation random-hadamard:SEED] [--device cuda]

For each capture (layers.{l}.q [n_head, n_tok, d], layers.{l}.k / .v [n_head_kv, n_tok, d]) it
writes DIR/<capture file name> holding layers.{l}.o.{condition} [n_head, n_tok, d] (bf16), with the
kernel, its package and version, torch's version and the GPU in the file's metadata.

The condition transforms are the library's (attnum/transforms): K centered by its mean over tokens
and Q, K rotated by the random-sign Hadamard matrix, each computed in float64 in the library's
order (ascending token sums; the Walsh-Hadamard butterflies h = 1, 2, 4, ...) and rounded to
nearest even into the capture's dtype, the dtype the kernel is called in.

Backends: `auto` calls the upstream package of the kernel with the arguments its preset models;
`torch-sdpa` stands in for a kernel with torch's scaled_dot_product_attention (any device; the
harness's own tests run it on the CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

#: --kernel -> (the preset that models it, the upstream package it calls)
KERNELS = {
    "fa3": ("fa3", "flash_attn_interface"),
    "sage2pp": ("sage2pp-sm89", "sageattention"),
    "sage2-sm90": ("sage2-sm90", "sageattention"),
    "flashinfer": ("flashinfer-sm90", "flashinfer"),
}
CONDITIONS = ("plain", "rotate", "center", "center+rotate")
E4M3_MAX = 448.0
DEFAULT_SEED = 24301  # the CLI's --rotation default, random-hadamard:24301


# ---- safetensors (8-byte little-endian header size, JSON header, raw little-endian data) ----

def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str], Dict[str, str]]:
    """Returns ({name: float32 array}, {name: dtype}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its 8-byte header size)")
    (n,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise ValueError(f"{path}: header is not JSON ({e})") from None
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out, dtypes = {}, {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        buf = raw[base + a:base + b]
        dt = h["dtype"]
        if dt == "BF16":
            x = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F16":
            x = np.frombuffer(buf, "<f2").astype(np.float32)
        elif dt == "F32":
            x = np.frombuffer(buf, "<f4").astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor '{name}': dtype {dt}: expected BF16, F16 or F32")
        out[name] = x.reshape(h["shape"])
        dtypes[name] = dt
    return out, dtypes, meta


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values on the bf16 grid -> their bf16 bit patterns (exact: the low half is zero)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    if np.any(u & 0xFFFF):
        raise ValueError("value not on the bf16 grid")
    return (u >> 16).astype("<u2")


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], metadata: Dict[str, str], dtype: str = "BF16") -> None:
    """Writes float32 arrays as `dtype` (BF16: the values must lie on the bf16 grid), atomically."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        x = np.ascontiguousarray(tensors[name], np.float32)
        data = (_bf16_bits(x) if dtype == "BF16" else x.astype("<f2" if dtype == "F16" else "<f4")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(x.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


# ---- the condition transforms, as attnum/transforms computes them ----

def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 -> the nearest (ties to even) value of dtype ('bf16', 'fp16', 'fp32'), as float32.
    One rounding from float64 (a cast through float32 would round twice)."""
    x = np.asarray(x, np.float64)
    if dtype == "fp32":
        return x.astype(np.float32)
    sig, emin, vmax = (8, -133, 3.3895313892515355e38) if dtype == "bf16" else (11, -24, 65504.0)
    m, e = np.frexp(x)  # x = m 2^e, |m| in [0.5, 1)
    q = np.maximum(e - sig, emin)  # the quantum's exponent (subnormals share the smallest)
    r = np.ldexp(np.rint(np.ldexp(x, -q)), q)  # np.rint: ties to even
    # IEEE overflow under round to nearest: Inf exactly when the unbounded rounding exceeds the max
    r = np.where(np.abs(r) > vmax, np.copysign(np.inf, x), r)
    return r.astype(np.float32)


def random_signs(d: int, seed: int) -> np.ndarray:
    """The signs of random-hadamard:SEED: the top bit of successive splitmix64 draws (core/random.h)."""
    out, state, mask = np.empty(d), seed & (2 ** 64 - 1), 2 ** 64 - 1
    for i in range(d):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out[i] = -1.0 if z >> 63 else 1.0
    return out


def rotate(x: np.ndarray, seed: int) -> np.ndarray:
    """Rows of x (float64 [..., d]) times the random-sign Hadamard matrix: x*s, the butterflies for
    h = 1, 2, 4, ..., then 1/sqrt(d) (transforms.cpp rotation::row)."""
    d = x.shape[-1]
    if d & (d - 1):
        raise ValueError(f"rotation: head dim {d} is not a power of two")
    y = np.array(x, np.float64) * random_signs(d, seed)
    h = 1
    while h < d:
        y = y.reshape(*x.shape[:-1], d // (2 * h), 2, h)
        a, b = y[..., 0, :].copy(), y[..., 1, :].copy()
        y[..., 0, :], y[..., 1, :] = a + b, a - b
        y = y.reshape(x.shape)
        h *= 2
    return y * (1.0 / np.sqrt(float(d)))


def center(k: np.ndarray) -> np.ndarray:
    """K [n_head_kv, n_tok, d] minus its mean over tokens (ascending float64 sums), float64."""
    k = np.asarray(k, np.float64)
    s = np.zeros((k.shape[0], k.shape[2]))
    for t in range(k.shape[1]):
        s += k[:, t, :]
    return k - (s / k.shape[1])[:, None, :] if k.shape[1] else k


def transform(q: np.ndarray, k: np.ndarray, cond: str, seed: int, dtype: str) -> Tuple[np.ndarray, np.ndarray]:
    """The condition's Q and K in dtype (float32 arrays); V is never transformed."""
    if cond not in CONDITIONS:
        raise ValueError(f"condition '{cond}': expected one of {', '.join(CONDITIONS)}")
    if cond in ("center", "center+rotate"):
        k = round_to(center(k), dtype)
    if cond in ("rotate", "center+rotate"):
        q = round_to(rotate(q, seed), dtype)
        k = round_to(rotate(k, seed), dtype)
    return q, k


# ---- kernels ----

def _fp8(x, torch):
    f8 = getattr(torch, "float8_e4m3fn", None)
    if f8 is None:
        raise RuntimeError(f"torch {torch.__version__} has no float8_e4m3fn: FP8 kernels need torch >= 2.1")
    return x.to(f8)


def _scaled_fp8(x, dims, torch):
    """x / (amax / 448) cast to E4M3 with the amax over `dims` (kept), and the fp32 descale."""
    amax = x.float().abs().amax(dim=dims, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return _fp8(x.float() / scale, torch), scale


def run_kernel(kernel: str, backend: str, q, k, v, torch, mods: Dict[str, object]):
    """q [H, n, d], k / v [Hkv, n, d] (torch, the capture's dtype, on the device) -> O [H, n, d]."""
    H, Hkv = q.shape[0], k.shape[0]
    if backend == "torch-sdpa":
        g = H // Hkv
        kk, vv = k.float().repeat_interleave(g, 0), v.float().repeat_interleave(g, 0)
        sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)  # torch >= 2.0
        if sdpa is not None:
            o = sdpa(q.float()[None], kk[None], vv[None], is_causal=True)[0]
        else:  # the same attention written out (causal, n_q == n_kv as in captures)
            s = q.float() @ kk.transpose(1, 2) / float(q.shape[-1]) ** 0.5
            n = s.shape[-1]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
            o = torch.softmax(s, dim=-1) @ vv
        return o.to(q.dtype)
    if kernel == "fa3":
        # hopper/flash_attn_interface.py flash_attn_func: FP8 q, k, v (b, s, h, d) with descales
        # (b, h_k): Q per kv group (its query heads share one), K and V per kv head (the fa3 preset)
        g = H // Hkv
        qb = q.reshape(Hkv, g, *q.shape[1:])
        q8, qs = _scaled_fp8(qb, (1, 2, 3), torch)
        k8, ks = _scaled_fp8(k, (1, 2), torch)
        v8, vs = _scaled_fp8(v, (1, 2), torch)
        q8 = q8.reshape(q.shape)
        r = mods["flash_attn_interface"].flash_attn_func(
            q8.permute(1, 0, 2)[None], k8.permute(1, 0, 2)[None], v8.permute(1, 0, 2)[None], causal=True,
            q_descale=qs.reshape(1, Hkv), k_descale=ks.reshape(1, Hkv), v_descale=vs.reshape(1, Hkv))
        o = r[0] if isinstance(r, (tuple, list)) else r
        return o[0].permute(1, 0, 2)
    if kernel in ("sage2pp", "sage2-sm90"):
        # sageattention/core.py: the kernels quantize themselves (per-thread INT8 Q, K with smooth_k,
        # per-channel FP8 V); HND layout [b, h, n, d]
        sa = mods["sageattention"]
        if kernel == "sage2pp":
            o = sa.sageattn_qk_int8_pv_fp8_cuda(q[None], k[None], v[None], tensor_layout="HND", is_causal=True,
                                                qk_quant_gran="per_thread", pv_accum_dtype="fp32+fp16", smooth_k=True,
                                                smooth_v=False)
        else:
            o = sa.sageattn_qk_int8_pv_fp8_cuda_sm90(q[None], k[None], v[None], tensor_layout="HND", is_causal=True,
                                                     qk_quant_gran="per_thread", pv_accum_dtype="fp32+fp32", smooth_k=True)
        return o[0]
    if kernel == "flashinfer":
        # flashinfer single_prefill_with_kv_cache, Hopper FP8: NHD [n, h, d] E4M3 with per-head
        # scales (Q per qo head, K and V per kv head; the flashinfer-sm90 preset)
        q8, qs = _scaled_fp8(q, (1, 2), torch)
        k8, ks = _scaled_fp8(k, (1, 2), torch)
        v8, vs = _scaled_fp8(v, (1, 2), torch)
        o = mods["flashinfer"].single_prefill_with_kv_cache(
            q8.permute(1, 0, 2), k8.permute(1, 0, 2), v8.permute(1, 0, 2), scale_q=qs.reshape(H), scale_k=ks.reshape(Hkv),
            scale_v=vs.reshape(Hkv), causal=True, o_dtype=torch.bfloat16, backend="fa3")
        return o.permute(1, 0, 2)
    raise ValueError(f"--kernel {kernel}: expected one of {', '.join(KERNELS)}")


def _version(mod) -> str:
    v = getattr(mod, "__version__", None)
    if v:
        return str(v)
    try:
        from importlib import metadata
        return metadata.version(getattr(mod, "__name__", "").split(".")[0].replace("_", "-"))
    except Exception:  # noqa: BLE001  (no distribution metadata: say so)
        return "unknown"


def run(captures: List[str], kernel: str, conditions: List[str], out: str, backend: str = "auto",
        seed: int = DEFAULT_SEED, device: Optional[str] = None) -> List[str]:
    """Writes one output file per capture into `out`; returns their paths."""
    import importlib
    import torch

    if kernel not in KERNELS:
        raise ValueError(f"--kernel {kernel}: expected one of {', '.join(KERNELS)}")
    for c in conditions:
        if c not in CONDITIONS:
            raise ValueError(f"--conditions: '{c}': expected names from {', '.join(CONDITIONS)}")
    if backend not in ("auto", "torch-sdpa"):
        raise ValueError(f"--backend {backend}: expected auto or torch-sdpa")
    preset, package = KERNELS[kernel]
    mods = {}
    if backend == "auto":
        try:
            mods[package] = importlib.import_module(package)
        except ImportError as e:
            raise RuntimeError(f"--kernel {kernel} needs the package {package} ({e}); --backend torch-sdpa runs without it") from None
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = torch.cuda.get_device_name(0) if dev.startswith("cuda") and torch.cuda.is_available() else "none (" + dev + ")"
    meta = {"kernel": kernel, "preset": preset, "backend": backend if backend != "auto" else package,
            "package": package if backend == "auto" else "torch", "package_version":
            _version(mods[package]) if backend == "auto" else torch.__version__, "torch": torch.__version__,
            "gpu": gpu, "conditions": ",".join(conditions), "rotation": f"random-hadamard:{seed}",
            "transform": "attnum transforms in float64, rounded to the capture dtype"}
    os.makedirs(out, exist_ok=True)
    paths = []
    for cap in captures:
        tensors, dtypes, _ = read_safetensors(cap)
        layers = sorted({int(n.split(".")[1]) for n in tensors if n.startswith("layers.") and n.endswith(".q")})
        if not layers:
            raise ValueError(f"{cap}: no layers.{{l}}.q tensors")
        result = {}
        for l in layers:
            names = [f"layers.{l}.{x}" for x in "qkv"]
            for n in names:
                if n not in tensors:
                    raise ValueError(f"{cap}: tensor '{n}' missing")
            q, k, v = (tensors[n] for n in names)
            dt = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}[dtypes[names[0]]]
            tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dt]
            for cond in conditions:
                qc, kc = transform(q, k, cond, seed, dt)
                args = [torch.from_numpy(np.ascontiguousarray(x)).to(tdt).to(dev) for x in (qc, kc, v)]
                o = run_kernel(kernel, backend, *args, torch=torch, mods=mods)
                o = o.to(torch.bfloat16).float().cpu().numpy()
                if o.shape != q.shape:
                    raise RuntimeError(f"{kernel}: output shape {o.shape}, expected {q.shape}")
                result[f"layers.{l}.o.{cond}"] = o
        path = os.path.join(out, os.path.basename(cap))
        write_safetensors(path, result, meta, "BF16")
        paths.append(path)
    return paths


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnum.gpu", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a real kernel on captures, write layers.{l}.o.{condition}")
    r.add_argument("--captures", nargs="+", required=True)
    r.add_argument("--kernel", required=True, choices=sorted(KERNELS))
    r.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated (default: all four)")
    r.add_argument("--out", required=True)
    r.add_argument("--backend", default="auto", choices=["auto", "torch-sdpa"])
    r.add_argument("--rotation", default=f"random-hadamard:{DEFAULT_SEED}",
                   help="random-hadamard:SEED (as attnum's --rotation; pass the same to attnum transfer)")
    r.add_argument("--device", default=None, help="torch device (default cuda when available)")
    a = ap.parse_args(argv)
    if not a.rotation.startswith("random-hadamard:"):
        ap.error("--rotation: expected random-hadamard:SEED")
    try:
        seed = int(a.rotation.split(":", 1)[1], 0)
        paths = run(a.captures, a.kernel, [c for c in a.conditions.split(",") if c], a.out, a.backend, seed, a.device)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"attnum.gpu: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
