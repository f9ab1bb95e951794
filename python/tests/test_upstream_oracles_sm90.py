"""Oracles for the Hopper FP8 presets fa3, flashinfer-sm90 and sage2-sm90, written from the upstream
kernel sources (quoted as repo@commit path:line), compared with the engine bit for bit.

Same conventions as test_upstream_oracles.py, whose float32 helpers this file reuses (_fma, one
rounding of a*b + c; _exp2, the C library's exp2f as the engine's exp2_unit=ieee; _e4m3; the
wgmma fp32 accumulator model _acc_fp32). What the upstream source leaves to the compiler or the
hardware is marked [I] with the reasoning.

nvcc contraction: none of the three builds passes --fmad=false (FA3 hopper/setup.py:668, Sage
setup.py:57 and FlashInfer flashinfer/jit/core.py:544 pass --use_fast_math, which keeps fmad=true),
so a float multiply whose only use is an add is compiled as one FMA. [I] Where the source splits
such a pair over two statements (the row-sum rescale and its first add; Sage's O rescale and the
fresh PV tile's add), nvcc 13 (-arch=sm_90a -O3 --use_fast_math) was seen to emit one
fma.rn.ftz.f32 for a snippet with the same statements (docs/kernels.md, "fma_contract"); the
engine's knobs fma_contract / fma_contract_o default to that, and the oracles take it as a flag.
"""
import math

import numpy as np
import pytest
import torch

from test_upstream_oracles import (
    E4M3_MAX, _acc_fp32, _assert_same_bits, _bits, _e4m3, _engine, _exp2, _fma, _sage_inputs, _to, f32)

LOG2E = np.float64(1.4426950408889634)  # M_LOG2E (double)
FLT_MAX = f32(np.finfo(np.float32).max)


