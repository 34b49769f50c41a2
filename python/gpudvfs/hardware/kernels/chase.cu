// Latency benchmarks of the time suite (Wang & Chu, Sec. IV: dm_lat, l2_lat, sh_lat).
//
// global_chase: one thread follows a ring of pointers built by the launcher in global memory.
// Every load's address is the previous load's value, so no two loads overlap and the time
// per step is the full access latency. Loads use ld.global.cg (cached in L2 only), so the
// launcher picks the level: a ring much larger than L2 measures DRAM, a ring well inside L2,
// traversed once untimed first (`warm` steps), measures L2. A warm pass also fills the TLB,
// which is the case the paper measures. Latency = cycles / steps, in SM clock cycles.
// The final pointer is stored, so the chain cannot be dropped; only the last load's latency
// may overlap the closing clock read (an error of one step in `steps`). A launch continues
// from where the previous one stopped (`sink`, zero before the first): were each launch to
// restart at `start`, the DRAM ring's first `steps` slots would stay in a large L2 (8192 x
// 512 B = 4 MiB, inside an H100's 50 MB), and the "DRAM" chase would time L2 hits from the
// second launch on.
//
// shared_chase: the same for shared memory. The block copies a ring of byte offsets from
// global memory (contents unknown to the compiler) into shared memory, then one thread
// follows it. Byte offsets, not indices, so each step is a single LDS without address
// arithmetic.

template <int UNROLL>
__global__ void global_chase(const unsigned long long* start, unsigned int warm, unsigned int steps,
                             unsigned long long* sink, long long* cycles)
{
    const unsigned long long* p = *sink ? (const unsigned long long*)*sink : start;
    for (unsigned int i = 0; i < warm; ++i) {
        p = (const unsigned long long*)__ldcg(p);
    }
    const long long t0 = clock64();
    // steps is a multiple of UNROLL (the launcher rounds it)
    for (unsigned int i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            p = (const unsigned long long*)__ldcg(p);
        }
    }
    const long long t1 = clock64();
    *sink = (unsigned long long)p;
    *cycles = t1 - t0;
}

template <int WORDS, int UNROLL>
__global__ void shared_chase(const unsigned int* ring, unsigned int steps, unsigned int* sink,
                             long long* cycles)
{
    __shared__ unsigned int buf[WORDS];
    for (unsigned int i = threadIdx.x; i < WORDS; i += blockDim.x) {
        buf[i] = ring[i];
    }
    __syncthreads();
    if (threadIdx.x != 0) {
        return;
    }
    const char* base = (const char*)buf;
    unsigned int off = 0;
    const long long t0 = clock64();
    for (unsigned int i = 0; i < steps; i += UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            off = *(const unsigned int*)(base + off);
        }
    }
    const long long t1 = clock64();
    *sink = off;
    *cycles = t1 - t0;
}
