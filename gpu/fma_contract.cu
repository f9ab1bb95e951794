// Snippets that reproduce the statements where the FA3, FlashInfer and Sage2 kernels leave a
// float multiply and its one add to nvcc's --fmad=true contraction (docs/kernels.md, "FMA
// contraction"). Not part of any build: compile to PTX and look for fma.rn(.ftz).f32:
//   nvcc -arch=sm_90a -O3 --use_fast_math -ptx gpu/fma_contract.cu -o - | grep -E 'fma|mul\.|add\.'
// With --fmad=false each pair stays a mul and an add.

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
