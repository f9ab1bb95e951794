// attnum-gpu-probe: measures the GPU arithmetic the emulator models (docs/gpu.md).
//
//   attnum-gpu-probe [--out DIR] [--only ex2,rcp,div,mma] [--stride N] [--commit SHA]
//
// SFU: ex2.approx.ftz.f32 and rcp.approx.ftz.f32 on every float32 bit pattern (--stride N: every
// Nth, for a quick look), div.full.f32 on structured samples, each through inline PTX; the host
// analysis (host/sfu_analysis.h) finds the table and rule and verifies them on every evaluated
// input before writing DIR/<gpu>/<unit>.tbl. Tensor cores: mma.sync with FP8 (E4M3, E5M2; fp32
// and fp16 accumulate), BF16 and FP16 (fp32 accumulate; FP16 also fp16 accumulate) and INT8
// (int32), and on sm_90 the warpgroup wgmma.mma_async m64n8k32 with E4M3 and E5M2 (fp32
// accumulate; FA3's and FlashInfer's instruction), on the probe battery of host/mma_analysis.h.
// Each probe writes DIR/<gpu>/<probe>.json
// (GPU name, compute capability, driver and runtime versions, the kit's git commit) and
// DIR/<gpu>/summary.md compares the hardware with the emulator's models.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnum/formats/sfu_unit.h"
#include "gpu/host/mma_analysis.h"
#include "gpu/host/sfu_analysis.h"

using namespace attnum;

#define CK(call)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "attnum-gpu-probe: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// ---- SFU kernels (inline PTX: the instructions the kernels' fast-math code emits) ----
__global__ void k_ex2(const uint32_t* in, uint32_t* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__uint_as_float(in[i])));
  out[i] = __float_as_uint(y);
}
__global__ void k_rcp(const uint32_t* in, uint32_t* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float y;
  asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__uint_as_float(in[i])));
  out[i] = __float_as_uint(y);
}
__global__ void k_div(const uint32_t* a, const uint32_t* b, uint32_t* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float y;
  asm volatile("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(__uint_as_float(a[i])), "f"(__uint_as_float(b[i])));
  out[i] = __float_as_uint(y);
}

struct dev_buf {
  uint32_t* p = nullptr;
  size_t n = 0;
  void ensure(size_t m) {
    if (m <= n) return;
    if (p) CK(cudaFree(p));
    CK(cudaMalloc(&p, m * 4));
    n = m;
  }
};

gpu::unary_eval device_unary(void (*kernel)(const uint32_t*, uint32_t*, size_t)) {
  return [kernel](const uint32_t* in, uint32_t* out, size_t n) {
    static dev_buf din, dout;
    din.ensure(n), dout.ensure(n);
    CK(cudaMemcpy(din.p, in, n * 4, cudaMemcpyHostToDevice));
    kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(din.p, dout.p, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out, dout.p, n * 4, cudaMemcpyDeviceToHost));
  };
}

// ---- MMA kernels: one warp per probe vector; A row 0, B column 0 and C[0][0] hold the vector,
// every other element 0; lane 0's first accumulator register is D[0][0] (PTX ISA, "Matrix
// fragments for mma.m16n8k32 / m16n8k16": row = groupID for c0, col = 2 * threadID_in_group). ----
enum class op { e4m3_f32, e5m2_f32, e4m3_f16, bf16_f32, f16_f32, f16_f16, s8_s32 };

