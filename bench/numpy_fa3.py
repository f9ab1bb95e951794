#!/usr/bin/env python3
"""The speed baseline: a plain NumPy emulation of FlashAttention-3's FP8
forward, timed in the same process as attnum's own `fa3` emulation (the Python module).

    OPENBLAS_NUM_THREADS=2 python3 bench/numpy_fa3.py [--tokens 1024] [--d-head 128] [--json]

The NumPy emulation does the work a careful user would write with NumPy and a BLAS: per-tensor
E4M3 casts of Q, K, V (amax/448), FA3's tile loop (block_m 128, block_n 224 for d 128, key blocks
last to first), scores as exact k=32 chunk sums (float64 GEMMs of E4M3 values are exact over a
chunk) added to fp32 accumulators with one rounding each, the online softmax in exp2 with the
exponent offset 8, P cast to E4M3, P V as exact k=32 chunk sums into the fp32 O, and the bf16
epilogue. It follows the kernel closely but not bit for bit (its row sum is NumPy's pairwise sum,
not the WGMMA fragment order, and NumPy's float32 exp2 is not libm's): the script prints both
emulations' errors against fp64 attention and their difference to show that they do the same job.

attnum is timed twice: the kernel alone (`attnum.attend(..., measure=False)`, what the NumPy
code computes; `speedup`) and with the fp64 reference and metrics of `attnum.attend`
(`speedup_with_reference`). Each time is the best of --repeats, interleaved.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import sys
import time

import numpy as np


def blas_name() -> str:
    """The BLAS NumPy uses (OpenBLAS says its version and core; reference BLAS says nothing)."""
    try:
        info = np.__config__.get_info("blas_opt_info") if hasattr(np.__config__, "get_info") else {}
    except Exception:  # noqa: BLE001 - only for the label
        info = {}
    for lib in ("libopenblas.so.0", "libopenblasp-r0.3.21.so", ctypes.util.find_library("openblas") or ""):
        if not lib:
            continue
        try:
            ob = ctypes.CDLL(lib)
            ob.openblas_get_config.restype = ctypes.c_char_p
            ob.openblas_get_corename.restype = ctypes.c_char_p
            return "OpenBLAS " + ob.openblas_get_config().decode() + " core " + ob.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "not OpenBLAS (" + json.dumps(info)[:80] + ")"


def e4m3(x: np.ndarray) -> np.ndarray:
    """Round float32 to E4M3 (fn: no inf, 448 max), nearest even, saturating (satfinite)."""
    a = np.abs(x, dtype=np.float32)
    _, e = np.frexp(a)                      # a = m * 2^e, m in [0.5, 1): exponent of a is e - 1
    shift = np.maximum(e - 1, -6) - 3       # the quantum 2^shift: 3 fraction bits, subnormals at 2^-9
    r = np.ldexp(np.round(np.ldexp(a, -shift)), shift)   # np.round: half to even
    return np.copysign(np.minimum(r, np.float32(448.0)), x).astype(np.float32)


def bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 values (nearest even), kept as float32."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def chunk_add(acc: np.ndarray, a: np.ndarray, b: np.ndarray, k_step: int = 32) -> np.ndarray:
    """acc (fp32) plus A B over k in chunks of k_step: each chunk's sum exact (float64 GEMM of
    E4M3 values), added to the fp32 accumulator with one rounding."""
    for c in range(0, a.shape[1], k_step):
        acc = (acc.astype(np.float64) + a[:, c:c + k_step] @ b[c:c + k_step]).astype(np.float32)
    return acc


def numpy_fa3_head(q: np.ndarray, k: np.ndarray, v: np.ndarray, bm: int = 128, bn: int = 224) -> np.ndarray:
    n, d = q.shape
    sq, sk, sv = (np.float32(np.abs(x).max()) / np.float32(448.0) for x in (q, k, v))
    q8, k8, v8 = e4m3(q / sq), e4m3(k / sk), e4m3(v / sv)
    q64, kt64, v64 = q8.astype(np.float64), k8.T.astype(np.float64).copy(), v8.astype(np.float64)
    sm = 1.0 / np.sqrt(d)
    sl2 = np.float32(np.float32(sm * np.log2(np.e)) * np.float32(sq * sk))
    o = np.empty((n, d), np.float32)
    for r0 in range(0, n, bm):
        r1 = min(n, r0 + bm)
        rows = np.arange(r0, r1)[:, None]
        acc = np.zeros((r1 - r0, d), np.float32)
        m = np.full(r1 - r0, -np.inf, np.float32)
        l = np.zeros(r1 - r0, np.float32)
        blocks = list(range(0, r1, bn))[::-1]          # causal: blocks up to the diagonal, last first
        for j0 in blocks:
            j1 = min(r1, j0 + bn)
            s = chunk_add(np.zeros((r1 - r0, j1 - j0), np.float32), q64[r0:r1], kt64[:, j0:j1])
            s = np.where(np.arange(j0, j1)[None, :] <= rows, s, np.float32(-np.inf))
            m_new = np.maximum(m, s.max(axis=1))
            seen = ~np.isneginf(m_new)                  # rows with a key so far (reverse order)
            m_use = np.where(seen, m_new, np.float32(0))
            alpha = np.where(np.isneginf(m), np.float32(0), np.exp2((m - m_use) * sl2)).astype(np.float32)
            p = np.exp2(s * sl2 - (m_use * sl2 - np.float32(8.0))[:, None]).astype(np.float32)
            l = l * alpha + p.sum(axis=1, dtype=np.float32)
            acc *= alpha[:, None]
            acc = chunk_add(acc, e4m3(p).astype(np.float64), v64[j0:j1])
            m = m_new
        o[r0:r1] = bf16(acc * (sv / l)[:, None])
    return o


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--d-head", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.tokens < 1 or a.d_head < 1 or a.heads < 1 or a.repeats < 1:
        print("error: --tokens, --d-head, --heads and --repeats must be >= 1", file=sys.stderr)
        return 2
    if a.d_head > 128:
        print("error: this baseline models FA3's d <= 128 tile (block_n 224) only", file=sys.stderr)
        return 2
    import attnum  # noqa: E402  (after argument checks: the import loads the C++ module)

    rng = np.random.default_rng(42)
    shape = (a.heads, a.tokens, a.d_head)
    q, k, v = (bf16(rng.standard_normal(shape, dtype=np.float32)) for _ in range(3))
    attnum.attend(*(np.ascontiguousarray(x[:, :64]) for x in (q, k, v)), kernel="fa3", stages=False)  # warm up
    t_np = t_at = t_full = float("inf")
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        o_np = np.stack([numpy_fa3_head(q[h], k[h], v[h]) for h in range(a.heads)])
        t_np = min(t_np, time.perf_counter() - t0)
        t0 = time.perf_counter()
        r = attnum.attend(q, k, v, kernel="fa3", stages=False, measure=False)
        t_at = min(t_at, time.perf_counter() - t0)
        t0 = time.perf_counter()
        attnum.attend(q, k, v, kernel="fa3", stages=False)
        t_full = min(t_full, time.perf_counter() - t0)
    ref = attnum.reference(q, k, v)

    def rel(x, y):
        return float(np.linalg.norm((x - y).ravel()) / np.linalg.norm(y.ravel()))

    out = {
        "tokens": a.tokens, "d_head": a.d_head, "heads": a.heads, "repeats": a.repeats,
        "attnum_threads": attnum.threads(), "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "blas": blas_name(), "numpy": np.__version__, "attnum": attnum.version(),
        "numpy_seconds": t_np, "attnum_seconds": t_at, "speedup": t_np / t_at,
        "attnum_with_reference_seconds": t_full, "speedup_with_reference": t_np / t_full,
        "numpy_rel_err": rel(o_np, ref), "attnum_rel_err": rel(np.asarray(r.o), ref),
        "numpy_vs_attnum": rel(o_np, np.asarray(r.o)),
    }
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{out['blas']}; numpy {out['numpy']}; attnum {out['attnum']} threads {out['attnum_threads']}")
        print(f"numpy FA3 emulation {t_np:8.3f} s   rel_err vs fp64 {out['numpy_rel_err']:.4e}")
        print(f"attnum fa3 (kernel) {t_at:8.3f} s   rel_err vs fp64 {out['attnum_rel_err']:.4e}")
        print(f"attnum fa3 + fp64   {t_full:8.3f} s   (attnum.attend with the reference and metrics)")
        print(f"the two outputs differ by {out['numpy_vs_attnum']:.3e} (relative); attnum is "
              f"{out['speedup']:.1f}x faster ({out['speedup_with_reference']:.1f}x with its reference)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
