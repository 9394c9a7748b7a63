// The AVX2 body of adam.cpp's update, 8 values at a time (CMakeLists.txt builds *_avx2.cpp with
// -mavx2 -mf16c and no FMA). The scalar body's std::sqrt does not vectorise (errno): it ran
// slower than NumPy's eleven passes. Every value meets the same float32 operations in the same
// order as the scalar body and the NumPy twin (sqrt and divide are correctly rounded in both),
// so the three agree bit for bit.
#include <cstddef>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tb::kernels::avx2 {

#if defined(__AVX2__)
std::size_t adam_step(float *P, const float *G, float *M, float *V, std::size_t n, float b1, float omb1, float b2,
                      float omb2, float bias2_sqrt, float eps, float step_size) {
    const __m256 vb1 = _mm256_set1_ps(b1), vomb1 = _mm256_set1_ps(omb1), vb2 = _mm256_set1_ps(b2);
    const __m256 vomb2 = _mm256_set1_ps(omb2), vbs = _mm256_set1_ps(bias2_sqrt), veps = _mm256_set1_ps(eps);
    const __m256 vss = _mm256_set1_ps(step_size);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(G + i);
        const __m256 m = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(M + i), vb1), _mm256_mul_ps(g, vomb1));
        const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(V + i), vb2),
                                       _mm256_mul_ps(_mm256_mul_ps(g, g), vomb2));
        _mm256_storeu_ps(M + i, m);
        _mm256_storeu_ps(V + i, v);
        const __m256 d = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), vbs), veps);
        _mm256_storeu_ps(P + i, _mm256_sub_ps(_mm256_loadu_ps(P + i), _mm256_mul_ps(_mm256_div_ps(m, d), vss)));
    }
    return i;   // the caller runs the last n % 8 values
}
#else
std::size_t adam_step(float *, const float *, float *, float *, std::size_t, float, float, float, float, float, float,
                      float) {
    return 0;
}
#endif

}  // namespace tb::kernels::avx2