template <op O>
__device__ uint32_t pack4(const float* A, int lda, int r0, int c0) {  // 4 consecutive 8-bit values
  uint32_t u = 0;
  for (int t = 0; t < 4; ++t) {
    const float x = A[r0 * lda + c0 + t];
    uint32_t byte;
    if constexpr (O == op::s8_s32)
      byte = static_cast<uint8_t>(static_cast<int8_t>(x));
    else if constexpr (O == op::e5m2_f32)
      byte = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    else
      byte = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    u |= byte << (8 * t);
  }
  return u;
}
template <op O>
__device__ uint32_t pack2(float x, float y) {  // two 16-bit values, x in the low half
  if constexpr (O == op::bf16_f32) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <op O>
__global__ void k_mma(const float* va, const float* vb, const double* vc, double* out, int K) {
  __shared__ float A[16 * 32], B[32 * 8];  // A [16, K] row-major, B [K, 8] as B[k * 8 + n]
  const int v = blockIdx.x, lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  for (int i = lane; i < 16 * 32; i += 32) A[i] = 0;
  for (int i = lane; i < 32 * 8; i += 32) B[i] = 0;
  __syncwarp();
  for (int k = lane; k < K; k += 32) A[k] = va[v * K + k], B[k * 8] = vb[v * K + k];
  __syncwarp();
  const double c = vc[v];
  double d = 0;
  if constexpr (O == op::e4m3_f32 || O == op::e5m2_f32 || O == op::s8_s32 || O == op::e4m3_f16) {
    // m16n8k32: a_i row g (i < 4, 8 <= i < 12) or g + 8, col 4t + (i & 3) (+16 for i >= 8);
    // b_i row 4t + (i & 3) (+16 for i >= 4), col g
    uint32_t a[4], b[2];
    a[0] = pack4<O>(A, 32, g, 4 * t);
    a[1] = pack4<O>(A, 32, g + 8, 4 * t);
    a[2] = pack4<O>(A, 32, g, 4 * t + 16);
    a[3] = pack4<O>(A, 32, g + 8, 4 * t + 16);
    float bt[8];
    for (int i = 0; i < 8; ++i) bt[i] = B[(4 * t + (i & 3) + (i >= 4 ? 16 : 0)) * 8 + g];
    b[0] = pack4<O>(bt, 0, 0, 0);
    b[1] = pack4<O>(bt + 4, 0, 0, 0);
    const bool c00 = lane == 0;  // C[0][0] lives in lane 0's c0
    if constexpr (O == op::s8_s32) {
      int ci[4] = {c00 ? static_cast<int>(c) : 0, 0, 0, 0}, di[4];
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
          : "=r"(di[0]), "=r"(di[1]), "=r"(di[2]), "=r"(di[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(ci[0]), "r"(ci[1]), "r"(ci[2]),
            "r"(ci[3]));
      d = di[0];
    } else if constexpr (O == op::e4m3_f16) {
      const uint32_t c0 = pack2<op::f16_f16>(c00 ? static_cast<float>(c) : 0.0f, 0.0f), c1 = 0;
      uint32_t d0, d1;
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
                   : "=r"(d0), "=r"(d1)
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c0), "r"(c1));
      d = __half2float(*reinterpret_cast<const __half*>(&d0));
    } else {
      float cf[4] = {c00 ? static_cast<float>(c) : 0.0f, 0, 0, 0}, df[4];
      if constexpr (O == op::e4m3_f32)
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};"
            : "=f"(df[0]), "=f"(df[1]), "=f"(df[2]), "=f"(df[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(cf[0]), "f"(cf[1]), "f"(cf[2]),
              "f"(cf[3]));
      else
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};"
            : "=f"(df[0]), "=f"(df[1]), "=f"(df[2]), "=f"(df[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(cf[0]), "f"(cf[1]), "f"(cf[2]),
              "f"(cf[3]));
      d = df[0];
    }
  } else {
    // m16n8k16 (16-bit inputs): a_i row g (i in {0,1,4,5}) or g + 8, col 2t + (i & 1) (+8 for
    // i >= 4); b_i row 2t + (i & 1) (+8 for i >= 2), col g
    uint32_t a[4], b[2];
    a[0] = pack2<O>(A[g * 32 + 2 * t], A[g * 32 + 2 * t + 1]);
    a[1] = pack2<O>(A[(g + 8) * 32 + 2 * t], A[(g + 8) * 32 + 2 * t + 1]);
    a[2] = pack2<O>(A[g * 32 + 2 * t + 8], A[g * 32 + 2 * t + 9]);
    a[3] = pack2<O>(A[(g + 8) * 32 + 2 * t + 8], A[(g + 8) * 32 + 2 * t + 9]);
    b[0] = pack2<O>(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    b[1] = pack2<O>(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    const bool c00 = lane == 0;
    if constexpr (O == op::f16_f16) {
      const uint32_t c0 = pack2<op::f16_f16>(c00 ? static_cast<float>(c) : 0.0f, 0.0f), c1 = 0;
      uint32_t d0, d1;
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
                   : "=r"(d0), "=r"(d1)
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c0), "r"(c1));
      d = __half2float(*reinterpret_cast<const __half*>(&d0));
    } else {
      float cf[4] = {c00 ? static_cast<float>(c) : 0.0f, 0, 0, 0}, df[4];
      if constexpr (O == op::bf16_f32)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};"
            : "=f"(df[0]), "=f"(df[1]), "=f"(df[2]), "=f"(df[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(cf[0]), "f"(cf[1]), "f"(cf[2]),
              "f"(cf[3]));
      else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};"
            : "=f"(df[0]), "=f"(df[1]), "=f"(df[2]), "=f"(df[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(cf[0]), "f"(cf[1]), "f"(cf[2]),
              "f"(cf[3]));
      d = df[0];
    }
  }
  if (lane == 0) out[v] = d;
}

