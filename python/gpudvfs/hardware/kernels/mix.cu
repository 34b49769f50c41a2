// Mixed-component benchmarks of the power suite (Guerreiro et al., Sec. IV: "a mix of the
// several used components").
//
// Per element loaded: SP single-precision multiply-adds, DP double-precision multiply-adds,
// INT integer multiply-adds, SF reciprocal square roots (one SFU instruction each) and SH
// shared-memory load/store pairs, each in its own dependency chain so the units work side
// by side. A count of 0 leaves that component out. Compiled with -ftz=true so rsqrtf is a
// single MUFU instruction. `a` is a runtime argument (the launcher passes -1, which keeps
// every chain finite) and all chains feed the stored value, so nothing can be folded away.

template <int SP, int DP, int INT, int SF, int SH, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
mix(const float* __restrict__ in, float* __restrict__ out, unsigned int n, float a)
{
    __shared__ float buf[BLOCK];
    volatile float* vbuf = buf;  // volatile: every shared access is really issued
    const unsigned int t = threadIdx.x;
    const double ad = (double)a;
    const int ai = (int)a;
    const unsigned int stride = gridDim.x * BLOCK;
    for (unsigned int i = blockIdx.x * BLOCK + t; i < n; i += stride) {
        const float x = in[i];
        const double dx = (double)x;
        const int ix = __float_as_int(x);
        float f = x, s = fabsf(x) + 1.0f, m = x;
        double d = dx;
        int k = ix;
#pragma unroll
        for (int j = 0; j < SP; ++j) f = f * a + x;
#pragma unroll
        for (int j = 0; j < DP; ++j) d = d * ad + dx;
#pragma unroll
        for (int j = 0; j < INT; ++j) k = k * ai + ix;
#pragma unroll
        for (int j = 0; j < SF; ++j) s = rsqrtf(s);
        if (SH > 0) {
            vbuf[t] = m;
#pragma unroll
            for (int j = 0; j < SH; ++j) {
                m = vbuf[t];
                vbuf[BLOCK - 1 - t] = m;
            }
        }
        out[i] = ((f + (float)d) + ((float)k + s)) + m;
    }
}
