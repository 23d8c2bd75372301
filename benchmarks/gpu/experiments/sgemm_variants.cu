// SGEMM variants of polyc's tiled contraction kernel (C = A B, row-major, fp32), for measuring on
// a lent GPU which change is worth generating.  Each kernel: 256 threads, a 128x128 tile of C per
// block, 8x8 per thread in the split layout polyc prints (rows trow*4+{0..3} and 64+trow*4+{0..3}).
// v0: polyc's current kernel (one shared buffer, loads then compute, two barriers per K step).
// v1: v0 + the next K tile's global loads issued into registers before the compute (prefetch).
// v2: v1 + two shared buffers (one barrier per K step).
// v3: v2 + 16-byte global loads where the tile is whole and rows are 16-byte aligned.
#include <stdint.h>
#define BM 128
#define BN 128
#define BK 16
#define PAD 4
#ifndef MINB
#define MINB 2
#endif

__device__ __forceinline__ void compute_tile(const float (*As)[BM + PAD], const float (*Bs)[BN], float acc[8][8],
                                             int trow, int tcol) {
#pragma unroll
  for (int kk = 0; kk < BK; kk++) {
    float af[8], bf[8];
#pragma unroll
    for (int m = 0; m < 8; m++) af[m] = As[kk][trow * 4 + (m % 4) + (m / 4) * 64];
#pragma unroll
    for (int n = 0; n < 8; n++) bf[n] = Bs[kk][tcol * 4 + (n % 4) + (n / 4) * 64];
#pragma unroll
    for (int m = 0; m < 8; m++)
#pragma unroll
      for (int n = 0; n < 8; n++) acc[m][n] += af[m] * bf[n];
  }
}

__device__ __forceinline__ void store_c(float *C, const float acc[8][8], int64_t i0, int64_t j0, int trow, int tcol,
                                        int64_t nI, int64_t nJ) {
  for (int m = 0; m < 8; m++)
    for (int n = 0; n < 8; n++) {
      int64_t r = i0 + trow * 4 + (m % 4) + (m / 4) * 64, c = j0 + tcol * 4 + (n % 4) + (n / 4) * 64;
      if (r < nI && c < nJ) C[r * nJ + c] = acc[m][n];
    }
}

// scalar loads of one K tile into registers (8 of A, 8 of B per thread)
__device__ __forceinline__ void load_regs(float ra[8], float rb[8], const float *A, const float *B, int64_t i0,
                                          int64_t j0, int64_t k0, int64_t nI, int64_t nK, int64_t nJ) {
#pragma unroll
  for (int t = 0; t < 8; t++) {
    int l = threadIdx.x + 256 * t;
    int r = l / BK, c = l % BK;
    ra[t] = (i0 + r < nI && k0 + c < nK) ? A[(i0 + r) * nK + k0 + c] : 0.0f;
    int rr = l / BN, cc = l % BN;
    rb[t] = (k0 + rr < nK && j0 + cc < nJ) ? B[(k0 + rr) * nJ + j0 + cc] : 0.0f;
  }
}
__device__ __forceinline__ void store_regs(float (*As)[BM + PAD], float (*Bs)[BN], const float ra[8], const float rb[8]) {
#pragma unroll
  for (int t = 0; t < 8; t++) {
    int l = threadIdx.x + 256 * t;
    As[l % BK][l / BK] = ra[t];
    Bs[l / BN][l % BN] = rb[t];
  }
}

// The element-wise double-buffered pipeline (v2's loop; the fallback of v3 and v4).
__device__ __forceinline__ void scalar_pipeline(float (*As)[BK][BM + PAD], float (*Bs)[BK][BN], float acc[8][8],
                                                const float *A, const float *B, int64_t i0, int64_t j0, int64_t nI,
                                                int64_t nK, int64_t nJ, int trow, int tcol) {
  float ra[8], rb[8];
  load_regs(ra, rb, A, B, i0, j0, 0, nI, nK, nJ);
  store_regs(As[0], Bs[0], ra, rb);
  __syncthreads();
  int buf = 0;
  for (int64_t k0 = 0; k0 < nK; k0 += BK) {
    const bool more = k0 + BK < nK;
    if (more) load_regs(ra, rb, A, B, i0, j0, k0 + BK, nI, nK, nJ);
    compute_tile(As[buf], Bs[buf], acc, trow, tcol);
    if (more) store_regs(As[buf ^ 1], Bs[buf ^ 1], ra, rb);
    __syncthreads();
    buf ^= 1;
  }
}

