// Memory-hierarchy streams of the power suite (Guerreiro et al., Sec. IV, Fig. 3d and 3e) and
// the DRAM bandwidth benchmark of the time suite (Wang & Chu, Sec. IV-A).
//
// Copy `in` to `out` in tiles of BLOCK*UNROLL vectors of type V (float, float2 or float4),
// applying OPS multiply-adds to every component on the way (OPS = 0: a pure copy). Which level
// of the hierarchy is stressed is set by the footprint the launcher gives: a buffer several
// times larger than L2 streams from DRAM; a buffer well inside L2, copied `reps` times with
// loads that bypass L1 (CG = true: ld.global.cg), keeps the traffic in L2.
//
// The pointers are deliberately not __restrict__: `out` may alias `in` as far as the compiler
// knows, so it must redo every load in every repetition instead of proving the copy idempotent.
// BLOCK and UNROLL are compile-time so that the UNROLL accesses of a thread differ by constant
// offsets (immediates in the load/store instructions): the loop body is then the memory
// instructions plus a few loop-control instructions. The launcher makes n a multiple of
// BLOCK*UNROLL, so there is no tail to guard.

template <bool CG, typename V>
__device__ __forceinline__ V load_vec(const V* p)
{
    if (CG) {
        return __ldcg(p);
    } else {
        return *p;
    }
}

template <int OPS>
__device__ __forceinline__ float mad_chain(float c, float a)
{
    const float x = c;
#pragma unroll
    for (int k = 0; k < OPS; ++k) {
        c = c * a + x;
    }
    return c;
}

template <int OPS> __device__ __forceinline__ float apply(float v, float a) { return mad_chain<OPS>(v, a); }
template <int OPS> __device__ __forceinline__ float2 apply(float2 v, float a)
{
    return make_float2(mad_chain<OPS>(v.x, a), mad_chain<OPS>(v.y, a));
}
template <int OPS> __device__ __forceinline__ float4 apply(float4 v, float a)
{
    return make_float4(mad_chain<OPS>(v.x, a), mad_chain<OPS>(v.y, a),
                       mad_chain<OPS>(v.z, a), mad_chain<OPS>(v.w, a));
}

template <typename V, int OPS, bool CG, int BLOCK, int UNROLL>
__global__ void __launch_bounds__(BLOCK)
stream(const V* in, V* out, unsigned int n, float a, unsigned int reps)
{
    constexpr unsigned int TILE = BLOCK * UNROLL;
    for (unsigned int r = 0; r < reps; ++r) {
        for (unsigned int base = blockIdx.x * TILE + threadIdx.x; base < n; base += gridDim.x * TILE) {
            V v[UNROLL];
            // all loads first, then all stores: UNROLL requests in flight per thread
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                v[u] = load_vec<CG>(in + base + u * BLOCK);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                (out + base)[u * BLOCK] = apply<OPS>(v[u], a);
            }
        }
    }
}
