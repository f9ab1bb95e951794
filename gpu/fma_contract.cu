// Snippets that reproduce the statements where the FA3, FlashInfer, Sage2 and hpc-ops kernels leave a
// float multiply and its one add to nvcc's --fmad=true contraction (docs/kernels.md, "FMA
// contraction"). Not part of any build: compile to PTX and look for fma.rn(.ftz).f32:
//   nvcc -arch=sm_90a -O3 --use_fast_math -ptx gpu/fma_contract.cu -o - | grep -E 'fma|mul\.|add\.'
// With --fmad=false each pair stays a mul and an add.
// hpcops_o_rescale (below) follows hpc-ops' build, which has no --use_fast_math: compile it also with
//   nvcc -arch=sm_90a -O3 -ptx gpu/fma_contract.cu -o -

#include <cuda_fp8.h>

// FA3 hopper/softmax.h:120 `row_sum(mi) *= scores_scale(mi)` (max_get_scale), then the exp2 loop
// and :134 reduce_sum with zero_init=false (hopper/utils.h:30); FlashInfer attention_updater.cuh
// :210, :64 the same. Expect one fma for the rescale and the first add.
__global__ void rowsum_rescale_first_add(const float* s, float* out, float sl2, float mprev, float mcur, float lin) {
  float row_sum = lin;
  const float scale = exp2f((mprev - mcur) * sl2);
  row_sum *= scale;
  float p[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) p[i] = exp2f(s[threadIdx.x * 8 + i] * sl2 - mcur);
#pragma unroll
  for (int i = 0; i < 8; ++i) row_sum = row_sum + p[i];
  out[threadIdx.x] = row_sum;
}

// Sage2 attn_utils.cuh:400 `d[fq][k] *= o_scale`, then qk_int_sv_f8_cuda_sm90.cu:317 /
// attn_utils.cuh:551 `d[fq][0] += (RS[0] + RS[1] + RS[4] + RS[5])`. Expect fma(d, o_scale, tile sum).
__global__ void sage_d_rescale(const float* s, float* out, float mprev, float mcur, float din) {
  float d = din;
  const float o_scale = exp2f(mprev - mcur);
  d *= o_scale;
  const float* rs = s + threadIdx.x * 16;
  d += (rs[0] + rs[1] + rs[4] + rs[5]);
  d += (rs[8] + rs[9] + rs[12] + rs[13]);
  out[threadIdx.x] = d;
}

// Sage2 sm90: update_mdo `RO *= o_scale` (attn_utils.cuh:414); wait(&barrier_V) (one asm volatile
// spin loop, qk_int_sv_f8_cuda_sm90.cu:99-112, :326); an asm output standing for the wgmma into
// RO_temp; :353 `RO += RO_temp`. Expect 8 fma.
__global__ void sage_sm90_o_rescale(const float* s, float* out, float mprev, float mcur, unsigned long long* bar) {
  float ro[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) ro[i] = s[threadIdx.x * 8 + i];
  const float o_scale = exp2f(mprev - mcur);
#pragma unroll
  for (int i = 0; i < 8; ++i) ro[i] *= o_scale;
  const unsigned mbar = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra.uni DONE;\nbra.uni LAB_WAIT;\nDONE:\n}\n" ::"r"(mbar),
      "r"(0));
  float t[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) asm volatile("mov.b32 %0, %1;" : "=f"(t[i]) : "f"(s[1024 + threadIdx.x * 8 + i]));
#pragma unroll
  for (int i = 0; i < 8; ++i) ro[i] += t[i];
#pragma unroll
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = ro[i];
}

// Sage2 sm89 fp16-accumulated PV: `RO *= o_scale`; __syncthreads, cp.async.wait_group; the fp16
// mma's packed output; attn_utils.cuh:969-971 unpack and `RO[i][j][k * 2 + 0] += RO_tmp_float[0]`.
// Expect 8 fma.
__global__ void sage_sm89_o_rescale(const float* s, const unsigned* h, float* out, float mprev, float mcur) {
  float ro[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) ro[i] = s[threadIdx.x * 8 + i];
  const float o_scale = exp2f(mprev - mcur);
#pragma unroll
  for (int i = 0; i < 8; ++i) ro[i] *= o_scale;
  __syncthreads();
  asm volatile("cp.async.wait_group 1;\n" ::);
  __syncthreads();
  unsigned r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("mov.b32 %0, %1;" : "=r"(r[i]) : "r"(h[threadIdx.x * 4 + i]));
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned lo = r[i] & 0xffffu, hi = r[i] >> 16;
    float f0, f1;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f0) : "h"(static_cast<unsigned short>(lo)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(f1) : "h"(static_cast<unsigned short>(hi)));
    ro[2 * i] += f0;
    ro[2 * i + 1] += f1;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = ro[i];
}

