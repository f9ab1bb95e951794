"""Oracles written from the upstream kernel sources, compared with the engine bit for bit.

Each oracle below follows the upstream kernel line by line (quoted as repo@commit path:line), not
docs/kernels.md nor the engine. float32 arithmetic is emulated with np.float32 values in the
upstream order of operations; an FMA (one rounding of a*b + c) is written as `_fma`.
Casts to fp16/bf16 use torch's dtypes (round to nearest even; from float32 only: torch rounds a
double to half through float, so float64 -> fp16 goes through NumPy), fp8 E4M3 a cast written
here from the format (this torch has no float8 dtypes); all independent of attnum's casts.

Where the GPU runs an approximate instruction (ex2.approx, div.full / rcp.approx), the engine's
default is the host's IEEE operation (knobs exp2_unit / rcp_unit / div_unit = ieee), so the
oracles use IEEE float32 division (np.float32 / np.float32, correctly rounded) and the C
library's exp2f (see _exp2: glibc's exp2f is not correctly rounded for every argument, so
np.exp2 on float32, or float64 exp2 rounded to float32, would differ from it in rare last bits).

What the upstream source leaves to the compiler or the hardware is marked [I] with the reasoning.
"""
import ctypes
import ctypes.util
import math

import numpy as np
import pytest
import torch

import attnum

f32 = np.float32


def _fma(a, b, c):
    """fmaf(a, b, c), elementwise: the product of two float32 values is exact in float64; the sum
    is rounded once to float32 (through exact fractions where the float64 sum was inexact, found
    with TwoSum, so that no double rounding can occur)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    c = np.asarray(c, dtype=np.float32)
    a, b, c = np.broadcast_arrays(a, b, c)
    prod = a.astype(np.float64) * b.astype(np.float64)  # exact
    s = prod + c.astype(np.float64)
    out = s.astype(np.float32)
    # float64 rounding error of the sum (TwoSum); where nonzero, round the exact value directly
    with np.errstate(invalid="ignore"):
        bb = s - prod
        err = (prod - (s - bb)) + (c.astype(np.float64) - bb)
    bad = (err != 0) & np.isfinite(s)
    if np.any(bad):
        from fractions import Fraction
        flat = out.reshape(-1)
        for i in np.flatnonzero(bad.reshape(-1)):
            exact = Fraction(float(prod.reshape(-1)[i])) + Fraction(float(c.reshape(-1)[i]))
            flat[i] = _round_fraction_f32(exact)
        out = flat.reshape(out.shape)
    return out


def _round_fraction_f32(x):
    """Round an exact rational to float32, nearest even (normal range only; enough here)."""
    from fractions import Fraction
    if x == 0:
        return np.float32(0.0)
    sign = -1 if x < 0 else 1
    x = abs(x)
    e = math.floor(math.log2(x))
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    e = max(e, -126)
    ulp = Fraction(2) ** (e - 23)
    q, r = divmod(x, ulp)
    if r * 2 > ulp or (r * 2 == ulp and q % 2 == 1):
        q += 1
    return np.float32(sign * float(q * ulp))


_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_LIBM.exp2f.restype = ctypes.c_float
_LIBM.exp2f.argtypes = [ctypes.c_float]
_exp2f_scalar = np.vectorize(lambda x: _LIBM.exp2f(float(x)), otypes=[np.float32])


def _exp2(x):
    """exp2f of the C library (the engine's exp2_unit=ieee is the host exp2f; the GPU runs
    ex2.approx.ftz.f32). glibc's exp2f is not correctly rounded everywhere: on 200000 arguments in
    [-30, 0] it differed from float32(exp2 in float64) on 144 (0.07%), enough to change a row sum's
    last bit, so the oracle calls exp2f itself (through ctypes, not through attnum)."""
    x = np.asarray(x, dtype=np.float32)
    return _exp2f_scalar(x).astype(np.float32) if x.ndim else np.float32(_LIBM.exp2f(float(x)))


def _to(x, dtype):
    """Round float32 values to a torch dtype (RNE) and back to float32, exactly."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(dtype).to(torch.float32).numpy()


def _bf16_values(rng, shape, scale=1.0):
    return _to((rng.standard_normal(shape) * scale).astype(np.float32), torch.bfloat16)


def _bits(x):
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


