#pragma once
// The causal offset the chunk kernels take (amx.h causal_off, fma_gemm.h fp32_acc::mask_after,
// plane_gemm.h qk_chunk's mask_after): key j is masked for row i when j > i + offset. kNoMask is
// the offset of a call without a causal mask: larger than any row or key index plus any offset
// the engine forms, so nothing is masked, and small enough that adding indices cannot overflow.

namespace attnum::attention {

inline constexpr long kNoMask = 1L << 40;

}  // namespace attnum::attention
