// Presets of the published kernels. Section.step numbers (1.2, 2a.9, ...) are docs/kernels.md's,
// which gives for each the upstream repo@commit path:line; [I] marks an inference where the
// source is silent. Each preset records the upstream commit it follows in source_commit.
#include "attnum/attention/kernel_spec.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "attnum/core/error.h"
#include "attnum/core/suggest.h"
#include "attnum/core/file.h"

namespace attnum::attention {
namespace {

constexpr const char* kSageCommit = "thu-ml/SageAttention@d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5";
constexpr const char* kHpcCommit = "Tencent/hpc-ops@6e2ecede9d6d47b2e680e839cc7ad7422bc8d88b";

using formats::format;
using formats::rounding;

operand_spec fp8_operand(granularity g) {
  operand_spec o;
  o.fmt = format::e4m3fn;
  o.gran = g;
  return o;
}

// SageAttention per-thread INT8: scale = amax/127 + 1e-7, x/scale + 0.5*sign then truncate
// (kernels.md 2a.3-4, quant_per_thread.py:32-44).
operand_spec sage_int8(int segment, int div) {
  operand_spec o;
  o.fmt = format::int8;
  o.gran = granularity::row_group;
  o.block_rows = segment;
  o.group_div = div;
  o.scale_max = 127;
  o.eps = 1e-7;
  o.rnd = rounding::half_away;
  return o;
}

// Sage per-channel FP8 V: v8 = E4M3(v * (scale_max/amax)), no eps (kernels.md 2a.5).
operand_spec sage_v(double scale_max) {
  operand_spec o = fp8_operand(granularity::channel);
  o.scale_max = scale_max;
  o.multiply_reciprocal = true;
  return o;
}

kernel_spec make_fa3(bool acc13) {
  kernel_spec s;
  s.name = acc13 ? "fa3-acc13" : "fa3";
  s.description = acc13 ? "FlashAttention-3 FP8 E4M3 with a 13-bit RZ tensor-core accumulator (kernels.md 0)"
                        : "FlashAttention-3 FP8 E4M3 forward (hopper/), fp32 accumulators";
  s.source_commit = "Dao-AILab/flash-attention@0251105a";
  s.q = fp8_operand(granularity::kv_group);  // 1.1: q_descale is (b, h_k)
  s.k = fp8_operand(granularity::head);
  s.v = fp8_operand(granularity::head);
  s.sl2_in_double = true;                    // 1.2: float(double(scale)*M_LOG2E)
  s.scaling = score_scaling::fold;           // 1.2: descales folded into sl2
  s.max = max_space::raw;                    // 1.7
  s.mask_value = -INFINITY;                  // 1.6
  s.p_mode = p_scale_mode::exponent_offset;  // 1.8: Max_offset 8
  s.p_offset = 8.0f;
  s.p_scale = 256.0f;
  s.rowsum = rowsum_order::wgmma;  // 1.10
  s.fma_contract = true;           // 1.10: softmax.h:120 `row_sum *= scale` + the first add (utils.h:30)
  s.tiles = {{64, 192, 160}, {96, 192, 128}, {128, 128, 224}, {192, 128, 160}, {256, 128, 128}};  // 1.3
  s.reverse = true;                                                                               // 1.4
  s.rescale_before_pv = false;                                                                    // 1.12
  s.pv = pv_mode::into_o;                                                                         // 1.12
  if (acc13) {
    s.qk_acc = {acc_kind::truncated, 13, 32};
    s.pv_acc = {acc_kind::truncated, 13, 32};
  }
  s.epilogue = epilogue_mode::combined;  // 1.14
  s.out_fmt = format::bf16;              // 1.14
  return s;
}

kernel_spec make_sage2pp_sm89() {
  kernel_spec s;
  s.name = "sage2pp-sm89";
  s.description = "SageAttention2++ on sm89 (L4 default): INT8 QK per-thread, FP8 PV, fp16 PV accumulator";
  s.source_commit = kSageCommit;
  s.causal_diag = causal_align::top_left;  // 2a.6: kv_idx > q_idx masked, N = ceil(min(kv, (bx+1)*CTA_Q)/CTA_K)
  s.q = sage_int8(32, 1);                  // 2a.3: 8 groups per 32-row segment
  s.k = sage_int8(64, 2);                  // 2a.4: 4 groups per 64-row block
  s.v = sage_v(2.25);                      // 2a.5: scale_max 2.25 for fp32+fp16
  s.smooth_k = true;                       // 2a.2: core.py smooth_k=True; km = k.mean(seq) in the input dtype
  s.smooth_k_round = format::bf16;         // quant_per_thread.py per_thread_int8: `k = k - km` in PyTorch, in
                                           // the input dtype (bf16 or fp16; bf16 here, as the captures)
  s.sl2_in_double = false;                 // 2a.8: sl2 = sm_scale*log2e in float
  s.scaling = score_scaling::fold;
  s.max = max_space::scaled;  // 2a.9
  s.mask_value = -5e6f;       // 2a.6
  s.mask_on_x = true;
  // qk_int_sv_f8_cuda_sm89.cuh (qk_int_sv_f8_attn_kernel): the main loop runs iter 1..N-2 with the
  // folded scale; the "second last iter" (when N > 1) and the last iter dequantise first
  // (x = S*dq, update_mdo with the unfolded sm_scale), whatever the causal flag.
  s.masked_tail_blocks = 2;
  s.p_mode = p_scale_mode::exponent_offset;
  s.p_offset = 8.807f;  // 2a.9: S_FP8_OFFSET
  s.p_scale = 447.9f;
  s.rowsum = rowsum_order::sage_mma;  // 2a.10
  s.fma_contract = true;              // 2a.10: attn_utils.cuh:400 `d *= o_scale` + the first tile's add (:551)
  s.fma_contract_o = true;            // 2a.12: attn_utils.cuh:414 `RO *= o_scale` + `RO += RO_tmp_float` (:970)
  s.block_n = 64;                     // 2a.6: CTA_K
  s.block_m = 128;                    // CTA_Q
  s.reverse = false;
  s.rescale_before_pv = true;
  s.qk_acc = {acc_kind::int32, 0, 32};  // 2a.7
  s.pv_acc = {acc_kind::fp16, 10, 32};  // 2a.12: mma.f16 per 64 keys
  s.pv = pv_mode::fresh_per_block;
  s.epilogue = epilogue_mode::separate;  // 2a.13
  s.out_fmt = format::bf16;
  return s;
}

kernel_spec make_sage2_sm90(bool acc13) {
  kernel_spec s = make_sage2pp_sm89();
  s.name = acc13 ? "sage2-sm90-acc13" : "sage2-sm90";
  s.description = acc13 ? "SageAttention2 sm90 with a 13-bit RZ PV accumulator (kernels.md 0)"
                        : "SageAttention2 on sm90 (H100): INT8 QK, FP8 PV into a fresh fp32 tile per 128 keys";
  s.q = sage_int8(16, 1);   // 2b: BLKQ 64, WARPQ 16, groups {r, r+8}
  s.k = sage_int8(128, 2);  // 2b: BLKK 128, 4 groups of 32 rows
  s.v = sage_v(448);        // 2b: scale_max 448
  s.block_n = 128;          // 2b: CTA 64x128
  s.block_m = 64;
  // qk_int_sv_f8_cuda_sm90.cuh (qk_int8_sv_f8_attn_kernel): iter 1..N-1 fold the scale, only the
  // last iteration dequantises first (RS_f32 = S*dequant_scale, sm_scale = original_sm_scale).
  s.masked_tail_blocks = 1;
  s.pv_acc = acc13 ? accumulator_spec{acc_kind::truncated, 13, 32} : accumulator_spec{acc_kind::fp32, 23, 32};
  return s;
}

kernel_spec make_sage1() {
  kernel_spec s;
  s.name = "sage1";
  s.description = "SageAttention v1-style Triton: INT8 per-block QK, fp16 P and V, fp16 PV per 64 keys";
  s.source_commit = kSageCommit;
  s.causal_diag = causal_align::top_left;  // _causal.py:45 offs_m >= start_n + offs_n; blocks < (start_m+1)*BLOCK_M
  s.q.fmt = format::int8;                  // 2b: per-block, Q 128 rows with sm_scale*log2e folded in
  s.q.gran = granularity::block;
  s.q.block_rows = 128;
  s.q.scale_max = 127;
  s.q.rnd = rounding::half_away;  // quant_per_block.py: x/scale + 0.5*sign, .to(int8)
  s.k = s.q;
  s.k.block_rows = 64;
  s.v.fmt = format::fp16;
  s.smooth_k = true;  // core.py sageattn_qk_int8_pv_fp16_triton: smooth_k=True
  s.smooth_k_round = format::bf16;
  s.sl2_in_double = false;
  s.scaling = score_scaling::dequant_unit;
  s.max = max_space::scaled;
  s.p_fmt = format::fp16;
  s.p_mode = p_scale_mode::none;
  s.p_scale = 1;
  s.p_offset = 0;
  s.rowsum = rowsum_order::triton_block;  // per_block.py:58,61 l_i = l_i * alpha + tl.sum(p, 1)
  s.triton_fp_fusion = true;              // Triton's default enable_fp_fusion: that line and :63,68 are FMAs
  s.block_n = 64;
  s.block_m = 128;
  s.qk_acc = {acc_kind::int32, 0, 32};
  s.pv_acc = {acc_kind::fp16, 10, 16};  // tl.dot out fp16 [I: k step 16]
  s.pv = pv_mode::fresh_per_block;
  s.epilogue = epilogue_mode::divide;
  s.out_fmt = format::bf16;
  return s;
}

kernel_spec make_flashinfer() {
  kernel_spec s;
  s.name = "flashinfer-sm90";
  s.description = "FlashInfer Hopper FP8 prefill: P*448 multiply, reverse order, rescale O before PV";
  s.source_commit = "flashinfer-ai/flashinfer@fb28d72";
  s.q = fp8_operand(granularity::head);  // 3.1: per qo head
  s.k = fp8_operand(granularity::head);  // per kv head
  s.v = fp8_operand(granularity::head);
  s.sl2_in_double = false;
  s.scaling = score_scaling::fold;  // 3.1: sl2 = q_scale*k_scale*sm_scale*log2e
  s.fold_dq_first = true;           // hopper/variants.cuh StandardFP8Attention: in that order, float
  s.max = max_space::raw;           // 3.5
  s.p_mode = p_scale_mode::multiply;
  s.p_scale = 448;  // 3.1: numeric_limits<e4m3>::max()
  s.p_offset = 0;
  s.rowsum = rowsum_order::wgmma;  // [I] layout as FA3
  s.fma_contract = true;           // attention_updater.cuh:210 `row_sum *= scale` + the first add (:64)
  s.tiles = {{64, 192, 128}, {128, 128, 192}, {256, 128, 128}};  // 3.2
  s.reverse = true;
  s.rescale_before_pv = true;  // 3.6
  s.pv = pv_mode::into_o;
  s.epilogue = epilogue_mode::div_first;  // 3.7
  s.out_fmt = format::bf16;               // [I] DTypeO
  return s;
}

kernel_spec make_xqa() {
  kernel_spec s;
  s.name = "xqa-sm90";
  s.description = "TensorRT-LLM XQA sm90: Q cast to E4M3 unscaled, one K/V scale, P*448, forward 64-token tiles";
  s.source_commit = "NVIDIA/TensorRT-LLM@014dadcdfc440c7a7a9a21bbc519d8c56a00be43";
  // 4.1: F16QToF8Converter::store `CacheElem{fp16Data[i]}`: the bf16 Q cast straight to E4M3
  // (satfinite), scale 1; qScale * kvCacheScale[0] * rsqrtf(d) is folded into qkScale
  s.q = fp8_operand(granularity::none);
  s.k = fp8_operand(granularity::tensor);
  s.v = fp8_operand(granularity::tensor);
  s.kv_shared_scale = true;  // 4.1: kvCacheScale one scalar
  s.sl2_in_double = false;
  s.scaling = score_scaling::dequant_sm;  // 4.1: acc *= qkScale
  s.max = max_space::raw;                 // 4.3: exp2f(elem*log2e - max*log2e)
  s.alpha_expf = true;                    // 4.3: scaleVec = expf(accColMax - xColMax)
  s.p_mode = p_scale_mode::multiply;
  s.p_scale = 448;  // 4.3: kE4M3_MAX
  s.p_offset = 0;
  s.rowsum = rowsum_order::xqa_warps;  // 4.3: computeWarpColSum, 4 warp partials onto l*alpha
  s.block_n = 64;                      // 4.2
  s.block_m = 64;                      // [I]
  s.reverse = false;
  s.pv = pv_mode::into_o;                // 4.4
  s.epilogue = epilogue_mode::combined;  // 4.4: regOutScale = __frcp_rn(regColSum) * xvoScale
  s.out_fmt = format::bf16;
  return s;
}

// hpc-ops SM90 FP8 prefill (prefill/kernels.cuh). variant: 0 the API default quant_type
// QPERTOKEN_PERHEAD_KPERTENSOR_VPERTENSOR (hpc/attention.py:159, kernel :969); 1 the
// QPERTOKEN_PERHEAD_KPERTOKEN_PERHEAD_VPERHEAD variant (kernel :1461); 2 the kernel before
// 4b402c8 (the only FP8 prefill then: per-token Q, per-tensor K and V, P cast unscaled, PV
// straight into O; kernels.cuh@e363e86:1273,1306,1358,1402).
kernel_spec make_hpcops(int variant) {
  kernel_spec s;
  const bool s1 = variant == 2;
  s.name = variant == 0 ? "hpcops" : variant == 1 ? "hpcops-kpertoken" : "hpcops-s1";
  s.description =
      variant == 0
          ? "hpc-ops SM90 FP8 prefill (API default): per-token Q, per-tensor K and V, P*256, fresh fp32 PV tile"
      : variant == 1
          ? "hpc-ops SM90 FP8 prefill, variant: per-token Q and K, per-head V, P*256, fresh fp32 PV tile"
          : "hpc-ops SM90 FP8 prefill before 4b402c8: per-token Q, per-tensor K and V, P unscaled, PV into O";
  s.source_commit = s1 ? "Tencent/hpc-ops@e363e86ee92667cb6c9599d5320e8e964cf87946" : kHpcCommit;
  s.q = fp8_operand(granularity::token);                                       // 5.2: Q per token per head
  s.k = fp8_operand(variant == 1 ? granularity::token : granularity::tensor);  // :1850 tQS*tKS / :1279 qscale*kscale
  s.v = fp8_operand(variant == 1 ? granularity::head : granularity::tensor);   // :1779 vscale_ptr[ihead_kv] / :1247
  s.sl2_in_double = false;             // 5.2: one_over_dk_log2e = 1.f / sqrtf(d) * kLog2e
  s.scaling = score_scaling::dequant;  // :1325 tAttr_mn *= tQS[im] (= qscale * kscale)
  s.max = max_space::scaled;           // 5.3
  s.p_mode = s1 ? p_scale_mode::none : p_scale_mode::multiply;
  s.p_scale = s1 ? 1.0f : 256.0f;  // 5.1 kFp8PrefillPScale
  s.p_offset = 0;
  s.rowsum = rowsum_order::hpcops_block;  // :68,82,86 fresh row_sum, gSum = gSum*scale + row_sum
  // :86 is one expression `gSum(im) * scale + row_sum`; CMakeLists.txt:97-106 compiles without
  // --fmad=false, and nvcc 13 (-arch=sm_90a -O3) emits `fma.rn.f32` for that pattern (PTX of a
  // kernel with the same loop; fmad=false gives mul + add). The pre-4b402c8 kernel (hpcops-s1)
  // is taken to compile the same online_softmax the same way [inferred].
  s.fma_contract = true;
  // :90 `tYr = tYr * scale` and :1403 `tYr(i) += tOr(i)` (the fresh PV tile): the same build
  // contracts them to one fma.rn.f32 per element (PTX of gpu/fma_contract.cu hpcops_o_rescale, the
  // statements between included). hpcops-s1 accumulates PV into O: no add to contract.
  s.fma_contract_o = !s1;
  s.block_n = 128;  // warp_spec_with_kvcache_fp8_dim128.cu:118-119 kTileM, kTileN
  s.block_m = 128;
  s.reverse = false;                                       // 5.5 prefill forward
  s.pv = s1 ? pv_mode::into_o : pv_mode::fresh_per_block;  // 5.4: :1378 tOr fresh, :1403 tYr += tOr
  s.epilogue = epilogue_mode::separate;                    // 5.6: y * rcp(gSum), then * vscale_eff
  s.out_fmt = format::bf16;
  return s;
}

kernel_spec make_bf16() {
  kernel_spec s;
  s.name = "bf16";
  s.description = "FlashAttention-3 BF16 forward (hopper/): bf16 Q/K/V, P rounded to bf16 before PV";
  s.source_commit = "Dao-AILab/flash-attention@07602adc2baa7a3ea037321ef2ca71c83096e5d5";
  s.q.fmt = s.k.fmt = s.v.fmt = format::bf16;
  s.p_fmt = format::bf16;
  s.p_mode = p_scale_mode::none;
  s.p_scale = 1;
  s.p_offset = 0;
  s.rowsum = rowsum_order::wgmma;
  s.fma_contract = true;  // softmax.h:120 `row_sum *= scale` + the first add (utils.h:30), as fa3
  // The BF16 wgmma is m64nNk16 (cute SM90_64xNx16_F32BF16BF16_SS): at most 16 products reach the
  // fp32 accumulator per instruction, so a chunk is 16, not the FP8 instruction's 32 [I: the
  // grouping inside one instruction].
  s.qk_acc = s.pv_acc = {acc_kind::fp32, 23, 16};
  // hopper/tile_size.h tile_size_fwd_sm90, element_size 2, headdim_v = headdim, no local/paged/
  // softcap, two MMA warpgroups: d<=64 {192, causal ? 128 : 192}; d<=96 {192, 144}; d<=128
  // {128, causal ? 128 : 176}; d<=192 {128, 112} (headdim_v > 128); else {128, 80}
  s.tiles = {{64, 192, 128, 192}, {96, 192, 144, 0}, {128, 128, 128, 176}, {192, 128, 112, 0}, {256, 128, 80, 0}};
  s.reverse = true;
  s.out_fmt = format::bf16;
  return s;
}

kernel_spec make_fp32() {
  kernel_spec s;
  s.name = "fp32";
  s.description = "fp32 flash attention (online softmax in fp32, no casts)";
  s.p_fmt = format::fp32;
  s.p_mode = p_scale_mode::none;
  s.p_scale = 1;
  s.p_offset = 0;
  s.enabled.p_cast = false;
  s.transform_dtype = format::fp32;  // an fp32 attention takes fp32 inputs (kernels.md "Transform dtype")
  return s;
}

kernel_spec make_generic() {
  kernel_spec s = make_fp32();
  s.name = "generic";
  s.description = "every knob from flags (defaults: fp32)";
  return s;
}

const std::vector<kernel_spec>& all_presets() {
  static const std::vector<kernel_spec> v = {
      make_fa3(false), make_fa3(true),    make_sage2pp_sm89(), make_sage2_sm90(false), make_sage2_sm90(true),
      make_sage1(),    make_flashinfer(), make_xqa(),          make_hpcops(0),         make_hpcops(1),
      make_hpcops(2),  make_bf16(),       make_fp32(),         make_generic()};
  return v;
}

}  // namespace

kernel_spec kernel_spec::with_points(const quant_points& keep) const {
  kernel_spec s = *this;
  s.enabled = keep;
  return s;
}

std::pair<int, int> kernel_spec::tile_for(int d_head, bool causal) const {
  if (tiles.empty()) return {block_m, block_n};
  for (const auto& t : tiles)
    if (d_head <= t.d_max) return {t.block_m, !causal && t.block_n_noncausal > 0 ? t.block_n_noncausal : t.block_n};
  fail("kernel {}: head dim {} is larger than the largest tile's ({})", name, d_head, tiles.back().d_max);
}

const kernel_spec& preset(std::string_view name) {
  for (const auto& s : all_presets())
    if (s.name == name) return s;
  std::vector<std::string> names{"fp64"};
  for (const auto& s : all_presets()) names.push_back(s.name);
  const std::string hint = did_you_mean(name, names);
  if (!hint.empty())
    fail("unknown kernel preset '{}': {} (attnum kernels lists all {})", clip(name), hint, all_presets().size());
  std::string known;
  for (const auto& s : all_presets()) known += (known.empty() ? "" : ", ") + s.name;
  fail("unknown kernel preset '{}' (known: {})", clip(name), known);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto& s : all_presets()) out.push_back(s.name);
  return out;
}

kernel_spec exact_spec() {
  kernel_spec s = make_fp32();
  s.name = "fp64";
  s.description = "exact: fp64 arithmetic, no quantization";
  s.arith_fp64 = true;
  s.enabled = {false, false, false, false, false, false, false};
  s.qk_acc = s.pv_acc = {acc_kind::exact, 52, 32};
  return s;
}

}  // namespace attnum::attention