// hpc-ops (Tencent/hpc-ops@6e2ecede9d6d47b2e680e839cc7ad7422bc8d88b, built without --use_fast_math:
// CMakeLists.txt:5 Release, :97-106, so compile this one also without it) FP8 prefill,
// src/attention/prefill/kernels.cuh: :85 `scale = exp2f_ftz(last_max - gMax(im))` (utils.cuh:300-304,
// asm volatile ex2.approx.ftz), :90 `tYr_mn(im, in) = tYr_mn(im, in) * scale`; :1347 `tAttr(i) *=
// kFp8PrefillPScale`; :1356 `__nv_fp8x4_e4m3(float4)`; :1364-1365 `__byte_perm`; :1369
// wait_barrier (cute copy_sm90_desc.hpp:92-110, one asm volatile spin loop); :1377
// warpgroup_fence_operand(tOr) (cute mma_sm90_gmma.hpp:99-103, `asm volatile("" : "+f"(reg) ::
// "memory")`); per `in`: :1389 fence_view_async_shared, :1392 warpgroup_arrive, :1393 the wgmma
// into tOr (ScaleOut::Zero first, :1378, then One, :1396), :1395 commit; :1399 warpgroup_wait<0>,
// :1400 warpgroup_fence_operand(tOr); :1403 `tYr(i) += tOr(i)`. The V transpose of each `in`
// (:1383-1387, utils.cuh:512-520: an LDSM_T copy, __byte_perm, an STSM copy) is one ldmatrix.trans
// and one stmatrix here. Fused if 8 fma (tYr * scale + tOr).
__device__ __forceinline__ void hpc_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }

__global__ void hpcops_o_rescale(const float* s, const float* p, unsigned* p8out, float* out, float last_max,
                                 float gmax, unsigned long long* bar, unsigned long long vdesc, unsigned smem_v) {
  float tyr[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) tyr[i] = s[threadIdx.x * 8 + i];
  float scale;
  asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(scale) : "f"(last_max - gmax));
#pragma unroll
  for (int i = 0; i < 8; ++i) tyr[i] = tyr[i] * scale;
  float tattr[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) tattr[i] = p[threadIdx.x * 16 + i];
#pragma unroll
  for (int i = 0; i < 16; ++i) tattr[i] *= 256.0f;
  unsigned a8[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_fp8x4_e4m3 q(make_float4(tattr[4 * i], tattr[4 * i + 1], tattr[4 * i + 2], tattr[4 * i + 3]));
    a8[i] = q.__x;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const unsigned up = a8[2 * i], lo = a8[2 * i + 1];
    a8[2 * i] = __byte_perm(up, lo, 0x5410);
    a8[2 * i + 1] = __byte_perm(up, lo, 0x7632);
  }
  const unsigned mbar = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(mbar),
      "r"(0));
  float tor[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) hpc_fence(tor[i]);
#pragma unroll
  for (int in = 0; in < 2; ++in) {
    unsigned v[4];
    const unsigned vaddr = smem_v + in * 512 + threadIdx.x * 16;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "r"(vaddr));
    const unsigned t0 = __byte_perm(v[0], v[1], 0x6420), t1 = __byte_perm(v[0], v[1], 0x7531);
    const unsigned t2 = __byte_perm(v[2], v[3], 0x6420), t3 = __byte_perm(v[2], v[3], 0x7531);
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(vaddr + 4096), "r"(t0),
                 "r"(t1), "r"(t2), "r"(t3)
                 : "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
        "%12, p, 1, 1;\n}\n"
        : "+f"(tor[0]), "+f"(tor[1]), "+f"(tor[2]), "+f"(tor[3]), "+f"(tor[4]), "+f"(tor[5]), "+f"(tor[6]), "+f"(tor[7])
        : "r"(a8[0]), "r"(a8[1]), "r"(a8[2]), "r"(a8[3]), "l"(vdesc + in), "r"(in));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < 8; ++i) hpc_fence(tor[i]);
#pragma unroll
  for (int i = 0; i < 8; ++i) tyr[i] += tor[i];
#pragma unroll
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = tyr[i];
  p8out[threadIdx.x] = a8[0] ^ a8[3];
}