// ---- wgmma (sm_90a): one warpgroup (4 warps, 128 threads) per probe vector; A from registers,
// B from shared memory through a matrix descriptor; D = A B + D with D[0][0] preset to C. ----
// A's register fragment for .m64nNk32 with 8-bit types is mma.m16n8k32's per warp, warp w holding
// rows 16w..16w+15 (PTX ISA, "Register fragment layout for matrix A in wgmma .m64nNk32"); only
// row 0 is non-zero, so only warp 0's lanes 0-3 hold a vector's values. D's fragment: warp w, lane
// (g, t) holds rows 16w + g (d0, d1) and 16w + g + 8 (d2, d3), columns 2t and 2t + 1: D[0][0] is
// warp 0 lane 0's d0. B (K = 32 by N = 8) is stored K-major without swizzle as two 8 x 16-byte
// core matrices, k = 0..15 at byte 0 and k = 16..31 at byte 128 (row n at n * 16 + k % 16); the
// descriptor ("Matrix Descriptor Format": start address >> 4 in bits 0-13, the leading dimension
// byte offset, between core matrices adjacent in K, >> 4 in bits 16-29, the stride dimension byte
// offset, between core matrices adjacent in N, >> 4 in bits 32-45, swizzle 0 in bits 62-63) says
// so. The layout check in main() runs first: a wrong reading of any of this reports a failed
// check, never a model.
__device__ uint64_t wgmma_desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

template <op O>
__global__ void k_wgmma(const float* va, const float* vb, const double* vc, double* out, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(O == op::e4m3_f32 || O == op::e5m2_f32, "wgmma probes: FP8 with fp32 accumulate");
  __shared__ __align__(128) uint8_t Bs[256];
  __shared__ float A[32];
  const int v = blockIdx.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  for (int i = tid; i < 256; i += 128) Bs[i] = 0;
  if (tid < 32) A[tid] = tid < K ? va[v * K + tid] : 0.0f;
  __syncthreads();
  if (tid < K)
    Bs[(tid / 16) * 128 + tid % 16] = static_cast<uint8_t>(
        __nv_cvt_float_to_fp8(vb[v * K + tid], __NV_SATFINITE, O == op::e5m2_f32 ? __NV_E5M2 : __NV_E4M3));
  // Shared memory written by the generic proxy, read by wgmma's async proxy.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  uint32_t a[4] = {0, 0, 0, 0};
  if (warp == 0 && g == 0) a[0] = pack4<O>(A, 0, 0, 4 * t), a[2] = pack4<O>(A, 0, 0, 4 * t + 16);
  float d[4] = {warp == 0 && lane == 0 ? static_cast<float>(vc[v]) : 0.0f, 0.0f, 0.0f, 0.0f};
  const uint64_t desc = wgmma_desc(Bs, 128, 256);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (O == op::e4m3_f32)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  if (tid == 0) out[v] = d[0];
#else
  __trap();  // launched only on sm_90 (main() checks the compute capability)
#endif
}

// Runs `launch(n, a, b, c, d)` (device pointers) on the vectors and returns D[0][0] of each.
template <typename Launch>
gpu::mma_eval device_eval(int K, Launch launch) {
  return [K, launch](const std::vector<gpu::mma_vec>& vs, std::vector<double>& d) {
    const size_t n = vs.size();
    std::vector<float> a(n * K), b(n * K);
    std::vector<double> c(n);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(&a[i * K], vs[i].a.data(), K * 4);
      std::memcpy(&b[i * K], vs[i].b.data(), K * 4);
      c[i] = vs[i].c;
    }
    float *da, *db;
    double *dc, *dd;
    CK(cudaMalloc(&da, a.size() * 4));
    CK(cudaMalloc(&db, b.size() * 4));
    CK(cudaMalloc(&dc, n * 8));
    CK(cudaMalloc(&dd, n * 8));
    CK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, c.data(), n * 8, cudaMemcpyHostToDevice));
    launch(static_cast<unsigned>(n), da, db, dc, dd);
    CK(cudaGetLastError());
    d.resize(n);
    CK(cudaMemcpy(d.data(), dd, n * 8, cudaMemcpyDeviceToHost));
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    CK(cudaFree(dd));
  };
}

template <op O>
gpu::mma_eval device_mma(int K) {
  return device_eval(K, [K](unsigned n, const float* a, const float* b, const double* c, double* d) {
    k_mma<O><<<n, 32>>>(a, b, c, d, K);
  });
}

