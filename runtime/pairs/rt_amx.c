/* runtime/pairs/rt_amx.c: rt_gemm_bf16's calls of 16 rows or more on the
 * CPU's AMX tiles (tdpbf16ps), where it has them.
 *
 * Contract (rt_gemm_bf16_amx): C[m][n] += A[m][k] B[k][n] as rt_gemm_bf16
 * takes them (A f32, B bf16, row strides lda, ldb, ldc), for m >= 16 and n
 * a multiple of 16; returns 1 when done, 0 when this machine cannot (no
 * AMX in the CPU, the kernel or this build; KILN_AMX=off in the
 * environment), and the caller computes the call itself. Lossy: A is
 * rounded to bf16 (to nearest even) as it is read, and the tiles add
 * their products in pairs of k, in the hardware's order and rounding
 * (tdpbf16ps), not rt_gemm's one fused multiply-add at a time. The numbers
 * depend only on the call's operands, never on threads.
 *
 * Algorithm (rt_pairs_drive, which vdpbf16ps's path shares): columns in
 * blocks of 64, the reduction in chunks of RT_AMX_K, rows in blocks of
 * 64. Per chunk, its columns of B are interleaved in pairs of k (the
 * layout tdpbf16ps reads: per pair, 16 columns x 2 halves), once for all
 * the rows; per block of rows, the chunk's rows of A become bf16 rows
 * (rows past m and k past the chunk zero), both in the thread's stack (a
 * call of n <= 64 columns rounds each row of A once; a call with a scope,
 * rt_gemm_bf16_kept's, finds A's rows rounded once for the scope, rp_rows,
 * in the thread's kept memory); then
 * (rt_amx_blocks) each 32 x 32 block of C is four tiles, loaded, fed the chunk 32 k at a time (two
 * tiles of A, two of B) and stored. Zeros add nothing, so padding is
 * exact. A block of C with rows or columns past the call's goes through a
 * zero-padded copy.
 *
 * The machinery (rt_amx_begin, rt_amx_rows, rt_amx_cols, rt_amx_blocks,
 * rt_amx_end: rt_pairs.h) serves qgemm's AMX path too
 * (runtime/quant/rt_gemm_q_amx.c), which pairs dequantized weights
 * instead; the rows, the columns and the driver (built wherever the CPU
 * has AVX512-BF16) serve vdpbf16ps's path (rt_bf16dp.c) on CPUs without
 * the tiles.
 *
 * The tiles need the kernel's leave (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XTILEDATA, once a process) and a configuration per thread, loaded and
 * released by every call. Measured on the Zen 5 machine (AMX-BF16), one
 * thread, a 32 x 32 tile over k = 768 in L2: 1400-1450 GFLOP/s against
 * 190-197 for rt_gemm_bf16's exact widening (docs/benchmarks.md). */
#include "runtime/core/rt_core.h"
#include "runtime/rt_pairs.h"

#include <stdlib.h>
#include <string.h>

#ifdef RT_BF16DP
#include <immintrin.h>

void rt_amx_rows(uint16_t *dst, int64_t mb, int64_t kc, const float *a, int64_t lda)
{
    int64_t kp = (kc + 31) & ~(int64_t)31, mp = (mb + 31) & ~(int64_t)31, full = kc & ~(int64_t)31;
    for (int64_t r = 0; r < mb; r++) {
        const float *x = a + r * lda;
        uint16_t *d = dst + r * RT_AMX_K;
        for (int64_t kk = 0; kk < full; kk += 32)
            _mm512_storeu_si512(d + kk, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + kk + 16),
                                                                     _mm512_loadu_ps(x + kk)));
        if (full < kc) {
            int64_t left = kc - full;
            __mmask16 lo = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
            __mmask16 hi = left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
            __m512 vl = _mm512_maskz_loadu_ps(lo, x + full), vh = _mm512_maskz_loadu_ps(hi, x + full + 16);
            _mm512_storeu_si512(d + full, (__m512i)_mm512_cvtne2ps_pbh(vh, vl));
        }
    }
    for (int64_t r = mb; r < mp; r++)
        memset(dst + r * RT_AMX_K, 0, (size_t)kp * sizeof *dst);
}

