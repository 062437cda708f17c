// The scalar codecs of h3/numeric.cuh one element at a time, so that a GPU test can compare each
// with formats.py on the values random data rarely reaches: NaN of either sign, infinities, -0,
// the saturation edges, the rounding ties, subnormals. Every quantizer builds on these codecs.
#include "h3/numeric.cuh"

namespace h3 {

// Per element i < n of x: bf16_bits[i] = RN bf16 of x[i], e4m3_code[i] / ue4m3_code[i] / e2m1_code
// [i] the encoders' bytes. Per code c < 256: e4m3_value[c] = e4m3_to_f32(c), and e2m1_pair[c]
// the bf16 pair that e2m1x2_scaled_bf16x2 decodes from byte c with scale 1 (low nibble in the
// low half). Per scale byte s < 256 and code c < 16: e2m1_scaled[s, c] the four bf16 pairs that
// e2m1x8_scaled_bf16x8 decodes from the word of eight codes c with the scale pair that
// e4m3_to_bf16x2 makes of s, so that every code meets every scale at every position of the word.
__global__ void __launch_bounds__(256) codec_probe_smxx(
    const float* __restrict__ x, int n, u16* __restrict__ bf16_bits, u8* __restrict__ e4m3_code,
    u8* __restrict__ ue4m3_code, u8* __restrict__ e2m1_code, float* __restrict__ e4m3_value,
    u32* __restrict__ e2m1_pair, uint4* __restrict__ e2m1_scaled) {
  const int stride = gridDim.x * blockDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float f = x[i];
    bf16_bits[i] = f32_to_bf16(f);
    e4m3_code[i] = e4m3(f);
    ue4m3_code[i] = ue4m3(f);
    e2m1_code[i] = static_cast<u8>(e2m1(f));
  }
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < 256; c += stride) {
    e4m3_value[c] = e4m3_to_f32(static_cast<u8>(c));
    e2m1_pair[c] = e2m1x2_scaled_bf16x2(static_cast<u32>(c), 0, 1.f);
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 256 * 16; i += stride) {
    const u32 codes = 0x11111111u * static_cast<u32>(i % 16);
    e2m1_scaled[i] = e2m1x8_scaled_bf16x8(codes, e4m3_to_bf16x2(static_cast<u8>(i / 16)));
  }
}

}  // namespace h3
