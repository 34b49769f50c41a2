// Arithmetic-unit sweeps of the power suite (Guerreiro et al., Sec. IV, Fig. 3a): INT, SP, DP.
//
// One template serves all three units: T selects the unit (int -> IMAD, float -> FFMA,
// double -> DFMA) and OPS is the number of multiply-adds per chain done for every element
// loaded, i.e. the arithmetic-intensity knob of the sweep. Every thread walks the input with
// a grid-stride loop: one load, 4*OPS dependent multiply-adds in four independent chains
// (enough instruction-level parallelism to fill the pipelines), one store. Small OPS keeps
// DRAM busy, large OPS keeps the arithmetic unit busy.
//
// Why the compiler cannot remove the work: `a` is a kernel argument (unknown at compile
// time), every chain feeds the stored value, and the store always happens. The launcher
// passes a = -1, so each chain alternates between two finite values (r -> x - r): operands
// keep toggling without overflowing to inf or NaN.

// Distinct starting values per chain. For int they are xor-ed, not added: from r1 = x + 1 the
// compiler proves r1 = r0 + a^k after k steps and computes one chain instead of two.
__device__ __forceinline__ int seed(int x, int k) { return x ^ k; }
__device__ __forceinline__ float seed(float x, int k) { return x + float(k); }
__device__ __forceinline__ double seed(double x, int k) { return x + double(k); }

template <typename T, int OPS>
__global__ void arith(const T* __restrict__ in, T* __restrict__ out, unsigned int n, T a)
{
    const unsigned int stride = gridDim.x * blockDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const T x = in[i];
        T r0 = x, r1 = seed(x, 1), r2 = seed(x, 2), r3 = seed(x, 3);
#pragma unroll
        for (int k = 0; k < OPS; ++k) {
            r0 = r0 * a + x;
            r1 = r1 * a + x;
            r2 = r2 * a + x;
            r3 = r3 * a + x;
        }
        out[i] = (r0 + r1) + (r2 + r3);
    }
}