void rt_amx_cols(uint16_t *dst, int64_t nb, int64_t kc, const uint16_t *b, int64_t ldb)
{
    static const uint16_t even[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                      8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    __m512i ilo = _mm512_loadu_si512(even), ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    int64_t kp = (kc + 31) & ~(int64_t)31, np = (nb + 31) & ~(int64_t)31;
    for (int64_t j = 0; j < np; j += 32) {
        int64_t cols = nb - j < 32 ? nb - j : 32;
        __mmask32 mask = cols >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << cols) - 1;
        uint16_t *t = dst + (j / 16) * (RT_AMX_K / 2) * 2 * 16;
        const uint16_t *s = b + j;
        for (int64_t p = 0; p < kp / 2; p++, t += 2 * 16, s += 2 * ldb) {
            __m512i r0, r1;
            if (cols == 32 && 2 * p + 1 < kc) {
                r0 = _mm512_loadu_si512(s);
                r1 = _mm512_loadu_si512(s + ldb);
            } else {
                r0 = 2 * p < kc ? _mm512_maskz_loadu_epi16(mask, s) : _mm512_setzero_si512();
                r1 = 2 * p + 1 < kc ? _mm512_maskz_loadu_epi16(mask, s + ldb) : _mm512_setzero_si512();
            }
            _mm512_storeu_si512(t, _mm512_permutex2var_epi16(r0, ilo, r1));
            _mm512_storeu_si512(t + (RT_AMX_K / 2) * 2 * 16, _mm512_permutex2var_epi16(r0, ihi, r1));
        }
    }
}

/* A's rows for scope, rounded now or by an earlier call of the scope (per
 * chunk of RT_AMX_K values of k, per block of RP_M rows, rt_amx_rows's
 * RP_M rows, as the driver's stack copy holds them); NULL when they
 * cannot be kept (no scope, no memory). Measured in a stories110M-shaped
 * bf16 prefill on the Zen 4 machine (vdpbf16ps), whose gemms of 64
 * columns each rounded their A again: docs/benchmarks.md. */
enum { RP_M = 64 };

static const uint16_t *rp_rows(uint64_t scope, int64_t m, int64_t k, const float *a, int64_t lda)
{
    int64_t nb = (m + RP_M - 1) / RP_M, nc = (k + RT_AMX_K - 1) / RT_AMX_K;
    if (!scope || nb > INT64_MAX / RP_M / RT_AMX_K / 2 / nc)
        return NULL;
    rt_kept_key key = {scope, a, lda, m, k, 0};
    int fill;
    uint16_t *rows = rt_kept(&key, (size_t)(nb * nc * RP_M * RT_AMX_K) * sizeof *rows, &fill);
    for (int64_t c = 0; rows && fill && c < nc; c++)
        for (int64_t r = 0; r < nb; r++) {
            int64_t k0 = c * RT_AMX_K, i0 = r * RP_M;
            rt_amx_rows(rows + (c * nb + r) * RP_M * RT_AMX_K, m - i0 < RP_M ? m - i0 : RP_M,
                        k - k0 < RT_AMX_K ? k - k0 : RT_AMX_K, a + i0 * lda + k0, lda);
        }
    return rows;
}

void rt_pairs_drive(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                    rt_pairs_block *block)
{
    enum { PN = 64 };
    _Alignas(64) uint16_t ab[RP_M * RT_AMX_K], bb[PN * RT_AMX_K];
    const uint16_t *kept = rp_rows(scope, m, k, a, lda);
    int64_t nb = (m + RP_M - 1) / RP_M;
    for (int64_t j0 = 0; j0 < n; j0 += PN) {
        int64_t nc = n - j0 < PN ? n - j0 : PN;
        for (int64_t k0 = 0; k0 < k; k0 += RT_AMX_K) {
            int64_t kc = k - k0 < RT_AMX_K ? k - k0 : RT_AMX_K, kp = (kc + 31) & ~(int64_t)31;
            rt_amx_cols(bb, nc, kc, b + k0 * ldb + j0, ldb);
            for (int64_t i0 = 0; i0 < m; i0 += RP_M) {
                int64_t mb = m - i0 < RP_M ? m - i0 : RP_M;
                const uint16_t *rows = ab;
                if (kept)
                    rows = kept + (k0 / RT_AMX_K * nb + i0 / RP_M) * RP_M * RT_AMX_K;
                else
                    rt_amx_rows(ab, mb, kc, a + i0 * lda + k0, lda);
                block(mb, nc, kp, rows, bb, c + i0 * ldc + j0, ldc);
            }
        }
    }
}