extern "C" __global__ void __launch_bounds__(256, MINB) v0(float *__restrict__ C, const float *__restrict__ A,
                                                       const float *__restrict__ B, int64_t nI, int64_t nK, int64_t nJ) {
  __shared__ __align__(16) float As[BK][BM + PAD];
  __shared__ __align__(16) float Bs[BK][BN];
  float acc[8][8] = {};
  const int tcol = threadIdx.x % 16, trow = threadIdx.x / 16;
  const int64_t i0 = 128 * (int64_t)blockIdx.y, j0 = 128 * (int64_t)blockIdx.x;
  for (int64_t k0 = 0; k0 < nK; k0 += BK) {
    float ra[8], rb[8];
    load_regs(ra, rb, A, B, i0, j0, k0, nI, nK, nJ);
    store_regs(As, Bs, ra, rb);
    __syncthreads();
    compute_tile(As, Bs, acc, trow, tcol);
    __syncthreads();
  }
  store_c(C, acc, i0, j0, trow, tcol, nI, nJ);
}

extern "C" __global__ void __launch_bounds__(256, MINB) v1(float *__restrict__ C, const float *__restrict__ A,
                                                       const float *__restrict__ B, int64_t nI, int64_t nK, int64_t nJ) {
  __shared__ __align__(16) float As[BK][BM + PAD];
  __shared__ __align__(16) float Bs[BK][BN];
  float acc[8][8] = {};
  const int tcol = threadIdx.x % 16, trow = threadIdx.x / 16;
  const int64_t i0 = 128 * (int64_t)blockIdx.y, j0 = 128 * (int64_t)blockIdx.x;
  float ra[8], rb[8];
  load_regs(ra, rb, A, B, i0, j0, 0, nI, nK, nJ);
  for (int64_t k0 = 0; k0 < nK; k0 += BK) {
    store_regs(As, Bs, ra, rb);
    __syncthreads();
    if (k0 + BK < nK) load_regs(ra, rb, A, B, i0, j0, k0 + BK, nI, nK, nJ);
    compute_tile(As, Bs, acc, trow, tcol);
    __syncthreads();
  }
  store_c(C, acc, i0, j0, trow, tcol, nI, nJ);
}

extern "C" __global__ void __launch_bounds__(256, MINB) v2(float *__restrict__ C, const float *__restrict__ A,
                                                       const float *__restrict__ B, int64_t nI, int64_t nK, int64_t nJ) {
  __shared__ __align__(16) float As[2][BK][BM + PAD];
  __shared__ __align__(16) float Bs[2][BK][BN];
  float acc[8][8] = {};
  const int tcol = threadIdx.x % 16, trow = threadIdx.x / 16;
  const int64_t i0 = 128 * (int64_t)blockIdx.y, j0 = 128 * (int64_t)blockIdx.x;
  scalar_pipeline(As, Bs, acc, A, B, i0, j0, nI, nK, nJ, trow, tcol);
  store_c(C, acc, i0, j0, trow, tcol, nI, nJ);
}

// 16-byte loads: A tile 128 x 16 = 512 float4 (2 per thread), B tile 16 x 128 = 512 float4 (2 per thread)
__device__ __forceinline__ void load_vec(float4 va[2], float4 vb[2], const float *A, const float *B, int64_t i0,
                                         int64_t j0, int64_t k0, int64_t nK, int64_t nJ) {
#pragma unroll
  for (int t = 0; t < 2; t++) {
    int l = threadIdx.x + 256 * t;
    int r = l / (BK / 4), c = (l % (BK / 4)) * 4;
    va[t] = *reinterpret_cast<const float4 *>(A + (i0 + r) * nK + k0 + c);
    int rr = l / (BN / 4), cc = (l % (BN / 4)) * 4;
    vb[t] = *reinterpret_cast<const float4 *>(B + (k0 + rr) * nJ + j0 + cc);
  }
}
__device__ __forceinline__ void store_vec(float (*As)[BM + PAD], float (*Bs)[BN], const float4 va[2], const float4 vb[2]) {
#pragma unroll
  for (int t = 0; t < 2; t++) {
    int l = threadIdx.x + 256 * t;
    int r = l / (BK / 4), c = (l % (BK / 4)) * 4;
    As[c][r] = va[t].x; As[c + 1][r] = va[t].y; As[c + 2][r] = va[t].z; As[c + 3][r] = va[t].w;
    int rr = l / (BN / 4), cc = (l % (BN / 4)) * 4;
    *reinterpret_cast<float4 *>(&Bs[rr][cc]) = vb[t];
  }
}