def _thread_columns(n, t):
    """Columns of a wgmma row fragment that thread t of a quad holds, in its register order:
    8g + 2t, 8g + 2t + 1 for g = 0, 1, ... (the accumulator layout convert_layout_acc_rowcol
    walks, FA3 hopper/utils.h:28-30's ni loop)."""
    return [8 * g + 2 * t + e for g in range(-(-n // 8)) for e in range(2) if 8 * g + 2 * t + e < n]


def wgmma_rowsum(lt, p, scale, first_block, fma_contract):
    """Thread partials of the row sum after one block (rows vectorised).
    flash-attention@0251105a hopper/softmax.h:120 `row_sum(mi) *= scores_scale(mi);` (in
    max_get_scale, not in the first block: Is_first gives scores_scale 1 and no multiply), then
    :134 `flash::reduce_sum</*zero_init=*/Is_first, /*warp_reduce=*/false>(scores, row_sum)`,
    i.e. hopper/utils.h:30 `summary(mi) = zero_init && ni == 0 ? tensor(mi, ni) :
    op(summary(mi), tensor(mi, ni))` over the thread's columns. FlashInfer@fb28d72
    include/flashinfer/attention/hopper/attention_updater.cuh:210 and :64-67 are the same.
    [I] nvcc contracts the multiply with the first add (fma_contract)."""
    lt = lt.copy()
    for t in range(4):
        cols = _thread_columns(p.shape[1], t)
        if first_block:
            x = p[:, cols[0]].copy()
            rest = cols[1:]
        elif fma_contract and cols:
            x = _fma(lt[:, t], scale, p[:, cols[0]])
            rest = cols[1:]
        else:
            x = (lt[:, t] * scale).astype(np.float32)
            rest = cols
        for j in rest:
            x = (x + p[:, j]).astype(np.float32)
        lt[:, t] = x
    return lt


def fa3_family_oracle(q, k, v, causal, kind="fa3", fma_contract=True, out_cast=True):
    """fa3: flash-attention@0251105a hopper/ FP8 forward (mainloop_fwd_sm90_tma_gmma_ws.hpp, the
    IntraWGOverlap path); flashinfer: flashinfer@fb28d72 include/flashinfer/attention/hopper/
    quantization/ (mainloop_mma.cuh, variants.cuh StandardFP8Attention). q [H, N, D], k and v
    [Hk, N, D] (n_q = n_kv)."""
    H, N, D = q.shape
    Hk = k.shape[0]
    group = H // Hk
    # [I] caller-side quantisation (not in the kernels): descale = amax / 448, codes E4M3(x / descale)
    # RNE saturating; FA3's q_descale is per (batch, kv head) (mainloop :1069 indexes it by
    # bidh_kv), FlashInfer's q_scale per qo head (variants.cuh:139 get_q_scale(.., qo_head_idx))
    def descale(x):
        s = f32(np.abs(x).max()) / E4M3_MAX
        return s if s != 0 else f32(1)

    qd = np.array([descale(q[(h // group) * group:(h // group + 1) * group] if kind == "fa3" else q[h])
                   for h in range(H)], np.float32)
    kd = np.array([descale(k[g]) for g in range(Hk)], np.float32)
    vd = np.array([descale(v[g]) for g in range(Hk)], np.float32)
    q8 = np.stack([_e4m3(q[h] / qd[h]) for h in range(H)])
    k8 = np.stack([_e4m3(k[g] / kd[g]) for g in range(Hk)])
    v8 = np.stack([_e4m3(v[g] / vd[g]) for g in range(Hk)])
    if kind == "fa3":
        # hopper/tile_size.h:42-47 tile_size_fwd_sm90, element_size 1 (FP8): {kBlockM, kBlockN}
        bm, bn = (192, 160) if D <= 64 else (192, 128) if D <= 96 else (128, 224)
    else:
        # quantization/prefill_sm90.cuh:401-428: CTA_Q, CTA_KV per HEAD_DIM
        bm, bn = {64: (192, 128), 128: (128, 192), 256: (128, 128)}[D]
    # flash_attn_interface.py:470 `softmax_scale = qkv.shape[-1] ** (-0.5)`, a float argument
    sm = f32(D ** -0.5)
    out = np.zeros((H, N, D), np.float32)
    for h in range(H):
        g = h // group
        if kind == "fa3":
            # mainloop :559 `float(args.softmax_scale * M_LOG2E)` (in double); flash_fwd_kernel_sm90.h:415
            # `softmax_scale_log2 *= q_descale * k_descale`
            sl2 = f32(np.float64(sm) * LOG2E) * (qd[h] * kd[g])
        else:
            # variants.cuh:140 `q_scale * k_scale * params.additional_params.sm_scale * math::log2e`
            sl2 = ((qd[h] * kd[g]) * sm) * f32(LOG2E)
        for m0 in range(0, N, bm):
            rows = np.arange(m0, min(N, m0 + bm))
            R = len(rows)
            # FA3 block.h:23,33 `n_block_max = ceil_div(seqlen_k, kBlockN)`, causal: min with
            # ceil_div(m_idx_max + seqlen_k - seqlen_q, kBlockN); FlashInfer quantization/mainloop_load.cuh:144-147
            nb = -(-N // bn)
            if causal:
                nb = min(nb, -(-((m0 // bm + 1) * bm) // bn))
            m = np.full(R, -np.inf, np.float32)
            lt = np.zeros((R, 4), np.float32)
            o = np.zeros((R, D), np.float32)  # :1166 `clear(tOrO)`
            prev = None
            scale = None
            for n in range(nb - 1, -1, -1):  # :1060 `n_block = n_block_max - 1`, then `--n_block`
                cols = n * bn + np.arange(bn)
                valid = cols < N
                kb = np.zeros((bn, D), np.float32)
                kb[valid] = k8[g][cols[valid]]
                s = _acc_fp32(np.zeros((R, bn), np.float32), q8[h, rows], kb.T)  # QK wgmma, fp32
                # FA3 mask.h:88-100: col >= row + 1 + seqlen_k - seqlen_q is -inf, as cols past
                # seqlen_k (Seqlenk_mask); FlashInfer mainloop_mma.cuh:106-113 the same
                mask = ~valid[None, :]
                if causal:
                    mask = mask | (cols[None, :] > rows[:, None])
                s = np.where(mask, f32(-np.inf), s).astype(np.float32)
                first = prev is None
                mx = s.max(axis=1) if first else np.maximum(m, s.max(axis=1))  # reduce_max, exact
                if kind == "fa3":
                    if not first:
                        # softmax.h:116-119 `scores_max_cur = row_max == -INFINITY ? 0 : row_max`;
                        # `exp2f((scores_max_prev(mi) - scores_max_cur) * softmax_scale_log2)`
                        cur = np.where(mx == -np.inf, f32(0), mx).astype(np.float32)
                        scale = _exp2(((m - cur) * sl2).astype(np.float32))
                    # softmax.h:79-81 `max_scaled = max == -INFINITY ? 0.f : max * scale - max_offset`
                    # (Max_offset 8 for FP8, flash_fwd_kernel_sm90.h:417): one FMA, as :86-88 `exp2f(
                    # tensor * scale - max_scaled)` (the comment there: "use the ffma instruction")
                    ms = np.where(mx == -np.inf, f32(0), _fma(mx, sl2, f32(-8))).astype(np.float32)
                else:
                    if not first:
                        # attention_updater.cuh:204-206 `scores_max_cur = fmaxf(row_max, -FLT_MAX)`;
                        # `exp2f((scores_max_prev(mi) - scores_max_cur) * sm_scale_log2)`
                        cur = np.maximum(mx, -FLT_MAX)
                        scale = _exp2(((m - cur) * sl2).astype(np.float32))
                    # :148-153 `row_max_scaled = fmaxf(max * scale, -FLT_MAX)`; `exp2f(tensor * scale -
                    # row_max_scaled)` (one FMA, the comment at :151 says so)
                    ms = np.maximum((mx * sl2).astype(np.float32), -FLT_MAX)
                p = _exp2(_fma(s, sl2, -ms[:, None]))
                lt = wgmma_rowsum(lt, p, scale, first, fma_contract)
                # FA3 P to E4M3 (convert_type_out, RNE saturating); FlashInfer variants.cuh:152-154
                # PQuantize `tSrS(i) *= p_scale` (448), then convert_type<DTypeKV>
                p8 = _e4m3(p if kind == "fa3" else (p * E4M3_MAX).astype(np.float32))
                vb = np.zeros((bn, D), np.float32)
                vb[valid] = v8[g][cols[valid]]
                if prev is not None:
                    # FA3 :1180 gemm PV of the previous block into tOrO, then :1205 `rescale_o`;
                    # FlashInfer mainloop_mma.cuh:142-145 `rescale_o` then gemm PV of the previous
                    # block: both O <- (O + P_prev V_prev) * alpha in this order of operations.
                    # The wgmma accumulates in place: no FMA with the rescale.
                    o = _acc_fp32(o, prev[0], prev[1])
                    o = (o * scale[:, None]).astype(np.float32)
                prev = (p8, vb)
                m = mx
            o = _acc_fp32(o, prev[0], prev[1])  # FA3 :1240; FlashInfer mainloop_mma.cuh:266
            # Allreduce<4> (FA3 utils.h:79-86; FlashInfer quad_allreduce_): xor 2, then xor 1
            l = ((lt[:, 0] + lt[:, 2]) + (lt[:, 1] + lt[:, 3])).astype(np.float32)
            if kind == "fa3":
                # softmax.h:144-145 `inv_sum = (sum == 0.f || sum != sum) ? 0.f : 1.f / sum;
                # scores_scale = inv_sum * final_scale` (final_scale = v_descale, :1241-1242); :1250
                inv = np.where((l == 0) | np.isnan(l), f32(0), f32(1) / l).astype(np.float32)
                res = o * (inv * vd[g])[:, None]
            else:
                # variants.cuh:138 `scale_pv = v_scale / p_scale`; attention_updater.cuh:235
                # `inv_sum = (sum > 0.f) ? pv_scale / sum : 0.f`; :254 `acc_o *= scores_scale`
                pv_scale = vd[g] / E4M3_MAX
                inv = np.where(l > 0, pv_scale / l, f32(0)).astype(np.float32)
                res = o * inv[:, None]
            res = res.astype(np.float32)
            out[h, rows] = _to(res, torch.bfloat16) if out_cast else res
    return out


# ---------------------------------------------------------------------------------------------
# sage2-sm90: thu-ml/SageAttention@d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5, the sm90 kernel
#    csrc/qattn/qk_int_sv_f8_cuda_sm90.cu (qk_int8_sv_f8_attn_kernel, CTA 64 x 128 keys) with
#    csrc/qattn/attn_utils.cuh and the quantisers of sageattention/ (core.py
#    sageattn_qk_int8_pv_fp8_cuda_sm90, the preset's path). Short citations: `sm90.cu:N` and
#    `utils:N` for those two files.
# ---------------------------------------------------------------------------------------------
SAGE_OFFSET = f32(8.807)  # utils:30 `#define S_FP8_OFFSET 8.807f` (exp2 offset, P in [0, 448])
SAGE_MASK = f32(-5000000.0)  # sm90.cu:203 `m[fq][0] = -5000000.0f`, :433 masked `RS_f32 = -5000000.0f`


def _sage_int8(x, scale):
    """quant_per_thread.py: `x / scale + 0.5 * sign`, then the int8 conversion truncates."""
    y = x / scale
    y = (y + np.where(y >= 0, f32(0.5), f32(-0.5))).astype(np.float32)
    return np.clip(np.trunc(y), -128, 127).astype(np.float32)


def _sage_thread_quant(x, seg, pairs):
    """Per-thread INT8 scales (sageattention/triton/quant_per_thread.py): each seg-row segment
    splits into groups of rows, {r : r % 8 == grp} for Q (WARPQ 16), {r : (r % 8) // 2 == grp} for
    K (BLKK 128); scale = amax / 127 + 1e-7 per group."""
    n = x.shape[0]
    codes = np.zeros_like(x)
    scales = np.zeros(n, np.float32)
    for s0 in range(0, n, seg):
        r = np.arange(s0, min(n, s0 + seg))
        key = (r % 8) // 2 if pairs else r % 8
        for grp in np.unique(key):
            rr = r[key == grp]
            sc = f32(np.abs(x[rr]).max()) / f32(127) + f32(1e-7)
            scales[rr] = sc
            codes[rr] = _sage_int8(x[rr], sc)
    return codes, scales


def sage2_sm90_oracle(q, k, v, causal, fma_contract=True, fma_contract_o=True, out_cast=True):
    H, N, D = q.shape
    group = H // k.shape[0]
    CTA_Q, CTA_K = 64, 128
    # core.py smooth_k: `km = k.mean(dim=seq, keepdim=True)` in the input dtype, `k - km` in bf16
    km = _to(k.astype(np.float64).mean(axis=1, keepdims=True).astype(np.float32), torch.bfloat16)
    ks_in = _to(k - km, torch.bfloat16)
    out = np.zeros((H, N, D), np.float32)
    sm = f32(1 / math.sqrt(D))  # sm_scale = head_dim ** -0.5 (float)
    sl2 = sm * f32(1.44269504)  # sm90.cu:153 `sm_scale *= math::log2e` (float)
    for h in range(H):
        g = h // group
        q8, qs = _sage_thread_quant(q[h], 16, False)
        k8, kscale = _sage_thread_quant(ks_in[g], 128, True)
        # per-channel V: `scale = amax / 448`, codes E4M3(v * (448 / amax)) (fused.cu, scale_max 448)
        amax = np.abs(v[g]).max(axis=0).astype(np.float32)
        vs = (amax / f32(448)).astype(np.float32)
        with np.errstate(divide="ignore"):
            v8 = _e4m3(v[g] * (f32(448) / amax)[None, :])
        for i in range(N):
            last_key = i if causal else N - 1  # utils:308-310 top-left: `kv_idx > q_idx` masked
            # sm90.cu:252 `num_iterations = div_ceil(` min(kv_len, (bx + 1) * CTA_Q) when causal, CTA_K)
            lim = min(N, (i // CTA_Q + 1) * CTA_Q) if causal else N
            nit = -(-lim // CTA_K)
            m = SAGE_MASK
            dl = np.ones(4, np.float32)  # sm90.cu:205-206 `d[fq][0] = 1.0f`
            o = np.zeros(D, np.float32)
            for it in range(nit):
                j0, j1 = it * CTA_K, min(N, it * CTA_K + CTA_K)
                S = (k8[j0:j1].astype(np.int64) @ q8[i].astype(np.int64)).astype(np.float32)  # int32 exact
                dq = qs[i] * kscale[j0:j1]
                P = np.zeros(CTA_K, np.float32)
                if it == nit - 1:
                    # the peeled last iteration dequantises first (sm90.cu:369-370 `dequant_scale =
                    # q_scale * K_scale[...]`, `sm_scale = original_sm_scale`), masked scores -5e6 (:433)
                    x = np.where(np.arange(j0, j1) > last_key, SAGE_MASK, (S * dq).astype(np.float32))
                    eff = np.full(j1 - j0, sl2, np.float32)
                else:
                    # the main loop folds the dequant scale: sm90.cu:263-264 `sm_scale = original_sm_scale * dequant_scale`
                    x = S
                    eff = (sl2 * dq).astype(np.float32)
                # update_mdo: utils:379 `m_temp = fmaf(m_temp, sm_scale, -S_FP8_OFFSET)` on the row max
                # (the same as the max of the fmaf's: sm_scale > 0), m = max(m, m_temp); utils:397
                # `o_scale = math::ptx_exp2(m_prev - m[fq][k])`
                mt = np.max(_fma(x, eff, -SAGE_OFFSET))
                m_new = f32(max(m, mt))
                alpha = _exp2(f32(m - m_new))
                m = m_new
                # utils:450 `RS = math::ptx_exp2(fmaf(RS, sm_scale, negative_m))` (exp2f IEEE here)
                P[:j1 - j0] = _exp2(_fma(x, eff, -m))
                # utils:400 `d[fq][k] *= o_scale`; sm90.cu:317 `d[fq][0] += (RS[0] + RS[1] + RS[4] +
                # RS[5])` per 16-column tile: thread t adds columns 16f+2t, +1, +8, +9
                for t in range(4):
                    for f in range(CTA_K // 16):
                        b0 = 16 * f + 2 * t
                        s4 = f32(f32(f32(P[b0] + P[b0 + 1]) + P[b0 + 8]) + P[b0 + 9])
                        if f == 0:
                            dl[t] = _fma(dl[t], alpha, s4) if fma_contract else f32(f32(dl[t] * alpha) + s4)
                        else:
                            dl[t] = f32(dl[t] + s4)
                # RS_32_to_8: E4M3 (RNE, saturating); sm90.cu:333-337 wgmma into a fresh RO_temp
                # (fp32, K = 32 per instruction), :353 `RO[fq][fv][k] += RO_temp[fq][fv][k]` after
                # utils:414 `RO *= o_scale`
                vb = np.zeros((CTA_K, D), np.float32)
                vb[:j1 - j0] = v8[j0:j1]
                tile = _acc_fp32(np.zeros((1, D), np.float32), _e4m3(P)[None, :], vb)[0]
                o = _fma(o, alpha, tile) if fma_contract_o else ((o * alpha).astype(np.float32) + tile).astype(np.float32)
            # epilogue: quad sum (d0 + d1) + (d2 + d3) (xor 1, xor 2), `RO *= 1 / d` (rcp: IEEE
            # here as the engine's rcp_unit=ieee), then sm90.cu:505-512 `RO *= v_scale`
            D_ = f32(f32(dl[0] + dl[1]) + f32(dl[2] + dl[3]))
            res = ((o * (f32(1) / D_)).astype(np.float32) * vs).astype(np.float32)
            out[h, i] = _to(res, torch.bfloat16) if out_cast else res
    return out


def _fa3_inputs(d, n, n_head=2):
    rng = np.random.default_rng(7000 + d + n)
    from test_upstream_oracles import _bf16_values
    return _bf16_values(rng, (n_head, n, d)), _bf16_values(rng, (1, n, d)), _bf16_values(rng, (1, n, d))


SM90_CASES = [(64, 200, True), (64, 200, False), (128, 257, True), (128, 130, False)]


@pytest.mark.parametrize("d,n,causal", SM90_CASES)
@pytest.mark.parametrize("kind", ["fa3", "flashinfer-sm90"])
def test_fa3_family_matches_upstream_oracle(kind, d, n, causal):
    q, k, v = _fa3_inputs(d, n)
    okind = "fa3" if kind == "fa3" else "flashinfer"
    _assert_same_bits(_engine(q, k, v, kind, causal), fa3_family_oracle(q, k, v, causal, okind))
    _assert_same_bits(_engine(q, k, v, kind, causal, knobs={"out_fmt": "fp32"}),
                      fa3_family_oracle(q, k, v, causal, okind, out_cast=False))


@pytest.mark.parametrize("kind", ["fa3", "flashinfer-sm90"])
def test_fa3_family_fma_contract_knob_is_the_unfused_update(kind):
    """fma_contract=false is the source as written (the rescale, then every add), the oracle with
    the flag off agrees with it, and the contracted and uncontracted updates differ."""
    q, k, v = _fa3_inputs(64, 400)
    okind = "fa3" if kind == "fa3" else "flashinfer"
    fused = _engine(q, k, v, kind, True, knobs={"out_fmt": "fp32"})
    unfused = _engine(q, k, v, kind, True, knobs={"out_fmt": "fp32", "fma_contract": False})
    _assert_same_bits(unfused, fa3_family_oracle(q, k, v, True, okind, fma_contract=False, out_cast=False))
    assert not np.array_equal(_bits(fused), _bits(unfused))


SAGE90_CASES = [(64, 200, True), (64, 300, False), (128, 130, True)]


@pytest.mark.parametrize("d,n,causal", SAGE90_CASES)
def test_sage2_sm90_matches_upstream_oracle(d, n, causal):
    q, k, v = _sage_inputs(d, n, causal)
    _assert_same_bits(_engine(q, k, v, "sage2-sm90", causal), sage2_sm90_oracle(q, k, v, causal))
    _assert_same_bits(_engine(q, k, v, "sage2-sm90", causal, knobs={"out_fmt": "fp32"}),
                      sage2_sm90_oracle(q, k, v, causal, out_cast=False))


@pytest.mark.parametrize("knob,kwargs", [("fma_contract", {"fma_contract": False}),
                                         ("fma_contract_o", {"fma_contract_o": False})])
def test_sage2_sm90_fma_contract_knobs_are_the_unfused_updates(knob, kwargs):
    q, k, v = _sage_inputs(64, 300, True)
    fused = _engine(q, k, v, "sage2-sm90", True, knobs={"out_fmt": "fp32"})
    unfused = _engine(q, k, v, "sage2-sm90", True, knobs={"out_fmt": "fp32", knob: False})
    _assert_same_bits(unfused, sage2_sm90_oracle(q, k, v, True, out_cast=False, **kwargs))
    assert not np.array_equal(_bits(fused), _bits(unfused))