template <op O>
gpu::mma_eval device_wgmma(int K) {
  return device_eval(K, [K](unsigned n, const float* a, const float* b, const double* c, double* d) {
    k_wgmma<O><<<n, 128>>>(a, b, c, d, K);
  });
}

// ---- results ----
struct env_info {
  std::string gpu, dir_name, cc, driver, runtime, commit;
  std::string json() const {
    return "{\"gpu\": \"" + gpu + "\", \"compute_capability\": \"" + cc + "\", \"driver\": \"" + driver +
           "\", \"cuda_runtime\": \"" + runtime + "\", \"commit\": \"" + commit + "\"}";
  }
};

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream o(p);
  o << s;
  if (!o) {
    std::fprintf(stderr, "attnum-gpu-probe: cannot write %s\n", p.c_str());
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  std::string out = "gpu-results", only = "ex2,rcp,div,mma", commit = "unknown";
  uint64_t stride = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--out")
      out = v;
    else if (k == "--only")
      only = v;
    else if (k == "--stride")
      stride = std::stoull(v);
    else if (k == "--commit")
      commit = v;
    else {
      std::fprintf(stderr, "attnum-gpu-probe: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  auto want = [&](const char* p) { return ("," + only + ",").find(std::string(",") + p + ",") != std::string::npos; };
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0, rt = 0;
  CK(cudaDriverGetVersion(&drv));
  CK(cudaRuntimeGetVersion(&rt));
  env_info env{
      prop.name,        "",    std::to_string(prop.major) + "." + std::to_string(prop.minor), version_text(drv),
      version_text(rt), commit};
  for (char ch : env.gpu) env.dir_name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
  const std::filesystem::path dir = std::filesystem::path(out) / env.dir_name;
  std::filesystem::create_directories(dir);
  std::string md = "# GPU probe results: " + env.gpu + " (sm_" + std::to_string(prop.major) +
                   std::to_string(prop.minor) + "), driver " + env.driver + ", CUDA runtime " + env.runtime +
                   ", commit " + commit + "\n\n";
  const gpu::unary_domain dom{stride, 0};
  formats::sfu_table rcp_table;
  bool have_rcp = false;
  auto sfu_report = [&](const gpu::sfu_analysis& a, const char* file) {
    write_text(dir / (std::string(file) + ".json"),
               "{\"env\": " + env.json() + ", \"analysis\": " + gpu::to_json(a) + "}\n");
    md += "## " + a.unit + "\n\n| model | evaluated | mismatches |\n|---|---|---|\n";
    for (const auto& h : a.tried)
      md += "| " + h.name + " | " + std::to_string(h.evaluated) + " | " + std::to_string(h.mismatches) + " |\n";
    md += "| ieee (the emulator's default) | " + std::to_string(a.ieee.evaluated) + " | " +
          std::to_string(a.ieee.mismatches) + " |\n\n";
    if (a.found) {
      formats::sfu_table t = a.table;
      t.notes.push_back("measured " + a.unit + " on " + env.gpu + " (cc " + env.cc + ", driver " + env.driver +
                        "), commit " + commit);
      formats::write_sfu_table((dir / (std::string(file) + ".tbl")).string(), t);
      md += "Table written: `" + (dir / (std::string(file) + ".tbl")).string() + "` (use `--knob " +
            (a.table.kind == formats::sfu_kind::ex2   ? "exp2_unit"
             : a.table.kind == formats::sfu_kind::rcp ? "rcp_unit"
                                                      : "div_unit") +
            "=table:PATH`).\n\n";
    } else {
      md += "No hypothesis reproduced every output: no table written; the first mismatches are in " +
            std::string(file) + ".json.\n\n";
    }
  };
  if (want("ex2")) sfu_report(gpu::analyze_ex2(device_unary(k_ex2), dom), "ex2");
  if (want("rcp") || want("div")) {
    const auto a = gpu::analyze_rcp(device_unary(k_rcp), dom);
    if (want("rcp")) sfu_report(a, "rcp");
    have_rcp = a.found, rcp_table = a.table;
  }
  if (want("div")) {
    const gpu::binary_eval div = [](const uint32_t* a, const uint32_t* b, uint32_t* o, size_t n) {
      static dev_buf da, db, dout;
      da.ensure(n), db.ensure(n), dout.ensure(n);
      CK(cudaMemcpy(da.p, a, n * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(db.p, b, n * 4, cudaMemcpyHostToDevice));
      k_div<<<static_cast<unsigned>((n + 255) / 256), 256>>>(da.p, db.p, dout.p, n);
      CK(cudaGetLastError());
      CK(cudaMemcpy(o, dout.p, n * 4, cudaMemcpyDeviceToHost));
    };
    sfu_report(gpu::analyze_div(div, have_rcp ? &rcp_table : nullptr, gpu::structured_div_samples(12)), "div");
  }
  if (want("mma")) {
    struct probe {
      const char* name;
      int K;
      gpu::mma_input in;
      gpu::mma_acc acc;
      gpu::mma_eval eval;
    };
    std::vector<probe> probes = {
        {"mma.m16n8k32.f32.e4m3.e4m3.f32", 32, gpu::mma_input::e4m3, gpu::mma_acc::fp32, device_mma<op::e4m3_f32>(32)},
        {"mma.m16n8k32.f32.e5m2.e5m2.f32", 32, gpu::mma_input::e5m2, gpu::mma_acc::fp32, device_mma<op::e5m2_f32>(32)},
        {"mma.m16n8k32.f16.e4m3.e4m3.f16", 32, gpu::mma_input::e4m3, gpu::mma_acc::fp16, device_mma<op::e4m3_f16>(32)},
        {"mma.m16n8k16.f32.bf16.bf16.f32", 16, gpu::mma_input::bf16, gpu::mma_acc::fp32, device_mma<op::bf16_f32>(16)},
        {"mma.m16n8k16.f32.f16.f16.f32", 16, gpu::mma_input::fp16, gpu::mma_acc::fp32, device_mma<op::f16_f32>(16)},
        {"mma.m16n8k16.f16.f16.f16.f16", 16, gpu::mma_input::fp16, gpu::mma_acc::fp16, device_mma<op::f16_f16>(16)},
        {"mma.m16n8k32.s32.s8.s8.s32", 32, gpu::mma_input::int8, gpu::mma_acc::int32, device_mma<op::s8_s32>(32)},
    };
    if (prop.major == 9) {  // Hopper: the warpgroup MMA FA3 and FlashInfer run (sm_90a code)
      probes.push_back({"wgmma.m64n8k32.f32.e4m3.e4m3", 32, gpu::mma_input::e4m3, gpu::mma_acc::fp32,
                        device_wgmma<op::e4m3_f32>(32)});
      probes.push_back({"wgmma.m64n8k32.f32.e5m2.e5m2", 32, gpu::mma_input::e5m2, gpu::mma_acc::fp32,
                        device_wgmma<op::e5m2_f32>(32)});
    }
    md +=
        "## Tensor cores (mma.sync, and wgmma on sm_90; model in the accumulator knobs' vocabulary)\n\n"
        "| instruction | kept bits | rounding | exact chunk | align span | C span | model | mismatches / vectors |\n"
        "|---|---|---|---|---|---|---|---|\n";
    for (const auto& p : probes) {
      // fragment-layout check: small integers sum exactly in every accumulator
      gpu::mma_vec t{std::vector<float>(p.K), std::vector<float>(p.K), 3.0};
      double expect = 3.0;
      for (int k = 0; k < p.K; ++k)
        t.a[k] = static_cast<float>(1 + k % 3), t.b[k] = static_cast<float>(k % 2 ? 1 : 2), expect += t.a[k] * t.b[k];
      std::vector<double> got;
      p.eval({t}, got);
      if (got.size() != 1 || got[0] != expect) {
        md += "| " + std::string(p.name) + " | layout check failed: got " + std::to_string(got.empty() ? 0.0 : got[0]) +
              ", expected " + std::to_string(expect) + " | | | | | | |\n";
        continue;
      }
      const auto a = gpu::analyze_mma(p.name, p.K, p.in, p.acc, p.eval);
      std::string file = p.name;
      for (char& ch : file) ch = ch == '.' ? '_' : ch;
      write_text(dir / (file + ".json"), "{\"env\": " + env.json() + ", \"analysis\": " + gpu::to_json(a) + "}\n");
      md += "| " + std::string(p.name) + " | " + std::to_string(a.kept_bits) + " | " + a.rounding + " | " +
            std::to_string(a.exact_chunk) + " | " + std::to_string(a.align_span) + "/" +
            std::to_string(a.max_span_tested) + " | " + std::to_string(a.c_span) + " | `" + a.best.knobs() + "`" +
            (a.best_mismatches ? " (nearest)" : " (exact)") + " | " + std::to_string(a.best_mismatches) + " / " +
            std::to_string(a.vectors) + " |\n";
    }
    md +=
        "\nThe emulator's models on the same vectors are in each JSON file's `candidates` (fp32 with k_step 32: "
        "`fa3`; truncated 13: `-acc13`; fp16: Sage2++'s PV).\n";
  }
  write_text(dir / "summary.md", md);
  std::printf("attnum-gpu-probe: results in %s\n", dir.c_str());
  return 0;
}
