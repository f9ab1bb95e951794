#pragma once
// kernel_spec: every numeric knob of a low-precision attention forward kernel (design.md, "The
// kernel_spec knobs"). Each published kernel is a preset value of this struct; the one engine in
// engine.cpp runs any of them. The values of each preset, with the upstream line each follows, are
// in docs/kernels.md.
//
// Notation used by the knobs (per query row i, key column j):
//   S_ij  = the QK^T accumulator (raw: cast operands, no dequantisation scale)
//   dq_ij = q_scale_i * k_scale_j  (dequantisation of the product)
//   sl2   = softmax_scale * log2(e)
//   x_ij, eff_ij : the exponent argument is fmaf(x_ij, eff_ij, -m)  (see score_scaling)
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnum/formats/format.h"
#include "attnum/formats/sfu_unit.h"

namespace attnum::attention {

/// Over which elements one scale is shared (amax taken over those elements).
enum class granularity : uint8_t {
  none,       ///< no scale (scale 1): bf16/fp16/fp32 operands
  tensor,     ///< one scale for all heads of the operand in the layer
  head,       ///< one per head of the operand (Q: per query head; K/V: per kv head)
  kv_group,   ///< Q only: one per kv head, shared by its query heads (FA3's q_descale (b, h_k))
  block,      ///< per head, per block of `block_rows` consecutive tokens
  row_group,  ///< per head, Sage per-thread groups: within each segment of `block_rows` tokens,
              ///< group (t % 8) / group_div (Q: div 1 -> 8 groups; K: div 2 -> 4 groups)
  token,      ///< per head, per token (row)
  channel,    ///< per head, per channel over all tokens (V only)
};

/// Whether scales see the whole sequence (as the published APIs) or only tokens up to the
/// current block (generation-like; the block is the KV block size `block_n`).
enum class scale_scope : uint8_t { sequence, causal };

/// How one operand (Q, K or V) is cast before the kernel.
struct operand_spec {
  formats::format fmt = formats::format::fp32;
  granularity gran = granularity::none;
  int block_rows = 0;    ///< rows per block (block) or per segment (row_group)
  int group_div = 1;     ///< row_group: group = (t % 8) / group_div
  double scale_max = 0;  ///< scale = amax / scale_max (+ eps); 0 means the format's max_finite
  double eps = 0;        ///< added to the scale (Sage: 1e-7); 0 = none (an all-zero group -> NaN flag)
  formats::rounding rnd = formats::rounding::nearest_even;
  bool multiply_reciprocal = false;  ///< cast x * (scale_max / amax) (Sage V) instead of x / scale
};

/// Where the QK dequantisation and the softmax scale are applied (exponent argument = x*eff - m).
enum class score_scaling : uint8_t {
  fold,          ///< x = S, eff = sl2 * dq              (FA3, FlashInfer, Sage unmasked blocks)
  dequant,       ///< x = S * dq, eff = sl2              (hpc-ops, Sage masked blocks)
  dequant_sm,    ///< x = S * (dq * softmax_scale), eff = log2(e)   (XQA: acc *= qkScale)
  dequant_unit,  ///< x = S * dq, eff = 1: softmax_scale*log2(e) folded into Q before its cast (Sage v1)
};

/// In which space the running max lives.
enum class max_space : uint8_t {
  raw,     ///< m = max x (raw); max_scaled = fmaf(m, eff, -offset); alpha = exp2f((m_prev-m)*eff) (FA3, FlashInfer)
  scaled,  ///< m = max fmaf(x, eff, -offset); alpha = exp2f(m_prev - m)   (Sage, XQA, hpc-ops)
};

/// How the static P scale S is applied before the P cast.
enum class p_scale_mode : uint8_t {
  none,             ///< P in [0, 1] is cast as is (S = 1)
  exponent_offset,  ///< P = exp2(... - offset): P in [0, 2^offset]; l includes the factor (FA3 8, Sage 8.807)
  multiply,         ///< P8 = cast(P * S); l from P before the multiply; epilogue divides by S
};

/// The order in which a row's P values are summed into l.
enum class rowsum_order : uint8_t {
  sequential,    ///< l = l*alpha + P_j in ascending j
  wgmma,         ///< 4 per-thread partial sums, columns 8g+2t, 8g+2t+1 (t = 0..3); deferred quad reduce
                 ///< (l0+l2)+(l1+l3) in the epilogue (FA3 softmax.h:132-151)
  sage_mma,      ///< 4 partial sums; per 16-column tile d_t += ((P0+P1)+P4)+P5 with cols 16f+2t+{0,1},
                 ///< 16f+8+2t+{0,1}; epilogue (d0+d1)+(d2+d3) (Sage attn_utils.cuh:551)
  triton_block,  ///< per block: tl.sum(p, 1) as 4 per-thread sums over columns 8g+2t, 8g+2t+1 (in
                 ///< ascending order), quad tree (s0+s2)+(s1+s3); then l = l*alpha + sum (Sage v1)
  hpcops_block,  ///< per block: 4 fresh per-thread sums (columns 8g+2t, 8g+2t+1), l_t = l_t*alpha + sum_t;
                 ///< epilogue quad reduce xor 1 then xor 2: (l0+l1)+(l2+l3) (hpc-ops online_softmax)
  xqa_warps,     ///< per 64-token tile: 4 warp partials of 16 tokens (shuffle tree xor 16, 8, 4 over
                 ///< s_q = P[16w+q] + P[16w+q+8]), added in warp order onto l*alpha (XQA computeWarpColSum)
};

/// Where the causal diagonal sits when n_q != n_kv (the same when n_q == n_kv).
enum class causal_align : uint8_t {
  bottom_right,  ///< row i sees keys j <= i + n_kv - n_q (FA3, FlashInfer, hpc-ops with a KV cache)
  top_left,      ///< row i sees keys j <= i (SageAttention: kv_idx > q_idx masked)
};

/// Accumulator model of a tensor-core product (design.md): within each k_step chunk the products
/// are exact and summed exactly (in double, ascending k: exact for fp8/int8 operands), then the
/// chunk sum is added to the accumulator and rounded once by the model.
enum class acc_kind : uint8_t {
  exact,      ///< no rounding (fp64 arithmetic; only with arith fp64)
  fp32,       ///< round to nearest fp32
  truncated,  ///< keep `mant_bits` fraction bits, round toward zero (Hopper FP8 WGMMA ~13)
  fp16,       ///< round to nearest fp16 (Sage2++ mma.f16 accumulator)
  int32,      ///< integer products (int8 x int8): exact
};

struct accumulator_spec {
  acc_kind kind = acc_kind::fp32;
  int mant_bits = 23;  ///< truncated: fraction bits kept
  int k_step = 32;     ///< products per chunk (mma K)
};

/// How the PV product is accumulated across KV blocks.
enum class pv_mode : uint8_t {
  into_o,           ///< O goes through the accumulator at every k_step (FA3, FlashInfer, XQA)
  fresh_per_block,  ///< fresh accumulator per KV block, then O += float(acc) in fp32 (Sage, hpc-ops)
};

/// Epilogue arithmetic: inv = 1/l; vs = v_scale (/ S for multiply mode).
enum class epilogue_mode : uint8_t {
  combined,   ///< O *= (inv * vs)            (FA3 softmax.h:137-151)
  separate,   ///< O *= inv; O *= vs          (Sage, hpc-ops, XQA)
  div_first,  ///< O *= (vs / l)              (FlashInfer: inv = scale_pv / l)
  divide,     ///< O /= l; O *= vs            (Sage v1 Triton: acc / l)
};

/// A tile size for head dims up to d_max (kernels that pick tiles by head dim).
struct tile_size {
  int d_max = 0, block_m = 0, block_n = 0;
  int block_n_noncausal = 0;  ///< kBlockN without a causal mask where it differs (FA3 bf16); 0 = block_n
};

/// Which quantization points are active (stage attribution turns them on one at a time).
struct quant_points {
  bool q_cast = true, k_cast = true, v_cast = true;
  bool qk_acc = true, p_cast = true, pv_acc = true, o_cast = true;
};

/// The model of one approximate GPU instruction (ex2.approx.ftz.f32, rcp.approx.ftz.f32,
/// div.full.f32): "ieee" runs the CPU's correctly rounded operation (exp2f, 1/x, x/y), "table:PATH"
/// a measured table (formats/sfu_unit.h, written by the probe kit, docs/gpu.md).
struct sfu_choice {
  std::string name = "ieee";                        ///< "ieee" or "table:PATH" as given
  std::shared_ptr<const formats::sfu_table> table;  ///< the loaded table; null for ieee
};

/// Every knob of a kernel. Defaults are an fp32 flash-attention.
struct kernel_spec {
  std::string name = "generic";
  std::string description;
  std::string source_commit;  ///< upstream repo@commit the preset follows (empty: not a published kernel)
  operand_spec q, k, v;
  scale_scope scope = scale_scope::sequence;
  bool smooth_k = false;  ///< subtract the per-channel mean key (Sage), rounded to smooth_k_round
  formats::format smooth_k_round = formats::format::fp32;  ///< format in which k - mean is rounded
  bool arith_fp64 = false;                                 ///< fp64 softmax/accumulator arithmetic (the reference path)
  bool sl2_in_double = true;                               ///< sl2 = float(double(sm_scale) * log2e) (FA3) or in float
  bool fold_dq_first = false;  ///< fold: eff = ((q_scale*k_scale)*sm_scale)*log2e in float, left to
                               ///< right (FlashInfer), instead of sl2*(q_scale*k_scale) (FA3, Sage)
  score_scaling scaling = score_scaling::fold;
  max_space max = max_space::raw;
  float mask_value = -INFINITY;  ///< value of masked scores (-inf, or Sage's -5e6)
  bool mask_on_x = false;        ///< mask written on x after dequantisation (Sage) or on raw S
  int masked_tail_blocks = 0;    ///< Sage: the last N KV blocks of a row's CTA range use `dequant`
                                 ///< scaling (x = S*dq, eff = sl2), causal or not (sm89: 2, sm90: 1)
  formats::format p_fmt = formats::format::e4m3fn;
  p_scale_mode p_mode = p_scale_mode::exponent_offset;
  float p_scale = 256.0f;         ///< S (multiply); under exponent_offset it shows 2^p_offset and is not
                                  ///< read (setting it there is refused)
  float p_offset = 8.0f;          ///< exponent offset (8 for FA3, 8.807 for Sage)
  bool rowsum_from_cast = false;  ///< l from the cast P8 instead of the fp32 P
  rowsum_order rowsum = rowsum_order::sequential;
  int block_n = 128;             ///< KV block size (kBlockN), used when `tiles` is empty
  int block_m = 128;             ///< query rows per CTA (sets the causal block range per row)
  std::vector<tile_size> tiles;  ///< per head dim (first with d_head <= d_max wins)
  bool kv_shared_scale = false;  ///< K and V share one scale (XQA's kvCacheScale)
  bool reverse = false;          ///< KV block order: reverse (FA3, FlashInfer) or forward
  bool rescale_before_pv =
      true;  ///< recorded only (not settable): both pipelines give O <- O*alpha_b then O += P_b V_b
  causal_align causal_diag = causal_align::bottom_right;
  bool alpha_expf = false;        ///< raw max: alpha = expf(m_prev - m) on the scaled scores (XQA) instead of
                                  ///< exp2f((m_prev - m) * eff)
  bool triton_fp_fusion = false;  ///< Triton enable_fp_fusion: l = fmaf(l, alpha, block sum) and, with
                                  ///< fresh_per_block, O = fmaf(O, alpha, float(PV tile)) (Sage v1)
  bool fma_contract = false;      ///< nvcc's default --fmad=true contraction of a source `a * b + c` into
                                  ///< one FMA where the CUDA code leaves it to the compiler, at the
                                  ///< row-sum rescale: hpc-ops' gSum = fmaf(gSum, scale, row_sum); for
                                  ///< sequential, wgmma and sage_mma, l *= alpha fused with the first add
                                  ///< that follows it (l_t = fmaf(l_t, alpha, first addend of thread t))
  bool fma_contract_o = false;    ///< the same at the O rescale with pv=fresh_per_block:
                                  ///< O = fmaf(O, alpha, PV tile) (Sage2's RO *= o_scale; RO += RO_temp)
  accumulator_spec qk_acc, pv_acc;
  pv_mode pv = pv_mode::into_o;
  epilogue_mode epilogue = epilogue_mode::combined;
  formats::format out_fmt = formats::format::fp32;
  quant_points enabled;
  /// Where the GPU uses approximate instructions (docs/gpu.md): exp2_unit for every P and the
  /// rescale factor alpha; rcp_unit for the epilogue's 1/l; div_unit for the other divisions of
  /// the emulated kernel (the quantizer's amax / fmt_max, x / scale and fmt_max / amax, and the
  /// epilogue's v_scale / l, O / l and v_scale / S). ieee: today's CPU operations.
  sfu_choice exp2_unit, rcp_unit, div_unit;
  /// The dtype of the transformed operands (fp32, bf16 or fp16): the condition's centering of K
  /// and rotation of Q and K are each computed in double and their outputs rounded RNE to it
  /// before the kernel's casts, as a real pipeline stores them (kernel APIs take bf16/fp16).
  /// Operands the condition does not transform are used as given (docs/kernels.md).
  formats::format transform_dtype = formats::format::bf16;

