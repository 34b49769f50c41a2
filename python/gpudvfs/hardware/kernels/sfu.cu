// Special-function-unit sweep of the power suite (Guerreiro et al., Sec. IV, Fig. 3b).
//
// Same structure as arith.cu with special functions instead of multiply-adds: per element
// loaded, OPS steps over four independent chains: reciprocal square root, square root,
// 2^log2(r) and log2(2^r) (six SFU operations a step).
//
// Each function is written as its one-instruction PTX approximation (.approx.ftz), which the
// assembler maps onto a single MUFU instruction. Plain CUDA C does not guarantee that: the
// accurate library functions run polynomials on the SP units and the fast intrinsics for sin/cos
// add an FMUL per call. The asm statements are opaque to the compiler front end; they are not
// volatile, because their results are all used (every chain feeds the stored sum) and the
// scheduler may interleave them. A reciprocal chain is deliberately absent: the PTX assembler
// folds rcp(rcp(r)) into r even from asm (seen in the disassembly), halving the work.
//
// Values stay finite and positive: the chains start at |x| + 1 > 0; r -> 1/sqrt(r) and
// r -> sqrt(r) converge to 1, and 2^log2(r) and log2(2^r) return r (within the approximation).

__device__ __forceinline__ float sf_rsqrt(float x) { float y; asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float sf_sqrt(float x)  { float y; asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float sf_lg2(float x)   { float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float sf_ex2(float x)   { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }

template <int OPS>
__global__ void sfu(const float* __restrict__ in, float* __restrict__ out, unsigned int n)
{
    const unsigned int stride = gridDim.x * blockDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float pos = fabsf(in[i]) + 1.0f;
        float r0 = pos, r1 = pos, r2 = pos, r3 = pos;
#pragma unroll
        for (int k = 0; k < OPS; ++k) {
            r0 = sf_rsqrt(r0);
            r1 = sf_sqrt(r1);
            r2 = sf_ex2(sf_lg2(r2));
            r3 = sf_lg2(sf_ex2(r3));
        }
        out[i] = (r0 + r1) + (r2 + r3);
    }
}
