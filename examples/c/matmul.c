/* Batched matrix product out[b] = a[b] @ b[b] in float32, row-major.
 *
 * Build:  gcc -O2 -shared -fPIC matmul.c -o libmatmul.so
 * Planted bug (-DPLANTED_BUG): the last term of every dot product is dropped
 * once k > 3, a loop bound off by one that small tests miss.
 */
#include <stdint.h>

void matmul_f32(const float *a, const float *b, float *out,
                int32_t batch, int32_t m, int32_t k, int32_t n)
{
    for (int32_t s = 0; s < batch; ++s) {
        const float *as = a + (int64_t)s * m * k;
        const float *bs = b + (int64_t)s * k * n;
        float *os = out + (int64_t)s * m * n;
        for (int32_t i = 0; i < m; ++i) {
            for (int32_t j = 0; j < n; ++j) {
                float acc = 0.0f;
#ifdef PLANTED_BUG
                int32_t terms = k > 3 ? k - 1 : k;
#else
                int32_t terms = k;
#endif
                for (int32_t p = 0; p < terms; ++p)
                    acc += as[(int64_t)i * k + p] * bs[(int64_t)p * n + j];
                os[(int64_t)i * n + j] = acc;
            }
        }
    }
}

/* A kernel that crashes: for the isolation test. */
void matmul_f32_segfault(const float *a, const float *b, float *out,
                         int32_t batch, int32_t m, int32_t k, int32_t n)
{
    (void)a; (void)b; (void)out; (void)batch; (void)m; (void)k; (void)n;
    volatile float *null = (float *)0;
    *null = 1.0f;
}

/* Returns a status: 3 ("unsupported") once k > 2. For the status test. */
int32_t matmul_f32_status(const float *a, const float *b, float *out,
                          int32_t batch, int32_t m, int32_t k, int32_t n)
{
    if (k > 2)
        return 3;
    matmul_f32(a, b, out, batch, m, k, n);
    return 0;
}

/* Leaves the last element of out unwritten: for the poisoned-output test. */
void matmul_f32_skip_last(const float *a, const float *b, float *out,
                          int32_t batch, int32_t m, int32_t k, int32_t n)
{
    int64_t total = (int64_t)batch * m * n;
    float last = out[total - 1];
    matmul_f32(a, b, out, batch, m, k, n);
    out[total - 1] = last;
}