# ---------------------------------------------------------------------------------------------
# 1. sage1: SageAttention v1 Triton (core.py sageattn_qk_int8_pv_fp16_triton, the preset's
#    source_commit thu-ml/SageAttention@d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5). Short citations:
#      core.py        = thu-ml/SageAttention@d1a57a5 sageattention/core.py
#      quant_per_block.py = thu-ml/SageAttention@d1a57a5 sageattention/triton/quant_per_block.py
#      per_block.py / bare `:N` = thu-ml/SageAttention@d1a57a5 sageattention/triton/attn_qk_int8_per_block.py
#      _causal.py     = thu-ml/SageAttention@d1a57a5 sageattention/triton/attn_qk_int8_per_block_causal.py
#    Triton compiles with enable_fp_fusion=True by default (fmul + fadd contracted to fmaf); the
#    preset's knob triton_fp_fusion defaults to true, as upstream runs, and the oracle follows it.
# ---------------------------------------------------------------------------------------------

SAGE_BLKQ, SAGE_BLKK = 128, 64  # quant_per_block.py:49 `BLKQ=128, BLKK=64`; per_block.py:131-132


def sage_quant_block(x, sm_scale, blk):
    """quant_per_block_int8_kernel (quant_per_block.py:21-47) on one head [L, C]; bare `:N` in this
    function are quant_per_block.py lines."""
    L, C = x.shape
    nb = -(-L // blk)
    codes = np.zeros((nb * blk, C), dtype=np.int64)
    scales = np.zeros(nb, dtype=np.float32)
    for b in range(nb):
        # :39 `x = tl.load(input_ptrs, mask=offs_n[:, None] < L)` [I: masked rows read as 0]
        xb = np.zeros((blk, C), dtype=np.float32)
        rows = x[b * blk:(b + 1) * blk]
        xb[:len(rows)] = rows
        xb = xb * f32(sm_scale)  # :40-41 `x = x.to(tl.float32)`, `x *= sm_scale` (sm_scale a float32 argument)
        scale = np.max(np.abs(xb)) / f32(127.0)  # :42 `scale = tl.max(tl.abs(x)) / 127.` (IEEE division)
        xi = xb / scale  # :43 `x_int8 = x / scale` (IEEE division)
        xi = xi + f32(0.5) * np.where(xi >= 0, f32(1), f32(-1))  # :44 `x_int8 += 0.5 * tl.where(x_int8 >= 0, 1, -1)`
        codes[b * blk:(b + 1) * blk] = np.trunc(xi).astype(np.int64)  # :45 `.to(tl.int8)`: fptosi truncates
        scales[b] = scale
    return codes[:L], scales


def sage_pv_fp16(p16, v16, k_step=16):
    """`tl.dot(p, v, out_dtype=tl.float16)` (per_block.py:68): fp16 P (64 keys) times fp16 V with an
    fp16 accumulator. [I] The source fixes only the output type; the tensor-core accumulation is
    modelled as each 16-key k-step's products summed exactly (float64: 16 products of two fp16
    values) and added to the fp16 accumulator with one rounding to fp16, from zero."""
    acc = np.zeros((p16.shape[0], v16.shape[1]), dtype=np.float32)
    for k0 in range(0, p16.shape[1], k_step):
        part = p16[:, k0:k0 + k_step].astype(np.float64) @ v16[k0:k0 + k_step].astype(np.float64)
        # float64 -> fp16 in one rounding with NumPy: torch converts a double to half through
        # float (c10::Half(float)), a double rounding that breaks fp16 ties
        acc = (acc.astype(np.float64) + part).astype(np.float16).astype(np.float32)
    return acc


def sage_rowsum(p):
    """`l_ij = tl.sum(p, 1)` (per_block.py:58, _causal.py:51) over a [M, 64] block. [I] Triton's
    reduce lowering on the mma accumulator layout: thread t of a quad holds columns 8g+2t, 8g+2t+1
    (g = 0..7) and adds them in element order from the first (reduceWithinThreads), then the quad
    combines with shuffles xor 2, then xor 1 (warpReduce goes from the widest lane offset)."""
    t4 = []
    for t in range(4):
        cols = [8 * g + 2 * t + e for g in range(8) for e in range(2)]
        acc = p[:, cols[0]].copy()
        for c in cols[1:]:
            acc = acc + p[:, c]
        t4.append(acc)
    return (t4[0] + t4[2]) + (t4[1] + t4[3])


def sage1_oracle(q, k, v, causal, fuse=True, rowsum=sage_rowsum, out_cast=True, smooth_k=True, pv_step=16):
    """q [H, N, D], k, v [Hkv, N, D]: float32 arrays of bf16 values. Returns o float32 (bf16 values;
    with out_cast=False the float32 `acc / l_i` before the output cast)."""
    H, N, D = q.shape
    Hkv = k.shape[0]
    group = H // Hkv
    # core.py:280 `km = k.mean(dim=seq_dim, keepdim=True)` on the bf16 k: [I] torch's CUDA mean
    # accumulates in float32 and scales by the float32 factor 1/n, then rounds to bf16 (the sum
    # itself is taken exactly here; its order on the GPU is torch's and not modelled)
    km = _to((k.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32) * f32(1.0 / N)), torch.bfloat16)
    # quant_per_block.py:53-54 `k = k - km` (bf16 tensor op: exact difference rounded to bf16)
    ks = _to(k - km, torch.bfloat16) if smooth_k else k
    # core.py:298-299 `if dtype == torch.bfloat16 ...: v = v.to(torch.float16)`
    v16 = _to(v, torch.float16)
    # core.py:301-302 `sm_scale = 1.0 / (head_dim_og ** 0.5)`; quant_per_block.py:87
    # `sm_scale=(sm_scale * 1.44269504)` in Python double, passed to the kernel as float32
    q_sm = 1.0 / (D ** 0.5) * 1.44269504
    o = np.zeros((H, N, D), dtype=np.float32)
    for h in range(H):
        hk = h // group  # per_block.py:102 `off_h // num_kv_groups`
        qi, qs = sage_quant_block(q[h], q_sm, SAGE_BLKQ)
        ki, kscale = sage_quant_block(ks[hk], 1.0, SAGE_BLKK)  # quant_per_block.py:97 `sm_scale=1.0`
        for sm in range(-(-N // SAGE_BLKQ)):
            r0, r1 = sm * SAGE_BLKQ, min(N, (sm + 1) * SAGE_BLKQ)
            rows = np.arange(r0, r1)
            # per_block.py:111-113 / _causal.py:99-101: m_i = -inf, `l_i = ... + 1.0`, acc = 0
            m_i = np.full(len(rows), -np.inf, dtype=np.float32)
            l_i = np.ones(len(rows), dtype=np.float32)
            acc = np.zeros((len(rows), D), dtype=np.float32)
            # per_block.py:29 all key blocks; _causal.py:28-31,105-115 stage 1 [0, start_m*BLOCK_M)
            # then stage 2 [start_m*BLOCK_M, (start_m+1)*BLOCK_M)
            # A block wholly past kv_len (causal stage 2 of the last query block) is all -inf:
            # m_ij = m_i, p = 0, alpha = 1, so l_i and acc come back unchanged; it is skipped here
            hi = min((sm + 1) * SAGE_BLKQ, N) if causal else N
            for n0 in range(0, hi, SAGE_BLKK):
                cols = n0 + np.arange(SAGE_BLKK)
                kmask = cols < N  # :41 / _causal.py:38 `k_mask = offs_n[None, :] < (kv_len - start_n)`
                kblk = np.zeros((SAGE_BLKK, D), dtype=np.int64)
                kblk[kmask] = ki[cols[kmask]]
                # :45 / _causal.py:41 `qk = tl.dot(q, k).to(tl.float32) * (q_scale * k_scale)`:
                # int32 dot exact, int->float RNE, the scale product rounded to float32
                qk = (qi[rows] @ kblk.T).astype(np.float32)
                s = qs[sm] * kscale[n0 // SAGE_BLKK]
                if causal:
                    # _causal.py:43-46 `mask &= offs_m[:, None] >= (start_n + offs_n[None, :])`,
                    # `qk += tl.where(mask, 0, float('-inf'))`; [I] contracted into fmaf(qk, s, 0 or -inf)
                    mask = kmask[None, :] & (rows[:, None] >= cols[None, :]) if n0 >= sm * SAGE_BLKQ \
                        else np.broadcast_to(kmask[None, :], qk.shape)
                    add = np.where(mask, f32(0), f32(-np.inf)).astype(np.float32)
                else:
                    # per_block.py:53 `qk += tl.where(k_mask, 0, -1.0e6)`
                    add = np.broadcast_to(np.where(kmask, f32(0), f32(-1.0e6)), qk.shape).astype(np.float32)
                qk = _fma(qk, s, add) if fuse else (qk * s + add)
                m_ij = np.maximum(m_i, qk.max(axis=1))  # :55 `m_ij = tl.maximum(m_i, tl.max(qk, 1))`
                qk = qk - m_ij[:, None]  # :56 `qk = qk - m_ij[:, None]`
                p = _exp2(qk)  # :57 `p = tl.math.exp2(qk)` (IEEE; GPU ex2.approx)
                l_ij = rowsum(p)  # :58 `l_ij = tl.sum(p, 1)`
                alpha = _exp2(m_i - m_ij)  # :60 `alpha = tl.math.exp2(m_i - m_ij)`
                # :61 `l_i = l_i * alpha + l_ij`: enable_fp_fusion (Triton's default) contracts the
                # fmul+fadd into one fmaf
                l_i = _fma(l_i, alpha, l_ij) if fuse else l_i * alpha + l_ij
                p16 = _to(p, torch.float16)  # :66 `p = p.to(tl.float16)`
                vblk = np.zeros((SAGE_BLKK, D), dtype=np.float32)  # :65 masked V rows read as 0
                vblk[kmask] = v16[hk][cols[kmask]]
                pv = sage_pv_fp16(p16, vblk, pv_step)  # :68 `tl.dot(p, v, out_dtype=tl.float16)`
                # :63 `acc = acc * alpha[:, None]` and :68 `acc += ...` (fp16 result widened to
                # float32): one fmaf(acc, alpha, pv) under enable_fp_fusion
                acc = _fma(acc, alpha[:, None], pv) if fuse else acc * alpha[:, None] + pv
                m_i = m_ij  # :69
            # :122 `acc = acc / l_i[:, None]` (IEEE division), :123 `.to(Out.type.element_ty)`
            # (output_dtype = the input dtype, bf16: core.py:311,324)
            o[h, r0:r1] = _to(acc / l_i[:, None], torch.bfloat16) if out_cast else acc / l_i[:, None]
    return o


def _engine(q, k, v, kernel, causal, knobs=None):
    r = attnum.attend(q, k, v, kernel=kernel, causal=causal, stages=False, measure=False, knobs=knobs)
    return np.asarray(r.o, dtype=np.float32)


SAGE_CASES = [(64, 200, True), (64, 200, False), (128, 130, True), (128, 257, False), (64, 64, True)]


def _sage_inputs(d, n, causal, n_head=2):
    """bf16-valued q [n_head, n, d], k, v [1, n, d] (GQA); k with a common offset so that smooth_k
    has something to remove."""
    rng = np.random.default_rng(1000 + d + n + causal)
    q = _bf16_values(rng, (n_head, n, d))
    k = _to(_bf16_values(rng, (1, n, d)) + np.float32(0.75), torch.bfloat16)
    v = _bf16_values(rng, (1, n, d))
    return q, k, v


def _assert_matches_oracle(kernel, oracle, d, n, causal):
    """The preset as it is (its bf16 output) and its float32 result before the output cast (knob
    out_fmt=fp32, the stricter comparison) equal the oracle's, bit for bit."""
    q, k, v = _sage_inputs(d, n, causal)
    _assert_same_bits(_engine(q, k, v, kernel, causal), oracle(q, k, v, causal))
    _assert_same_bits(_engine(q, k, v, kernel, causal, knobs={"out_fmt": "fp32"}),
                      oracle(q, k, v, causal, out_cast=False))


def _assert_same_bits(got, want):
    diff = np.flatnonzero(_bits(got) != _bits(want))
    assert diff.size == 0, f"{diff.size} of {want.size} differ; first {diff[:5]}: engine " \
        f"{got.reshape(-1)[diff[:5]]} oracle {want.reshape(-1)[diff[:5]]}"


@pytest.mark.parametrize("d,n,causal", SAGE_CASES)
def test_sage1_matches_upstream_oracle(d, n, causal):
    # the float32 result compared is `acc / l_i` before the output cast
    _assert_matches_oracle("sage1", sage1_oracle, d, n, causal)


@pytest.mark.parametrize("knob,kwargs", [("smooth_k", {"smooth_k": False}), ("triton_fp_fusion", {"fuse": False})])
def test_sage1_knobs_match_upstream_oracle_variants(knob, kwargs):
    """smooth_k=False (core.py:295 `km = None`) and enable_fp_fusion=False (plain fmul then fadd)."""
    q, k, v = _sage_inputs(64, 200, True)
    got = _engine(q, k, v, "sage1", True, knobs={knob: False, "out_fmt": "fp32"})
    _assert_same_bits(got, sage1_oracle(q, k, v, True, out_cast=False, **kwargs))


def test_sage1_oracle_detects_a_perturbation():
    """The comparison can fail: unfused l/acc updates, a sequential row sum, or the fp16 PV
    accumulator rounded per 32 keys instead of per 16, each change the float32 output."""
    q, k, v = _sage_inputs(64, 200, True)
    got = _engine(q, k, v, "sage1", True, knobs={"out_fmt": "fp32"})
    _assert_same_bits(got, sage1_oracle(q, k, v, True, out_cast=False))
    seq = lambda p: np.add.accumulate(p, axis=1, dtype=np.float32)[:, -1]  # noqa: E731
    for kwargs in ({"fuse": False}, {"rowsum": seq}, {"pv_step": 32}):
        assert not np.array_equal(_bits(got), _bits(sage1_oracle(q, k, v, True, out_cast=False, **kwargs))), kwargs


# ---------------------------------------------------------------------------------------------
# 2. xqa-sm90: TensorRT-LLM XQA Hopper kernel (NVIDIA/TensorRT-LLM@014dadcdfc440c7a7a9a21bbc519d8c56a00be43
#    cpp/kernels/xqa/mha_sm90.cu, the SWAP_AB decode path: one query token per call, the K/V tile
#    of 64 tokens as gemm rows, the group's q heads as columns). Citations name the function of
#    mha_sm90.cu and quote its line (line numbers were not taken). The engine runs prefill as one
#    such decode call per query row (causal: cacheSeqLen = row + 1, keys 0..row).
#    torch 1.13 here has no float8 dtypes: E4M3 is cast by _e4m3 below (RNE, saturating as
#    __NV_SATFINITE), written from the format's definition.
# ---------------------------------------------------------------------------------------------

_LIBM.expf.restype = ctypes.c_float
_LIBM.expf.argtypes = [ctypes.c_float]
XQA_LOG2E = f32(1.44269504088896340736)  # `log2e` constant of the xqa headers (float)
XQA_SAFE_INIT = f32(-1e5)  # cpp/kernels/xqa/defines.h `#define SAFE_INIT_ROW_MAX (-1e+5F)` (stored version)
E4M3_MAX = f32(448)  # `kE4M3_MAX`


def _e4m3(x):
    """float32 -> E4M3 (fn) value, round to nearest even, saturating at +-448: 3 fraction bits,
    exponent >= -6, subnormal step 2^-9."""
    x = np.asarray(x, np.float32).astype(np.float64)
    a = np.abs(x)
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), -6)
    ulp = np.exp2(e - 3)
    return (np.sign(x) * np.minimum(np.round(a / ulp) * ulp, 448.0)).astype(np.float32)


def _acc_fp32(acc, a, b, k_step=32):
    """acc + a @ b through the wgmma fp32 accumulator. [I] The source fixes only the instruction
    (fp8 wgmma, K = 32 per instruction, `gmma::instK`); each instruction's 32 products are summed
    exactly (float64) and added to the accumulator with one rounding to float32."""
    for k0 in range(0, a.shape[-1], k_step):
        acc = (acc.astype(np.float64) + a[..., k0:k0 + k_step].astype(np.float64)
               @ b[k0:k0 + k_step].astype(np.float64)).astype(np.float32)
    return acc


def xqa_warp_col_sum(p, w):
    """computeWarpColSum for warp w of the 64-token tile: thread quad q holds tokens 16w+q and
    16w+8+q (`row = 64*m + 16*warpRank + 8*i + idxQuad`, warpGrpApplyMask) and adds them in that
    order (`colSum = (m == 0 && i == 0) ? src : colSum + src`); then `x += __shfl_xor_sync(~0U, x,
    xorMask)` for xorMask 16, 8, 4 (quads q^4, q^2, q^1)."""
    a = [p[16 * w + q] + p[16 * w + 8 + q] for q in range(8)]
    b = [a[q] + a[q ^ 4] for q in range(8)]
    c = [b[q] + b[q ^ 2] for q in range(8)]
    return np.float32(c[0] + c[1])


def xqa_oracle(q, k, v, causal, fuse_exp=True, warp_col_sum=xqa_warp_col_sum, out_cast=True):
    H, N, D = q.shape
    group = H // k.shape[0]
    # kernel_mha: `float const* kvCacheScale ... Same scale for K and V cache`; the cache is the
    # caller's: one scale amax(|K|, |V|) / 448 (the preset's choice), codes E4M3(x / scale)
    kv_scale = f32(max(np.abs(k).max(), np.abs(v).max())) / E4M3_MAX
    k8, v8 = _e4m3(k / kv_scale), _e4m3(v / kv_scale)
    # F16QToF8Converter::store: the bf16 Q converted to E4M3 as it is (qScale folded below, 1 here)
    q8 = _e4m3(q)
    # kernel_mha: `qkScale = qScale * (isKVCacheQuantized ? kvCacheScale[0] : 1.f) * rsqrtf(validElemsPerHead)`
    # (left to right; rsqrtf is MUFU.RSQ on the GPU, the IEEE 1/sqrt here as the engine's default)
    qk_scale = (f32(1) * kv_scale) * f32(1 / np.sqrt(np.float64(D)))
    # kernel_mha: `xScale = 1.f / kE4M3_MAX`, `xvoScale = xScale * kvCacheScale[0] * oScale` (oScale 1)
    xvo_scale = (f32(1) / E4M3_MAX) * kv_scale * f32(1)
    out = np.zeros_like(q)
    for h in range(H):
        hk = h // group
        for i in range(N):
            seq_len = i + 1 if causal else N
            seq_max = XQA_SAFE_INIT  # `smem.gemm0CurrentSeqMax[threadIdx.x] = safeInitRowMax`
            acc_max, acc_sum = XQA_SAFE_INIT, f32(0)  # `gemm1AccColMax = safeInitRowMax; gemm1AccColSum = 0`
            acc = np.zeros((1, D), np.float32)  # `Gemm1Acc acc{}`
            for t0 in range(0, seq_len, 64):
                toks = t0 + np.arange(64)
                valid = toks < seq_len
                kb = np.zeros((64, D), np.float32)
                kb[valid] = k8[hk][toks[valid]]
                # `mma_async_shmA(acc, matDescK, matDescQ, accHasVal)` over the head's K steps
                s = _acc_fp32(np.zeros((64, 1), np.float32), kb, q8[h, i][:, None])[:, 0]
                s = s * qk_scale  # `acc = acc * qkScale`
                s = np.where(valid, s, XQA_SAFE_INIT).astype(np.float32)  # warpGrpApplyMask: `= safeInitRowMax`
                # computeWarpGrpColMax_sync: tile max, atomicMax into the persistent smemColMax
                seq_max = np.float32(max(seq_max, s.max()))
                # warpGrpOnlineSoftmax: `bias = maxVal * log2e`, `elem = exp2f(elem * log2e - bias)`:
                # nvcc's default --fmad=true contracts it into fmaf (defines.h's own comment says
                # "(x * log2e - bias) is computed with FMA"); exp2f IEEE as the engine's default
                bias = seq_max * XQA_LOG2E
                p = _exp2(_fma(s, XQA_LOG2E, -bias) if fuse_exp else s * XQA_LOG2E - bias)
                parts = [warp_col_sum(p, w) for w in range(4)]  # `warpColSum = computeWarpColSum(acc)`
                # rescaleGemm1AccForNewColMax_sync: `if (accColMax < xColMax)`: `scaleVec = expf(accColMax
                # - xColMax)`, `acc(m, n)(i, j) *= scale`, `accColSum = accColSum * scaleVec` (host expf)
                if acc_max < seq_max:
                    sc = np.float32(_LIBM.expf(float(acc_max - seq_max)))
                    acc = acc * sc
                    acc_sum = acc_sum * sc
                for w in range(4):  # warp 3: `accColSum = accColSum + loadShmColWiseVecNoDup(shmXColSum[i])`
                    acc_sum = np.float32(acc_sum + parts[w])
                acc_max = seq_max
                # `acc = acc * kE4M3_MAX`; storeGemm0AccToShm: `__nv_cvt_float2_to_fp8x2(..., __NV_SATFINITE, __NV_E4M3)`
                x8 = _e4m3(p * E4M3_MAX)
                vb = np.zeros((64, D), np.float32)
                vb[valid] = v8[hk][toks[valid]]
                acc = _acc_fp32(acc, x8[None, :], vb)  # `mma_async_regA(acc, fragA, descX, true)`
            # finalizeAndWriteOut_sync: `regOutScale = __frcp_rn(regColSum) * xvoScale`; rescaleAcc
            # `acc *= scale`; then the bf16 conversion of saveTransposedOutput
            o = acc[0] * ((f32(1) / acc_sum) * xvo_scale)
            out[h, i] = _to(o, torch.bfloat16) if out_cast else o
    return out


XQA_CASES = [(64, 100, True), (128, 70, False), (128, 130, True)]


@pytest.mark.parametrize("d,n,causal", XQA_CASES)
def test_xqa_matches_upstream_oracle(d, n, causal):
    _assert_matches_oracle("xqa-sm90", xqa_oracle, d, n, causal)


def test_xqa_oracle_detects_a_perturbation():
    """An unfused exp2 argument, or the warp's column sum taken in token order, change the bits."""
    q, k, v = _sage_inputs(64, 100, True)
    got = _engine(q, k, v, "xqa-sm90", True, knobs={"out_fmt": "fp32"})

    def sequential(p, w):
        x = np.float32(0)
        for r in range(16):
            x = np.float32(x + p[16 * w + r])
        return x

    for kwargs in ({"fuse_exp": False}, {"warp_col_sum": sequential}):
        assert not np.array_equal(_bits(got), _bits(xqa_oracle(q, k, v, True, out_cast=False, **kwargs))), kwargs


# ---------------------------------------------------------------------------------------------
# hpcops: Tencent/hpc-ops@6e2ecede9d6d47b2e680e839cc7ad7422bc8d88b, FP8 prefill with the API's
#    default quantisation (per-token-per-head Q, per-tensor K and V), src/attention/prefill/
#    kernels.cuh and src/utils/utils.cuh. Tiles of 128 query rows x 128 keys, keys forward.
#    [I] The caller-side quantisation (amax/448 per token of Q, per tensor of K and V, RNE,
#    saturating) is not in the kernel; the wgmma fp32 accumulator is _acc_fp32's model.
#    nvcc's default --fmad=true contracts `a * b + c` written as one expression (CMakeLists.txt:
#    97-106 sets no --fmad=false; nvcc 13 -arch=sm_90a emits fma.rn.f32 for :86's pattern).
# ---------------------------------------------------------------------------------------------
HPC_LOG2E = f32(1.4426950408889634)  # kLog2e


def hpc_thread_partials(p):
    """:68 `float row_sum = 0.f;` then :82 `row_sum += tAttr_mn(im, in)` over the thread's
    columns of the mma layout: thread t of a quad holds columns 8g + 2t, 8g + 2t + 1, in order."""
    t4 = np.zeros((p.shape[0], 4), np.float32)
    for t in range(4):
        for g in range(p.shape[1] // 8):
            for e in range(2):
                t4[:, t] = t4[:, t] + p[:, 8 * g + 2 * t + e]
    return t4


def hpcops_oracle(q, k, v, causal, fuse_sum=True, out_cast=True, fuse_o=True):
    H, N, D = q.shape
    group = H // k.shape[0]
    qs = np.abs(q).max(axis=2).astype(np.float32) / E4M3_MAX  # [I] per token per head
    q8 = _e4m3(q / qs[:, :, None])
    ks = np.float32(np.abs(k).max()) / E4M3_MAX  # [I] per tensor
    vs = np.float32(np.abs(v).max()) / E4M3_MAX
    k8, v8 = _e4m3(k / ks), _e4m3(v / vs)
    # 5.2 `one_over_dk_log2e = 1.f / sqrtf(d) * kLog2e` (float)
    c = f32(f32(1) / np.sqrt(f32(D))) * HPC_LOG2E
    T = 128
    out = np.zeros((H, N, D), np.float32)
    for h in range(H):
        hk = h // group
        for m0 in range(0, N, T):
            rows = np.arange(m0, min(N, m0 + T))
            R = len(rows)
            tqs = qs[h, rows] * ks  # :1279 `qscale * kscale` (tQS)
            g_max = np.full(R, -np.inf, np.float32)
            g_sum = np.zeros((R, 4), np.float32)
            y = np.zeros((R, D), np.float32)
            n_end = min(N, m0 + T) if causal else N  # causal: tiles up to the diagonal's
            for n0 in range(0, n_end, T):
                cols = n0 + np.arange(T)
                valid = cols < N
                kb = np.zeros((T, D), np.float32)
                kb[valid] = k8[hk][cols[valid]]
                s = _acc_fp32(np.zeros((R, T), np.float32), q8[h, rows], kb.T)
                mask = ~valid[None, :]
                if causal:
                    mask = mask | (cols[None, :] > rows[:, None])
                # :1325 `tAttr_mn *= tQS[im]`; masked scores -inf
                s = np.where(mask, f32(-np.inf), s * tqs[:, None]).astype(np.float32)
                # :75-77 the row max of the scores times one_over_dk_log2e (max is exact in any order)
                last = g_max.copy()
                g_max = np.maximum(last, s.max(axis=1) * c)
                # :81 `exp2f_ftz(tAttr * one_over_dk_log2e - gMax)`: one FMA (contracted)
                p = _exp2(_fma(s, c, -g_max[:, None]))
                scale = _exp2(last - g_max)  # :85 `exp2f_ftz(last_max - gMax(im))`
                t4 = hpc_thread_partials(p)
                # :86 `gSum(im) = gSum(im) * scale + row_sum`: one expression, contracted by nvcc
                g_sum = _fma(g_sum, scale[:, None], t4) if fuse_sum else g_sum * scale[:, None] + t4
                p8 = _e4m3(p * f32(256))  # kFp8PrefillPScale: P * 256 cast to E4M3
                vb = np.zeros((T, D), np.float32)
                vb[valid] = v8[hk][cols[valid]]
                o = _acc_fp32(np.zeros((R, D), np.float32), p8, vb)  # fresh fp32 PV tile
                # :90 `tYr * scale`, then :1403 `tYr(i) += tOr(i)`: nvcc contracts the two into one
                # fma.rn.f32 (the PTX of gpu/fma_contract.cu hpcops_o_rescale, same statements between)
                y = _fma(y, scale[:, None], o) if fuse_o else y * scale[:, None] + o
            # utils.cuh:405-409 the quad reduction xor 1 then xor 2: (l0 + l1) + (l2 + l3)
            l = (g_sum[:, 0] + g_sum[:, 1]) + (g_sum[:, 2] + g_sum[:, 3])
            # :1419-1427 the epilogue: y * (1 / gSum), then * (vscale / 256)
            o = (y * (f32(1) / l)[:, None]) * (vs * f32(1 / 256))
            out[h, rows] = _to(o, torch.bfloat16) if out_cast else o
    return out


HPC_CASES = [(128, 200, True), (128, 256, True), (128, 300, False), (128, 130, False)]


@pytest.mark.parametrize("d,n,causal", HPC_CASES)
def test_hpcops_matches_upstream_oracle(d, n, causal):
    _assert_matches_oracle("hpcops", hpcops_oracle, d, n, causal)


def test_hpcops_fma_contract_knob_is_the_unfused_update():
    """fma_contract=false is the row-sum update as written (a multiply, then an add), and the
    contracted and uncontracted updates differ in the float32 output."""
    q, k, v = _sage_inputs(128, 256, True)
    fused = _engine(q, k, v, "hpcops", True, knobs={"out_fmt": "fp32"})
    unfused = _engine(q, k, v, "hpcops", True, knobs={"out_fmt": "fp32", "fma_contract": False})
    _assert_same_bits(unfused, hpcops_oracle(q, k, v, True, fuse_sum=False, out_cast=False))
    assert not np.array_equal(_bits(fused), _bits(unfused))


def test_hpcops_fma_contract_o_knob_is_the_unfused_o_update():
    """fma_contract_o=false is the O update as written (tYr * scale, then += the fresh PV tile)."""
    q, k, v = _sage_inputs(128, 256, True)
    fused = _engine(q, k, v, "hpcops", True, knobs={"out_fmt": "fp32"})
    unfused = _engine(q, k, v, "hpcops", True, knobs={"out_fmt": "fp32", "fma_contract_o": False})
    _assert_same_bits(unfused, hpcops_oracle(q, k, v, True, out_cast=False, fuse_o=False))
    assert not np.array_equal(_bits(fused), _bits(unfused))
