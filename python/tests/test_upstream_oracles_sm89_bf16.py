"""Oracles for the presets sage2pp-sm89 (SageAttention2++ on sm89, fp16-accumulated PV) and bf16
(FlashAttention-3 hopper/ BF16 forward), written from the upstream kernel sources (quoted as
repo@commit path:line), compared with the engine bit for bit, on the default ISA path and on every
other path this CPU supports (ATTNUM_ISA, in a subprocess).

Same conventions as test_upstream_oracles.py, whose float32 helpers this file reuses (_fma, one
rounding of a*b + c; _exp2, the C library's exp2f as the engine's exp2_unit=ieee; _e4m3 written
from the format; _to, torch's RNE casts). The GPU's ex2.approx / rcp.approx are modelled by IEEE
operations, as the engine's defaults exp2_unit / rcp_unit / div_unit = ieee. What the upstream
source leaves to the compiler or the hardware is marked [I] with the reasoning.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import BINARY
from test_upstream_oracles import (
    _assert_same_bits, _bf16_values, _bits, _e4m3, _engine, _exp2, _fma, _sage_inputs, _to, f32)

# ---------------------------------------------------------------------------------------------
# sage2pp-sm89: thu-ml/SageAttention@d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5, the API
#    sageattn_qk_int8_pv_fp8_cuda with its defaults (qk_quant_gran="per_thread",
#    pv_accum_dtype="fp32+fp16", smooth_k=True). Short citations:
#      core.py  = sageattention/core.py
#      qpt.py   = sageattention/triton/quant_per_thread.py
#      fused.cu = csrc/fused/fused.cu
#      inst.cu  = csrc/qattn/sm89_qk_int8_sv_f8_accum_f16_fuse_v_scale_attn_inst_buf.cu
#      sm89:N   = csrc/qattn/qk_int_sv_f8_cuda_sm89.cuh
#      utils:N  = csrc/qattn/attn_utils.cuh
#    setup.py:57 passes --use_fast_math (fmad=true, ftz). [I] nvcc contracts a float multiply
#    whose only use is an add (the d and O rescales below, split over two functions in the
#    source); gpu/fma_contract.cu `sage_d_rescale` / `sage_sm89_o_rescale` are snippets of those
#    statements whose PTX (nvcc 13) shows the fma; the oracle takes both as flags.
# ---------------------------------------------------------------------------------------------
SM89_CTA_Q, SM89_CTA_K = 128, 64  # inst.cu:124-125 `constexpr int CTA_Q = 128; constexpr int CTA_K = 64;`
SM89_OFFSET = f32(8.807)  # utils:30 `#define S_FP8_OFFSET 8.807f`
SM89_NEG = f32(-5000000.0)  # sm89:165 `m[fq][k] = -5000000.0f`; utils:314, :342 masked `-5000000.0f`
SM89_LOG2E = f32(1.44269504088896340736)  # csrc/math.cuh:32 `constexpr float log2e = 1.44269504088896340736f`
SM89_V_MAX = f32(2.25)  # core.py:805-807 `quant_v_scale_max = 2.25` for 'fp32+fp16'


def _sm89_int8_groups(x, seg, key):
    """quant_query_per_thread_int8_kernel (qpt.py:21-46, BLK = WARPQ = 32) and
    quant_key_per_thread_int8_kernel (qpt.py:48-98, BLK = WARPK = 64): each seg-row segment splits
    into groups of rows (Q, qpt.py:32 `offs_n = off_blk * BLK + tl.arange(0, BLK // 8) * 8 + off_tld`:
    rows r % 8 == tld; K, qpt.py:75-76 `... * 8 + off_tld * 2` and `+ 1`: rows (r % 8) // 2 == tld)."""
    n = x.shape[0]
    codes = np.zeros_like(x)
    scales = np.zeros(n, np.float32)
    for s0 in range(0, n, seg):
        r = np.arange(s0, min(n, s0 + seg))
        grp = key(r)
        for g in np.unique(grp):
            rr = r[grp == g]
            # qpt.py:41 / :89 `scale = tl.max(tl.abs(x)) / 127. + 0.0000001` (float32; IEEE division)
            sc = f32(f32(np.abs(x[rr]).max()) / f32(127.0)) + f32(0.0000001)
            y = (x[rr] / sc).astype(np.float32)  # qpt.py:42 `x_int8 = x / scale`
            # :43 `x_int8 += 0.5 * tl.where(x_int8 >= 0, 1, -1)`
            y = (y + np.where(y >= 0, f32(0.5), f32(-0.5))).astype(np.float32)
            codes[rr] = np.trunc(y)  # :44 `x_int8.to(tl.int8)`: fptosi truncates
            scales[rr] = sc
    return codes, scales


def _fp16_acc_pv(p8, v8, k_step=32):
    """utils:899-961 compute_fp8_sv_inst_buf_fp16_accu: per 64-key block, fk = 0 with
    `mma_sync_m16n16k32_row_col_f8f8f16<mma::MMAMode::kInit>` (csrc/mma.cuh:594-612: C operand
    `"r"(0)`), fk = 1 `<kInplaceUpdate>` (C = RO_int32): two `mma.sync.aligned.m16n8k32.row.col.
    f16.e4m3.e4m3.f16`, keys 0-31 then 32-63 (RS_f8[fq][fk] holds RS[fq][2fk], RS[fq][2fk+1],
    utils:485-490). [I] The instruction fixes only the fp16 accumulator: each k32 step's 32
    products (exact: E4M3 x E4M3) are summed exactly and added to the fp16 accumulator with one
    rounding to fp16 (float64 -> float16 with NumPy: one rounding)."""
    acc = np.zeros((p8.shape[0], v8.shape[1]), np.float64)
    for k0 in range(0, p8.shape[1], k_step):
        part = p8[:, k0:k0 + k_step].astype(np.float64) @ v8[k0:k0 + k_step].astype(np.float64)
        acc = (acc + part).astype(np.float16).astype(np.float64)
    return acc.astype(np.float32)


def _sm89_thread_cols(t, n=SM89_CTA_K):
    """Key columns thread t of a quad holds in one 64-key block: utils:337 `kv_idx = K_idx_lane_base
    + fk * 16 + 8 * (k / 4) + k % 2` with sm89:216 `K_idx_lane_base = ... + 2 * (lane_id % 4)`."""
    return [16 * fk + 8 * h + 2 * t + e for fk in range(n // 16) for h in range(2) for e in range(2)]


def sage2pp_sm89_oracle(q, k, v, causal, fma_contract=True, fma_contract_o=True, out_cast=True, pv_step=32,
                        peeled=2):
    """q [H, N, D], k, v [Hkv, N, D] (D 64 or 128, core.py:752-761 pads others), bf16 values."""
    H, N, D = q.shape
    group = H // k.shape[0]
    # core.py:772-773 `km = k.mean(dim=seq_dim, keepdim=True)` in the input dtype. [I] torch's mean
    # reduces in float32 in its own order; taken here in float64 and rounded (float32, then bf16)
    km = _to(k.astype(np.float64).mean(axis=1, keepdims=True).astype(np.float32), torch.bfloat16)
    # qpt.py:158-159 `if km is not None: k = k - km` (a bf16 tensor op: exact difference, rounded)
    ks_in = _to(k - km, torch.bfloat16)
    # core.py:766-767 `sm_scale = head_dim_og**-0.5` (a Python float, the kernel's float argument)
    sm = f32(D ** -0.5)
    sl2 = f32(sm * SM89_LOG2E)  # sm89:90 `sm_scale *= math::log2e;`, :254 `original_sm_scale = sm_scale`
    out = np.zeros((H, N, D), np.float32)
    for h in range(H):
        g = h // group  # sm89:201 `(head_id / num_kv_groups)`
        # core.py:793 per_thread_int8_triton(q, k, km, BLKQ=128, WARPQ=32, BLKK=64, WARPK=64)
        q8, qs = _sm89_int8_groups(q[h], 32, lambda r: r % 8)
        k8, kscale = _sm89_int8_groups(ks_in[g], 64, lambda r: (r % 8) // 2)
        # core.py:809 per_channel_fp8(v, scale_max=2.25, smooth_v=False) -> fused.cu MeanScaleKernel
        # <64, false>: :356-357 max/min over the channel's tokens (padding zeros, fused.cu:914
        # `pad_zero=true`, change neither), :390 `s_amax_val = fmaxf(fabsf(block_max_val),
        # fabsf(block_min_val))`, :393 `scale = s_amax_val / scale_max`, :399 `recp_scale =
        # scale_max / s_amax_val`, :418 `x_val_float[j] *= recp_scale`, :422 floatx4_to_e4m3x4
        # (csrc/numeric_conversion.cuh:53 `cvt.rn.satfinite.e4m3x2.f32`). IEEE divisions here.
        amax = np.maximum(np.abs(v[g].max(axis=0)), np.abs(v[g].min(axis=0))).astype(np.float32)
        vscale = (amax / SM89_V_MAX).astype(np.float32)
        v8 = _e4m3((v[g] * (SM89_V_MAX / amax)[None, :]).astype(np.float32))
        for bx in range(-(-N // SM89_CTA_Q)):
            rows = np.arange(bx * SM89_CTA_Q, min(N, (bx + 1) * SM89_CTA_Q))
            R = len(rows)
            # sm89:222-226 `num_iterations = div_ceil(mask_mode == kCausal ? min(kv_len, (bx + 1) *
            # CTA_Q) : kv_len, CTA_K)`
            nit = -(-(min(N, (bx + 1) * SM89_CTA_Q) if causal else N) // SM89_CTA_K)
            m = np.full(R, SM89_NEG, np.float32)  # sm89:165
            d = np.ones((R, 4), np.float32)  # sm89:166 `d[fq][k] = 1.0f` (one per thread of the quad)
            ro = np.zeros((R, D), np.float32)  # sm89:146 `RO[fq][fv][k] = 0.0f`
            for b in range(nit):
                cols = b * SM89_CTA_K + np.arange(SM89_CTA_K)
                valid = cols < N
                kb = np.zeros((SM89_CTA_K, D), np.float32)  # [I] keys past kv_len: their scores are masked
                kb[valid] = k8[cols[valid]]
                # compute_int_qk: int8 mma with int32 accumulation, exact; sm89:298 / :401 / :508
                # `__int2float_rz(RS)`: |S| <= 128 * 127 * 127 < 2^24, exact
                S = (q8[rows].astype(np.int64) @ kb.T.astype(np.int64)).astype(np.float32)
                # sm89:113 q_scale_idx per thread: `... + lane_id / 4` (the row's group); sm89:129
                # k_scale_idx `... + lane_id % 4` (the thread's key group, qpt.py's (r % 8) // 2)
                ksb = kscale[np.minimum(cols, N - 1)]
                # sm89:255 / :334 / :442 `dequant_scale = q_scale * K_scale[...]`
                dq = (qs[rows][:, None] * ksb[None, :]).astype(np.float32)
                if b < nit - peeled:
                    # main loop (sm89:270 `for (iter = 1; iter < num_iterations - 1; iter++)`, the
                    # block loaded before, iter - 1): :298 `RS_f32 = __int2float_rz(RS)`, scale folded,
                    # :257 / :335 `sm_scale = original_sm_scale * dequant_scale`, :311 update_mdo(.., sm_scale)
                    x = S
                    eff = (sl2 * dq).astype(np.float32)
                else:
                    # "second last iter" (sm89:371-372 `if (num_iterations > 1)`) and "last iter"
                    # (sm89:479-480): :401 / :508 `__int2float_rz(RS) * dequant_scale`, update_mdo with
                    # `original_sm_scale` (:419 / :526)
                    x = (S * dq).astype(np.float32)
                    eff = np.full_like(x, sl2)
                    mask = np.zeros_like(x, dtype=bool)
                    if causal:  # sm89:406-409 / :513-516 apply_causal_mask: utils:310 `kv_idx > q_idx`
                        mask |= cols[None, :] > rows[:, None]
                    if b == nit - 1:  # sm89:517 apply_out_of_bound_mask (last iter only): utils:338 `kv_idx >= kv_len`
                        mask |= ~valid[None, :]
                    x = np.where(mask, SM89_NEG, x).astype(np.float32)  # utils:314 / :342 `-5000000.0f`
                # update_mdo<.., use_half_o_scale=false, exp_offset=true, fuse_scale=false> (utils:354-458),
                # the thread quad t = lane_id % 4 holding _sm89_thread_cols(t):
                m_prev = m
                mt = np.full(R, -np.inf, np.float32)
                for t in range(4):
                    c = _sm89_thread_cols(t)
                    # utils:366 `m_temp = -5000000.0f`, :370-372 max over the thread's columns
                    mx = np.maximum(SM89_NEG, x[:, c].max(axis=1))
                    # utils:379 `m_temp = fmaf(m_temp, sm_scale, -S_FP8_OFFSET)` (sm_scale: the
                    # thread's key group's eff; one value per thread)
                    mt = np.maximum(mt, _fma(mx, eff[:, c[0]], -SM89_OFFSET))  # :392-393 quad max (exact)
                m = np.maximum(m, mt)  # utils:395 `m[fq][k] = max(m[fq][k], m_temp)`
                o_scale = _exp2((m_prev - m).astype(np.float32))  # utils:397 `ptx_exp2(m_prev - m[fq][k])`
                # utils:450 `RS = ptx_exp2(fmaf(RS, sm_scale, negative_m))`, :437 `negative_m = -m`
                P = _exp2(_fma(x, eff, -m[:, None]))
                # utils:400 `d[fq][k] *= o_scale`; accumulate_d<.., kCudaCore> utils:551 `d[fq][0] +=
                # RS[fq][fk][0] + RS[fq][fk][1] + RS[fq][fk][4] + RS[fq][fk][5]` for fk = 0..3
                # (sm89:316): ((P0 + P1) + P4) + P5 per 16-key tile; the first add fused with the rescale
                for t in range(4):
                    for fk in range(SM89_CTA_K // 16):
                        b0 = 16 * fk + 2 * t
                        s4 = ((P[:, b0] + P[:, b0 + 1]) + P[:, b0 + 8]) + P[:, b0 + 9]
                        if fk == 0:
                            d[:, t] = _fma(d[:, t], o_scale, s4) if fma_contract else (d[:, t] * o_scale) + s4
                        else:
                            d[:, t] = d[:, t] + s4
                # utils:414-417 `RO[fq][fv][..] *= o_scale` (DTypeSVAccum float)
                # sm89:320 RS_32_to_8 (utils:478-491 floatx4_to_e4m3x4: RNE, satfinite)
                p8 = _e4m3(P)
                vb = np.zeros((SM89_CTA_K, D), np.float32)  # fused.cu:914 V padded with zeros, E4M3 0
                vb[valid] = v8[cols[valid]]
                tile = _fp16_acc_pv(p8, vb, pv_step)
                # utils:969-971 `unpack_half2_from_uint32_to_float(RO_tmp_float, ..)`, `RO[i][j][k * 2 + 0]
                # += RO_tmp_float[0]` after the rescale above: one fmaf under fma_contract_o
                if fma_contract_o:
                    ro = _fma(ro, o_scale[:, None], tile)
                else:
                    ro = ((ro * o_scale[:, None]).astype(np.float32) + tile).astype(np.float32)
            # sm89:572 normalize_d<.., kCudaCore>: utils:736-737 `d += shfl_xor(d, 1)`, `d += shfl_xor(d, 2)`
            l = ((d[:, 0] + d[:, 1]) + (d[:, 2] + d[:, 3])).astype(np.float32)
            rcp = (f32(1) / l).astype(np.float32)  # utils:751 `ptx_rcp(d)` (rcp.approx; IEEE here)
            res = (ro * rcp[:, None]).astype(np.float32)  # utils:766 `RO[fq][fv][k] *= d_rcp[..]`
            res = (res * vscale[None, :]).astype(np.float32)  # sm89:575-596 fuse_v_scale `RO *= v_scale[..]`
            # sm89:646 `__float22bfloat162_rn` (DTypeOut = the input dtype, inst.cu:122, core.py:795)
            out[h, rows] = _to(res, torch.bfloat16) if out_cast else res
    return out


SM89_CASES = [(64, 200, True), (64, 200, False), (128, 130, True), (128, 257, False), (64, 64, True), (64, 300, True)]


@pytest.mark.parametrize("d,n,causal", SM89_CASES)
def test_sage2pp_sm89_matches_upstream_oracle(d, n, causal):
    q, k, v = _sage_inputs(d, n, causal)
    _assert_same_bits(_engine(q, k, v, "sage2pp-sm89", causal), sage2pp_sm89_oracle(q, k, v, causal))
    _assert_same_bits(_engine(q, k, v, "sage2pp-sm89", causal, knobs={"out_fmt": "fp32"}),
                      sage2pp_sm89_oracle(q, k, v, causal, out_cast=False))


# ---------------------------------------------------------------------------------------------
# bf16: Dao-AILab/flash-attention@07602adc2baa7a3ea037321ef2ca71c83096e5d5, hopper/ BF16 forward
#    (flash_attn_interface.py flash_attn_func -> flash_api.cpp -> flash_fwd_kernel_sm90.h with
#    mainloop_fwd_sm90_tma_gmma_ws.hpp, the IntraWGOverlap path). Short citations: `mainloop:N`
#    for mainloop_fwd_sm90_tma_gmma_ws.hpp, `softmax.h:N`, `utils.h:N`, `mask.h:N`,
#    `tile_size.h:N`, all under hopper/ at 07602adc.
#    [I] The wgmma fp32 accumulator: each instruction's products (bf16 x bf16, exact in float32)
#    summed exactly and added to the accumulator with one rounding (_acc_fp32). The instruction K
#    for 16-bit operands is 16 (SM90_64xNx16_F32BF16BF16); the hardware's internal grouping is not
#    in the source, so the oracle takes it as a parameter (acc_k).
# ---------------------------------------------------------------------------------------------
FA3_LOG2E = np.float64(1.4426950408889634)  # M_LOG2E (double)


def _acc_f32(acc, a, b, k_step):
    """acc + a @ b through the fp32 accumulator, k_step products per rounding (see above)."""
    for k0 in range(0, a.shape[-1], k_step):
        acc = (acc.astype(np.float64) + a[..., k0:k0 + k_step].astype(np.float64)
               @ b[k0:k0 + k_step].astype(np.float64)).astype(np.float32)
    return acc


def _bf16_tile(d, causal):
    """tile_size.h:13-52 `tile_size_fwd_sm90`, element_size 2, headdim_v == headdim, not local,
    no paged KV, no softcap; use_one_mma_wg (heuristics.h:10-13: seqlen_q * (h / h_k) <= 64) is
    false for the sizes tested here. Returns (kBlockM, kBlockN)."""
    if d <= 64:
        return 192, 128 if causal else 192  # :30 `{192, is_causal ? 128 : ... 192, ..}`
    if d <= 96:
        return 192, 144  # :39
    if d <= 128:
        return 128, 128 if causal else 176  # :44 `{128, is_causal || ... ? 128 : 176, true, true}`
    if d <= 192:
        return 128, 112  # :49 (headdim_v > 128 would be 112; headdim_v <= 128: 128)
    return 128, 80  # :51


def _thread_cols(n, t):
    """Columns of an accumulator row that thread t of a quad holds, in register order: 8g + 2t,
    8g + 2t + 1 (the SM90 wgmma C fragment as utils.h convert_layout_acc_rowcol walks it). [I] from
    the CuTe layout, not from a line of the kernel."""
    return [8 * g + 2 * t + e for g in range(-(-n // 8)) for e in range(2) if 8 * g + 2 * t + e < n]


def bf16_fa3_oracle(q, k, v, causal, fma_contract=True, out_cast=True, acc_k=16, tile=None):
    """q [H, N, D], k, v [Hkv, N, D]: bf16 values (no quantisation: Element = bf16). acc_k defaults to
    the instruction's K."""
    H, N, D = q.shape
    group = H // k.shape[0]
    bm, bn = tile or _bf16_tile(D, causal)
    # flash_attn_interface.py:264-265 (FlashAttnFunc) `softmax_scale = (q.shape[-1] + (qv.shape[-1] if qv
    # is not None else 0)) ** (-0.5)` (a Python double) -> flash_api.cpp:694 / :84 `float softmax_scale`;
    # mainloop:578 `float(args.softmax_scale * M_LOG2E)` (float * double, in double)
    sl2 = f32(np.float64(f32(D ** -0.5)) * FA3_LOG2E)
    out = np.zeros((H, N, D), np.float32)
    for h in range(H):
        g = h // group
        for m0 in range(0, N, bm):
            rows = np.arange(m0, min(N, m0 + bm))
            R = len(rows)
            # block.h:35 `n_block_max = cute::ceil_div(seqlen_k, kBlockN)`, causal :41-42 min with
            # `ceil_div(m_idx_max + seqlen_k - seqlen_q + window_size_right, kBlockN)` (right window 0).
            # Blocks wholly masked for a row change nothing of it (max kept, scale exp2f(0) = 1, P = 0)
            nb = -(-N // bn)
            if causal:
                nb = min(nb, -(-(m0 + bm) // bn))
            row_max = np.full(R, -np.inf, np.float32)
            lt = np.zeros((R, 4), np.float32)  # row_sum, one per thread of the quad
            o = np.zeros((R, D), np.float32)  # mainloop:1231 `clear(tOrO)`
            prev = None
            for n in range(nb - 1, -1, -1):  # mainloop:1090 `n_block = n_block_max - 1`, then `--n_block`
                cols = n * bn + np.arange(bn)
                valid = cols < N
                kb = np.zeros((bn, D), np.float32)
                kb[valid] = k[g][cols[valid]]
                # mainloop:1206 / :1242 `flash::gemm</*zero_init=*/true>(tiled_mma_qk, ..., tSrS)`
                s = _acc_f32(np.zeros((R, bn), np.float32), q[h, rows], kb.T, acc_k)
                # mask.h:63-71 Seqlenk_mask (first block only, mainloop:1215): col >= seqlen_k -> -inf;
                # mask.h:85-97 causal: col >= row + 1 + seqlen_k - seqlen_q -> -inf
                mask = ~valid[None, :]
                if causal:
                    mask = mask | (cols[None, :] > rows[:, None])
                s = np.where(mask, f32(-np.inf), s).astype(np.float32)
                first = prev is None
                if first:
                    # softmax.h:107-109 max_get_scale<Is_first=true>: reduce_max, scores_scale = 1
                    row_max = s.max(axis=1)
                    scale = None
                else:
                    # mainloop:1247 the PV gemm of the previous block into tOrO (wgmma, accumulating in
                    # place; waited on at :1263 before the rescale at :1270)
                    o = _acc_f32(o, prev[0], prev[1], acc_k)
                    # softmax.h:111-121 max_get_scale<Is_first=false, Check_inf>: `scores_max_cur =
                    # !Check_inf ? row_max : (row_max == -INFINITY ? 0.0f : row_max)`; `scores_scale =
                    # exp2f((scores_max_prev - scores_max_cur) * softmax_scale_log2)`
                    m_prev = row_max
                    row_max = np.maximum(row_max, s.max(axis=1))
                    cur = np.where(row_max == -np.inf, f32(0), row_max).astype(np.float32)
                    scale = _exp2(((m_prev - cur).astype(np.float32) * sl2).astype(np.float32))
                # softmax.h:77-85 scale_apply_exp2<Scale_max=true, Check_inf, Max_offset=0>
                # (flash_fwd_kernel_sm90.h:426 `Max_offset = !Is_FP8 ? 0 : 8`): `max_scaled = max == -INFINITY
                # ? 0.f : max * scale - max_offset` (max_offset 0: the product, rounded); `exp2f(tensor * scale
                # - max_scaled)`: one FMA (the comment at :82-84: "use the ffma instruction")
                ms = np.where(row_max == -np.inf, f32(0), (row_max * sl2).astype(np.float32)).astype(np.float32)
                p = _exp2(_fma(s, sl2, -ms[:, None]))
                # softmax.h:120 `row_sum(mi) *= scores_scale(mi)`, then :134 reduce_sum<zero_init=Is_first,
                # warp_reduce=false> -> thread_reduce_, softmax.h:30 `summary(mi) = zero_init && ni == 0
                # ? tensor(mi, ni) : op(summary(mi), tensor(mi, ni))` over the thread's columns in order.
                # [I] nvcc contracts the rescale with the first add (fma_contract; gpu/fma_contract.cu
                # `rowsum_rescale_first_add`)
                for t in range(4):
                    c = _thread_cols(bn, t)
                    if first:
                        x = p[:, c[0]].copy()
                        rest = c[1:]
                    elif fma_contract:
                        x = _fma(lt[:, t], scale, p[:, c[0]])
                        rest = c[1:]
                    else:
                        x = (lt[:, t] * scale).astype(np.float32)
                        rest = c
                    for j in rest:
                        x = (x + p[:, j]).astype(np.float32)
                    lt[:, t] = x
                # mainloop:1224 / :1267 convert_type_out: P to bf16, round to nearest even
                p16 = _to(p, torch.bfloat16)
                vb = np.zeros((bn, D), np.float32)
                vb[valid] = v[g][cols[valid]]
                if not first:
                    # mainloop:1270 `softmax.rescale_o(tOrO, scores_scale)` (softmax.h:185 `acc_o_rowcol(mi, ni)
                    # *= scores_scale(mi)`): no add to contract with, the next PV wgmma accumulates in place
                    o = (o * scale[:, None]).astype(np.float32)
                prev = (p16, vb)
            o = _acc_f32(o, prev[0], prev[1], acc_k)  # mainloop:1309 the last block's PV gemm
            # softmax.h:137-145 finalize: quad_allreduce_ (utils.h:78-96 Allreduce<4>: xor 2, then xor 1),
            # `inv_sum = (sum == 0.f || sum != sum) ? 0.f : 1.f / sum` (IEEE here; the GPU's division
            # under --use_fast_math), `scores_scale = inv_sum * final_scale` (v_descale 1.0f, mainloop:1310)
            l = ((lt[:, 0] + lt[:, 2]) + (lt[:, 1] + lt[:, 3])).astype(np.float32)
            inv = np.where((l == 0) | np.isnan(l), f32(0), f32(1) / l).astype(np.float32)
            inv = (inv * f32(1.0)).astype(np.float32)
            res = (o * inv[:, None]).astype(np.float32)  # mainloop:1320 rescale_o
            # epilogue_fwd.hpp:248-249 convert_type_out to Element (bf16), RNE
            out[h, rows] = _to(res, torch.bfloat16) if out_cast else res
    return out


def _bf16_inputs(d, n, n_head=2):
    rng = np.random.default_rng(9000 + d + n)
    return _bf16_values(rng, (n_head, n, d)), _bf16_values(rng, (1, n, d)), _bf16_values(rng, (1, n, d))


BF16_CASES = [(64, 200, True), (64, 400, False), (128, 300, True), (128, 200, False), (96, 330, True)]
# The preset's accumulator chunk (qk_acc.k_step = pv_acc.k_step) is the BF16 wgmma's instruction K,
# 16 (SM90_64xNx16_F32BF16BF16): no more products than one instruction's reach the fp32 accumulator
# unrounded; the grouping inside an instruction is not documented. The engine's knob set to 32 must
# agree with the oracle at 32 and differ from the preset.
BF16_PRESET_ACC_K = 16
BF16_OTHER_K = 32


@pytest.mark.parametrize("d,n,causal", BF16_CASES)
def test_bf16_matches_upstream_oracle(d, n, causal):
    q, k, v = _bf16_inputs(d, n)
    _assert_same_bits(_engine(q, k, v, "bf16", causal), bf16_fa3_oracle(q, k, v, causal, acc_k=BF16_PRESET_ACC_K))
    _assert_same_bits(_engine(q, k, v, "bf16", causal, knobs={"out_fmt": "fp32"}),
                      bf16_fa3_oracle(q, k, v, causal, out_cast=False, acc_k=BF16_PRESET_ACC_K))


@pytest.mark.parametrize("d,n,causal", BF16_CASES[:3])
def test_bf16_at_another_chunk_matches_upstream_oracle(d, n, causal):
    """With the accumulator chunk at 32 on both sides the bits agree too, and they differ from the
    preset's K = 16 (the chunk is visible in the float32 output)."""
    q, k, v = _bf16_inputs(d, n)
    knobs = {"out_fmt": "fp32", "qk_acc.k_step": BF16_OTHER_K, "pv_acc.k_step": BF16_OTHER_K}
    got = _engine(q, k, v, "bf16", causal, knobs=knobs)
    _assert_same_bits(got, bf16_fa3_oracle(q, k, v, causal, out_cast=False, acc_k=BF16_OTHER_K))
    assert not np.array_equal(_bits(got), _bits(_engine(q, k, v, "bf16", causal, knobs={"out_fmt": "fp32"})))


def test_bf16_fma_contract_knob_is_the_unfused_update():
    q, k, v = _bf16_inputs(64, 400)
    fused = _engine(q, k, v, "bf16", True, knobs={"out_fmt": "fp32"})
    unfused = _engine(q, k, v, "bf16", True, knobs={"out_fmt": "fp32", "fma_contract": False})
    _assert_same_bits(unfused, bf16_fa3_oracle(q, k, v, True, fma_contract=False, out_cast=False,
                                               acc_k=BF16_PRESET_ACC_K))
    assert not np.array_equal(_bits(fused), _bits(unfused))


def test_bf16_oracle_detects_a_perturbation():
    """The comparison can fail: the unfused row-sum update, another accumulator chunk, or another
    key tile each change the float32 output."""
    q, k, v = _bf16_inputs(64, 400)
    got = _engine(q, k, v, "bf16", True, knobs={"out_fmt": "fp32"})
    for kwargs in ({"fma_contract": False}, {"acc_k": 64}, {"tile": (192, 192)}):
        kw = {"acc_k": BF16_PRESET_ACC_K, **kwargs}
        assert not np.array_equal(_bits(got), _bits(bf16_fa3_oracle(q, k, v, True, out_cast=False, **kw))), kwargs


@pytest.mark.parametrize("knob,kwargs", [("fma_contract", {"fma_contract": False}),
                                         ("fma_contract_o", {"fma_contract_o": False})])
def test_sage2pp_sm89_fma_contract_knobs_are_the_unfused_updates(knob, kwargs):
    q, k, v = _sage_inputs(64, 300, True)
    fused = _engine(q, k, v, "sage2pp-sm89", True, knobs={"out_fmt": "fp32"})
    unfused = _engine(q, k, v, "sage2pp-sm89", True, knobs={"out_fmt": "fp32", knob: False})
    _assert_same_bits(unfused, sage2pp_sm89_oracle(q, k, v, True, out_cast=False, **kwargs))
    assert not np.array_equal(_bits(fused), _bits(unfused))


def test_sage2pp_sm89_oracle_detects_a_perturbation():
    """Only the last block dequantising first (sm90's loop), the fp16 PV accumulator rounded per 16
    or per 64 keys, or an unfused O update each change the float32 output."""
    q, k, v = _sage_inputs(64, 300, True)
    got = _engine(q, k, v, "sage2pp-sm89", True, knobs={"out_fmt": "fp32"})
    for kwargs in ({"peeled": 1}, {"pv_step": 16}, {"pv_step": 64}, {"fma_contract_o": False}):
        want = sage2pp_sm89_oracle(q, k, v, True, out_cast=False, **kwargs)
        assert not np.array_equal(_bits(got), _bits(want)), kwargs


# ---------------------------------------------------------------------------------------------
# Every ISA path of this CPU (ATTNUM_ISA is read once per process: one subprocess per path).
# ---------------------------------------------------------------------------------------------
def _isa_paths():
    try:
        r = subprocess.run([BINARY, "version", "--json"], capture_output=True, text=True, check=True)
        return json.loads(r.stdout)["isa_supported"]
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError):
        return ["scalar"]


_ISA_SCRIPT = """
import json, sys
import numpy as np
import attnum
z = np.load(sys.argv[1])
out = {}
for i, (kernel, causal, fp32) in enumerate(json.loads(sys.argv[2])):
    r = attnum.attend(z[f"q{i}"], z[f"k{i}"], z[f"v{i}"], kernel=kernel, causal=causal, stages=False,
                      measure=False, knobs={"out_fmt": "fp32"} if fp32 else None)
    out[f"o{i}"] = np.asarray(r.o, dtype=np.float32)
np.savez(sys.argv[3], **out)
"""


def _engine_isa(tmp_path, isa, runs):
    """runs: [(q, k, v, kernel, causal, fp32)]; the engine's outputs under ATTNUM_ISA=isa, in one process."""
    import attnum
    src, dst = tmp_path / "in.npz", tmp_path / f"out-{isa}.npz"
    np.savez(src, **{f"{x}{i}": r[j] for i, r in enumerate(runs) for j, x in enumerate("qkv")})
    env = dict(os.environ, ATTNUM_ISA=isa,
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(attnum.__file__)),
                                           os.environ.get("PYTHONPATH", "")]))
    spec = json.dumps([[r[3], bool(r[4]), bool(r[5])] for r in runs])
    r = subprocess.run([sys.executable, "-c", _ISA_SCRIPT, str(src), spec, str(dst)], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, f"ATTNUM_ISA={isa}: exit {r.returncode}\n{r.stderr}"
    z = np.load(dst)
    return [z[f"o{i}"] for i in range(len(runs))]


def _isa_runs():
    """The runs compared on every path, with the oracle's result for each (computed once)."""
    if not hasattr(_isa_runs, "cache"):
        runs = []
        for d, n, causal in [(64, 200, True), (128, 257, False)]:
            q, k, v = _sage_inputs(d, n, causal)
            for fp32 in (False, True):
                runs.append(((q, k, v, "sage2pp-sm89", causal, fp32),
                             sage2pp_sm89_oracle(q, k, v, causal, out_cast=not fp32)))
        for d, n, causal in [(64, 200, True), (128, 200, False)]:
            q, k, v = _bf16_inputs(d, n)
            for fp32 in (False, True):
                runs.append(((q, k, v, "bf16", causal, fp32),
                             bf16_fa3_oracle(q, k, v, causal, out_cast=not fp32, acc_k=BF16_PRESET_ACC_K)))
        _isa_runs.cache = runs
    return _isa_runs.cache


@pytest.mark.parametrize("isa", _isa_paths())
def test_oracles_match_on_every_isa_path(tmp_path, isa):
    runs = _isa_runs()
    for (run, want), got in zip(runs, _engine_isa(tmp_path, isa, [r for r, _ in runs])):
        _assert_same_bits(got, want)


def test_isa_subprocess_reads_attnum_isa(tmp_path):
    """The subprocess above runs the path it names: an unknown name is refused (exit 2)."""
    with pytest.raises(AssertionError, match="exit 2"):
        _engine_isa(tmp_path, "no-such-isa", [(*_bf16_inputs(64, 64), "bf16", False, False)])