  /// Returns this spec with only the quantization points in `keep` active (others off).
  kernel_spec with_points(const quant_points& keep) const;
  /// Returns {block_m, block_n} for a head dim (and mask: some kernels pick a wider kBlockN
  /// without one); throws attnum::error where no tile fits.
  std::pair<int, int> tile_for(int d_head, bool causal = true) const;
};

/// Returns the preset `name`; throws attnum::error listing the known presets otherwise.
const kernel_spec& preset(std::string_view name);
/// Returns the names of all presets in a stable order.
std::vector<std::string> preset_names();
/// Returns the exact fp64 spec (every quantization point off, fp64 arithmetic).
kernel_spec exact_spec();

/// Returns a JSON description of every knob (for `attnum kernels --json` and result files).
nlohmann::json to_json(const kernel_spec& spec);
/// Returns a preset modified by knob assignments "knob=value" (the names of to_json's fields);
/// throws attnum::error naming an unknown knob or a bad value.
kernel_spec apply_knobs(kernel_spec spec, const std::vector<std::string>& assignments);
/// Returns preset `name` (or "fp64": exact_spec()) with `knobs` applied: how every command
/// resolves --kernel and --knob once. Throws attnum::error naming an unknown preset, knob or value.
kernel_spec resolve_kernel(std::string_view name, const std::vector<std::string>& knobs = {});

}  // namespace attnum::attention