#endif

#ifdef RT_AMX
#include <cpuid.h>

enum { RA_K = RT_AMX_K, RA_T = 16 };

typedef struct {
    uint8_t palette, start, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) ra_cfg;

/* The kernel's leave to use the tile data (XTILEDATA is feature 18): the
 * raw system call, as syscall() is not in strict C's headers. */
static int ra_permit(void)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(158L), "D"(0x1023L), "S"(18L)
                     : "rcx", "r11", "memory");
    return r == 0;
}

/* 1 where the tiles may be used: the CPU has AMX-TILE and AMX-BF16
 * (CPUID 7.0 EDX bits 24 and 22), the kernel grants them, and KILN_AMX is
 * not "off". Decided once; two threads deciding at once agree. */
static int ra_usable(void)
{
    static int state;                   /* 0 unknown, 1 yes, -1 no */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        unsigned a, b, c, d;
        const char *env = getenv("KILN_AMX");
        s = -1;
        if (!(env && strcmp(env, "off") == 0) && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
            (d >> 24 & 1) && (d >> 22 & 1) && ra_permit())
            s = 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 1;
}

int rt_amx_begin(void)
{
    const ra_cfg cfg = {.palette = 1,
                        .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                        .rows = {16, 16, 16, 16, 16, 16, 16, 16}};
    if (!ra_usable())
        return 0;
    /* Not gcc's _tile_loadconfig, whose operand is the configuration's
     * first 8 bytes: the compiler may then store no more of it. */
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
    return 1;
}

void rt_amx_end(void)
{
    _tile_release();
}

/* One 32 x 32 block of C (rows i, columns j of the chunk's buffers) plus
 * the chunk: tiles 0-3 C, 4-5 A, 6-7 B. c has ldc; a full block is read
 * in place, a partial one (rows mr, columns nr) through a padded copy. */
static void ra_block(float *c, int64_t ldc, int64_t mr, int64_t nr, const uint16_t *ab,
                     const uint16_t *bb, int64_t kp)
{
    _Alignas(64) float pad[32 * 32];
    float *t = c;
    int64_t ld = ldc;
    if (mr < 32 || nr < 32) {
        memset(pad, 0, sizeof pad);
        for (int64_t r = 0; r < mr; r++)
            memcpy(pad + r * 32, c + r * ldc, (size_t)nr * sizeof(float));
        t = pad;
        ld = 32;
    }
    size_t s = (size_t)ld * sizeof(float), tb = (size_t)(RA_K / 2) * 2 * RA_T;
    _tile_loadd(0, t, s);
    _tile_loadd(1, t + 16, s);
    _tile_loadd(2, t + 16 * ld, s);
    _tile_loadd(3, t + 16 * ld + 16, s);
    for (int64_t kk = 0; kk < kp; kk += 32) {
        _tile_loadd(4, ab + kk, RA_K * 2);
        _tile_loadd(5, ab + 16 * RA_K + kk, RA_K * 2);
        _tile_loadd(6, bb + kk * RA_T, 64);
        _tile_loadd(7, bb + tb + kk * RA_T, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, t, s);
    _tile_stored(1, t + 16, s);
    _tile_stored(2, t + 16 * ld, s);
    _tile_stored(3, t + 16 * ld + 16, s);
    if (t == pad)
        for (int64_t r = 0; r < mr; r++)
            memcpy(c + r * ldc, pad + r * 32, (size_t)nr * sizeof(float));
}

void rt_amx_blocks(int64_t m, int64_t n, int64_t kp, const uint16_t *a, const uint16_t *b,
                   float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i += 32)
        for (int64_t j = 0; j < n; j += 32)
            ra_block(c + i * ldc + j, ldc, m - i < 32 ? m - i : 32, n - j < 32 ? n - j : 32,
                     a + i * RA_K, b + (j / RA_T) * (RA_K / 2) * 2 * RA_T, kp);
}

int rt_gemm_bf16_amx(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    if (m < 16 || n % 16 || k < 1 || !rt_amx_begin())
        return 0;
    rt_pairs_drive(scope, m, n, k, a, lda, b, ldb, c, ldc, rt_amx_blocks);
    rt_amx_end();
    return 1;
}

#else

int rt_gemm_bf16_amx(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    (void)scope, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    return 0;
}

#endif
