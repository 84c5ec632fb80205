/* runtime/rt_kernels.c: the micro-kernels of `call` statements, and the
 * packing of weights into the layout they stream best.
 *
 * Compiled into kiln with -O3 -march=native -ffp-contract=fast (the
 * Makefile), where JIT code calls them: tcc neither vectorises nor fuses
 * a multiply and an add. Pasted with the rest of the runtime into every
 * generated file, which cc builds with the same flags (gnu17 contracts
 * by default), so the cc build computes the same numbers. Portable C:
 * GCC vector extensions of 16 floats (one AVX-512 register, two AVX2
 * ones), nothing of a particular instruction set.
 *
 * rt_gemm: C[m][n] += A[m][k] B[k][n], row-major with row strides lda,
 * ldb, ldc (elements; columns contiguous). Every element of C adds its k
 * products to itself one after the other, in k order, each a fused
 * multiply-add where the compiler contracts: the order, so the numbers,
 * never depend on how the caller blocks rows, columns or the reduction
 * around the call (a reduction split into calls over k ranges continues
 * the same sum), nor on threads. Fast when n is a multiple of 16 and
 * m * n <= 256 (16 vector accumulators: MR x NR = 16 x 16, 8 x 32, 4 x
 * 64, what the tile pass asks for); any other shape is computed right,
 * in pieces of those or, for the last n % 16 columns, one element at a
 * time.
 *
 * rt_pack_panels: a weight [batch][n][k] (rows of k) becomes panels
 * [batch][n / nr][k][nr]: per k, the nr weights of nr consecutive rows
 * side by side, so that the kernel reads B = one panel with ldb = nr, a
 * contiguous stream: one vector load per k feeds every row of A. */
#include "kiln_rt.h"

#include <math.h>
#include <string.h>

typedef float kr_vec __attribute__((vector_size(64), aligned(4)));  /* any address */
typedef float kr_acc __attribute__((vector_size(64)));

enum { KR_LANES = 16, KR_ACCS = 16 };

/* One register tile: m rows of nv vectors, m * nv <= KR_ACCS. Inlined
 * with constant m and nv, the accumulators live in registers. */
static inline __attribute__((always_inline)) void kr_tile(int m, int nv, int64_t k,
                                                          const float *a, int64_t lda,
                                                          const float *b, int64_t ldb,
                                                          float *c, int64_t ldc)
{
    kr_acc acc[KR_ACCS][4];
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            acc[r][v] = *(const kr_vec *)(c + r * ldc + KR_LANES * v);
    for (int64_t kk = 0; kk < k; kk++) {
        kr_acc w[4];
        for (int v = 0; v < nv; v++)
            w[v] = *(const kr_vec *)(b + kk * ldb + KR_LANES * v);
        for (int r = 0; r < m; r++) {
            float x = a[r * lda + kk];
            for (int v = 0; v < nv; v++)
                acc[r][v] += x * w[v];
        }
    }
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            *(kr_vec *)(c + r * ldc + KR_LANES * v) = acc[r][v];
}

#define KR_CASE(M, NV)                                                       \
    case M:                                                                  \
        kr_tile(M, NV, k, a, lda, b, ldb, c, ldc);                           \
        return;

/* m rows (1 <= m <= KR_ACCS / nv) of nv vectors. */
static void kr_rows(int64_t m, int nv, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc)
{
    if (nv == 4)
        switch (m) {
            KR_CASE(1, 4) KR_CASE(2, 4) KR_CASE(3, 4) KR_CASE(4, 4)
        }
    if (nv == 2)
        switch (m) {
            KR_CASE(1, 2) KR_CASE(2, 2) KR_CASE(3, 2) KR_CASE(4, 2)
            KR_CASE(5, 2) KR_CASE(6, 2) KR_CASE(7, 2) KR_CASE(8, 2)
        }
    if (nv == 1)
        switch (m) {
            KR_CASE(1, 1) KR_CASE(2, 1) KR_CASE(3, 1) KR_CASE(4, 1)
            KR_CASE(5, 1) KR_CASE(6, 1) KR_CASE(7, 1) KR_CASE(8, 1)
            KR_CASE(9, 1) KR_CASE(10, 1) KR_CASE(11, 1) KR_CASE(12, 1)
            KR_CASE(13, 1) KR_CASE(14, 1) KR_CASE(15, 1) KR_CASE(16, 1)
        }
}

#undef KR_CASE

void rt_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
             int64_t ldb, float *c, int64_t ldc)
{
    int64_t j = 0;
    for (; j + KR_LANES <= n;) {
        int nv = n - j >= 4 * KR_LANES ? 4 : n - j >= 2 * KR_LANES ? 2 : 1;
        int64_t mr = KR_ACCS / nv;
        for (int64_t r = 0; r < m; r += mr)
            kr_rows(m - r < mr ? m - r : mr, nv, k, a + r * lda, lda, b + j, ldb,
                    c + r * ldc + j, ldc);
        j += (int64_t)nv * KR_LANES;
    }
    for (; j < n; j++)                   /* the last n % 16 columns */
        for (int64_t r = 0; r < m; r++) {
            float s = c[r * ldc + j];
            for (int64_t kk = 0; kk < k; kk++)      /* fused, as the vectors' */
                s = fmaf(a[r * lda + kk], b[kk * ldb + j], s);
            c[r * ldc + j] = s;
        }
}

int rt_pack_panels(float **w, int64_t batch, int64_t n, int64_t k, int64_t nr, rt_err *e)
{
    if (batch < 1 || n < 1 || k < 1 || nr < 1 || n % nr)
        return rt_errf(e, RT_EINTERNAL, "cannot pack [%lld][%lld][%lld] in panels of %lld",
                       (long long)batch, (long long)n, (long long)k, (long long)nr);
    size_t count = (size_t)batch * (size_t)n * (size_t)k;
    float *src = *w, *dst = rt_alloc(count * sizeof *dst);
    if (!dst)
        return rt_errf(e, RT_EINTERNAL, "out of memory packing a weight (%lld bytes)",
                       (long long)(count * sizeof *dst));
    for (int64_t q = 0; q < batch; q++) {
        const float *s = src + q * n * k;
        float *d = dst + q * n * k;
        for (int64_t p = 0; p < n / nr; p++)
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t i = 0; i < nr; i++)
                    d[(p * k + kk) * nr + i] = s[(p * nr + i) * k + kk];
    }
    rt_free(src);
    *w = dst;
    return 0;
}