extern "C" __global__ void __launch_bounds__(256, MINB) v3(float *__restrict__ C, const float *__restrict__ A,
                                                       const float *__restrict__ B, int64_t nI, int64_t nK, int64_t nJ) {
  __shared__ __align__(16) float As[2][BK][BM + PAD];
  __shared__ __align__(16) float Bs[2][BK][BN];
  float acc[8][8] = {};
  const int tcol = threadIdx.x % 16, trow = threadIdx.x / 16;
  const int64_t i0 = 128 * (int64_t)blockIdx.y, j0 = 128 * (int64_t)blockIdx.x;
  // uniform per block: the fast path needs whole tiles and 16-byte aligned rows
  const bool vec = i0 + BM <= nI && j0 + BN <= nJ && nK % 4 == 0 && nJ % 4 == 0 && nK % BK == 0 &&
                   ((uintptr_t)A % 16 == 0) && ((uintptr_t)B % 16 == 0);
  if (vec) {
    float4 va[2], vb[2];
    load_vec(va, vb, A, B, i0, j0, 0, nK, nJ);
    store_vec(As[0], Bs[0], va, vb);
    __syncthreads();
    int buf = 0;
    for (int64_t k0 = 0; k0 < nK; k0 += BK) {
      const bool more = k0 + BK < nK;
      if (more) load_vec(va, vb, A, B, i0, j0, k0 + BK, nK, nJ);
      compute_tile(As[buf], Bs[buf], acc, trow, tcol);
      if (more) store_vec(As[buf ^ 1], Bs[buf ^ 1], va, vb);
      __syncthreads();
      buf ^= 1;
    }
  } else {
    scalar_pipeline(As, Bs, acc, A, B, i0, j0, nI, nK, nJ, trow, tcol);
  }
  store_c(C, acc, i0, j0, trow, tcol, nI, nJ);
}

// v4: v3's fast path with per-thread source pointers computed once and advanced by a K tile per
// step (no 64-bit index arithmetic in the loop); the general path is v2's.
extern "C" __global__ void __launch_bounds__(256, MINB) v4(float *__restrict__ C, const float *__restrict__ A,
                                                          const float *__restrict__ B, int64_t nI, int64_t nK, int64_t nJ) {
  __shared__ __align__(16) float As[2][BK][BM + PAD];
  __shared__ __align__(16) float Bs[2][BK][BN];
  float acc[8][8] = {};
  const int tcol = threadIdx.x % 16, trow = threadIdx.x / 16;
  const int64_t i0 = 128 * (int64_t)blockIdx.y, j0 = 128 * (int64_t)blockIdx.x;
  const bool vec = i0 + BM <= nI && j0 + BN <= nJ && nK % 4 == 0 && nJ % 4 == 0 && nK % BK == 0 &&
                   ((uintptr_t)A % 16 == 0) && ((uintptr_t)B % 16 == 0);
  if (vec) {
    const int l0 = threadIdx.x, l1 = threadIdx.x + 256;
    const float *pa0 = A + (i0 + l0 / 4) * nK + (l0 % 4) * 4, *pa1 = A + (i0 + l1 / 4) * nK + (l1 % 4) * 4;
    const float *pb0 = B + (int64_t)(l0 / 32) * nJ + j0 + (l0 % 32) * 4, *pb1 = B + (int64_t)(l1 / 32) * nJ + j0 + (l1 % 32) * 4;
    const int64_t bstep = BK * nJ;
    float4 a0 = *(const float4 *)pa0, a1 = *(const float4 *)pa1, b0 = *(const float4 *)pb0, b1 = *(const float4 *)pb1;
    const int ar0 = l0 / 4, ac0 = (l0 % 4) * 4, ar1 = l1 / 4, ac1 = (l1 % 4) * 4;
    const int br0 = l0 / 32, bc0 = (l0 % 32) * 4, br1 = l1 / 32, bc1 = (l1 % 32) * 4;
#define STORE(bf)                                                                                            \
  As[bf][ac0][ar0] = a0.x; As[bf][ac0 + 1][ar0] = a0.y; As[bf][ac0 + 2][ar0] = a0.z; As[bf][ac0 + 3][ar0] = a0.w; \
  As[bf][ac1][ar1] = a1.x; As[bf][ac1 + 1][ar1] = a1.y; As[bf][ac1 + 2][ar1] = a1.z; As[bf][ac1 + 3][ar1] = a1.w; \
  *(float4 *)&Bs[bf][br0][bc0] = b0; *(float4 *)&Bs[bf][br1][bc1] = b1;
    STORE(0)
    __syncthreads();
    int buf = 0;
    for (int64_t k0 = 0; k0 < nK; k0 += BK) {
      const bool more = k0 + BK < nK;
      if (more) {
        pa0 += BK; pa1 += BK; pb0 += bstep; pb1 += bstep;
        a0 = *(const float4 *)pa0; a1 = *(const float4 *)pa1; b0 = *(const float4 *)pb0; b1 = *(const float4 *)pb1;
      }
      compute_tile(As[buf], Bs[buf], acc, trow, tcol);
      if (more) { STORE(buf ^ 1) }
      __syncthreads();
      buf ^= 1;
    }
#undef STORE
  } else {
    scalar_pipeline(As, Bs, acc, A, B, i0, j0, nI, nK, nJ, trow, tcol);
  }
  store_c(C, acc, i0, j0, trow, tcol, nI, nJ);
}
