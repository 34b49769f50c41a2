// Shared-memory sweep of the power suite (Guerreiro et al., Sec. IV, Fig. 3c).
//
// Per element loaded from global memory, ITERS rounds of one shared-memory load and one
// shared-memory store. Each thread reads its own slot and writes the mirrored slot
// (BLOCK - 1 - tid): within a warp both patterns hit 32 distinct banks, so neither the loads
// nor the stores have bank conflicts. Threads race on the mirrored slots on purpose; the data
// are irrelevant, only the traffic counts.
//
// The shared array is accessed through a volatile pointer: without it the compiler may
// forward the stored value to the next load and drop all but one access per element.
// BLOCK is a template parameter so the launch block size and the array size agree by
// construction (the launcher uses the same value).

template <typename T, int ITERS, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
shared_rw(const T* __restrict__ in, T* __restrict__ out, unsigned int n)
{
    __shared__ T buf[BLOCK];
    volatile T* vbuf = buf;
    const unsigned int t = threadIdx.x;
    const unsigned int stride = gridDim.x * BLOCK;
    for (unsigned int i = blockIdx.x * BLOCK + t; i < n; i += stride) {
        T x = in[i];
        vbuf[t] = x;
#pragma unroll
        for (int k = 0; k < ITERS; ++k) {
            x = vbuf[t];
            vbuf[BLOCK - 1 - t] = x;
        }
        out[i] = x;
    }
}
