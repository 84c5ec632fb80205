/* runtime/gen/rt_decode.c: a decoder's steps as `generate` and `chat`
 * run them (rt_tok.h "decoding"): the decoder contract checked, the
 * buffers of one call, a decode step, and a prefill from any position.
 *
 * Prefill of ids[0, n) at positions pos .. pos + n - 1: a chunk of C
 * tokens through the prefill variant (rt_model.run_chunk) gives the
 * logits of its last row alone (the classifier runs on that row only,
 * ir/decoder.c), so the chunks are laid out from the end: the last q =
 * n / C whole chunks end at the prompt's last token; before them, where
 * the program has the rest's chunk of R < C tokens (rt_model.run_rest),
 * r = (n - q C) / R whole chunks of R; and the h tokens before those (n -
 * 1 when q = r = 0, the last token then a decode step) go first, as one
 * chunk of the smaller size (R, else C) padded past them when at least
 * prefill_min of them are left and a whole such chunk fits in the cache,
 * else one by one through the decode step; their logits are not needed. A
 * padded chunk's rows past its tokens repeat its last token at the next
 * positions: the cache rows they write are written again (by the next
 * chunk or decode step, at its position) before any attention reads
 * them (attention reads rows 0 .. its own position), so they never count.
 *
 * What a chunk is worth (rt_dec_chunk_min): a chunk's cost over a decode
 * step's, rounded up, each the sum of its kernels' roofline times (the
 * chunk's kernels are those named NAME@C, a batch variant's NAME@B), max(FLOPs / (peak / 3), bytes
 * / read): a whole prefill runs at about a third of the FMA peak
 * (docs/benchmarks.md). With the machine's figures (rt_model.machine),
 * else this project's (485 GFLOP/s, 29.8 GB/s). At least 2, at most C.
 * Fixed per program: which variant a token goes through never depends
 * on timing.
 *
 * Stop strings (rt_stop_scan), which generate and serve end text at: the
 * first occurrence at the lowest offset, else what may begin one held. */
#include "runtime/gen/rt_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rt_dec_contract(rt_dec *d, const rt_model *md, rt_err *e)
{
    const rt_tensor_info *in = md->inputs, *out = md->outputs;
    d->md = md;
    d->slotted = md->ninputs == 3 && !strcmp(in[2].name, "slots") && in[2].dtype == RT_I32 &&
                 in[2].rank == 1 && in[2].dims[0] == 1;
    if ((md->ninputs != 2 && !d->slotted) || md->noutputs != 1 || md->nstates < 1 ||
        strcmp(in[0].name, "tokens") ||
        strcmp(in[1].name, "positions") || in[0].dtype != RT_I32 || in[1].dtype != RT_I32 ||
        in[0].rank != 1 || in[0].dims[0] != 1 || strcmp(out[0].name, "logits") ||
        out[0].rank != 2 || out[0].dims[0] != 1 || md->states[0].rank < 1 + d->slotted)
        return rt_errf(e, RT_EINVAL, RT_NOT_A_DECODER, md->name);
    d->V = out[0].dims[1];
    d->S = md->states[0].dims[d->slotted];
    d->C = md->run_chunk && md->chunk > 1 ? md->chunk : 1;
    d->R = d->C > 1 && md->run_rest && md->rest > 1 && md->rest < d->C ? md->rest : 1;
    d->B = d->slotted && md->run_batch && md->batch > d->C ? md->batch : d->C;
    d->prefill_min = rt_dec_chunk_min(md, d->R > 1 ? d->R : d->C);
    return 0;
}

int64_t rt_dec_chunk_min(const rt_model *md, int64_t C)
{
    double peak = md->machine.peak > 0 ? md->machine.peak : 485;
    double read = md->machine.read > 0 ? md->machine.read : 29.8;
    double step = 0, chunk = 0;
    char at[24];
    snprintf(at, sizeof at, "@%lld", (long long)C);
    for (int i = 0; i < md->nkernels; i++) {
        const rt_kernel_info *k = &md->kernels[i];
        const char *v = strrchr(k->name, '@');          /* a variant's: @C, @batch */
        double f = k->flops * 3 / peak, b = k->bytes / read, t = f > b ? f : b;
        if (!v)
            step += t;
        else if (!strcmp(v, at))
            chunk += t;
    }
    double r = step > 0 ? chunk / step : 2;
    int64_t n = r < (double)C ? (int64_t)r : C;
    n += n < r && n < C;                            /* rounded up */
    return n < 2 ? 2 : n;
}

int rt_dec_buffers(rt_dec *d, rt_err *e)
{
    d->logits = malloc(sizeof *d->logits * (size_t)(d->B * d->V));
    d->tk = malloc(sizeof *d->tk * (size_t)d->B);
    d->ps = malloc(sizeof *d->ps * (size_t)d->B);
    d->sl = calloc((size_t)d->B, sizeof *d->sl);
    d->scratch = malloc(8 * (size_t)d->V);
    if (!d->logits || !d->tk || !d->ps || !d->sl || !d->scratch)
        return rt_errf(e, RT_EINTERNAL, "out of memory");
    return 0;
}

int rt_dec_call(rt_dec *d, int chunk, rt_err *e)
{
    const void *in[3] = {d->tk, d->ps, d->sl};
    void *out[1] = {d->logits};
    int rc = chunk == 3 ? d->md->run_rest(d->h, in, out)
             : chunk == 2 ? d->md->run_batch(d->h, in, out)
             : chunk ? d->md->run_chunk(d->h, in, out) : d->md->run(d->h, in, out);
    if (rc) {
        const char *msg = d->md->error(d->h);
        return rt_errf(e, rc >= RT_EINVAL && rc <= RT_EINTERNAL ? rc : RT_EINTERNAL, "%s",
                       msg ? msg : "the model failed without a message");
    }
    return 0;
}

/* ids[0, k) at pos: one chunk of C (chunk 1) or R (chunk 3) tokens,
 * padded when k is fewer, else (chunk 0) k decode steps. */
static int dec_run(rt_dec *d, const int32_t *ids, int64_t pos, int64_t k, int chunk, rt_err *e)
{
    int64_t rows = chunk == 3 ? d->R : chunk ? d->C : 1;
    for (int64_t j = 0; j < (chunk ? 1 : k); j++) {
        for (int64_t i = 0; i < rows; i++) {
            d->tk[i] = ids[chunk ? (i < k ? i : k - 1) : j];
            d->ps[i] = (int32_t)(pos + (chunk ? i : j));
            d->sl[i] = d->slot;
        }
        int rc = rt_dec_call(d, chunk, e);
        if (rc)
            return rc;
    }
    return 0;
}

int rt_dec_prefill(rt_dec *d, const int32_t *ids, int64_t pos, int64_t n, rt_err *e)
{
    if (n <= 0)
        return 0;
    int64_t q = d->C > 1 ? n / d->C : 0, r = d->R > 1 ? (n - q * d->C) / d->R : 0;
    int64_t h = q || r ? n - q * d->C - r * d->R : n - 1;
    int first = d->R > 1 ? 3 : 1;                   /* the smaller chunk pads the first */
    int64_t T = d->R > 1 ? d->R : d->C;
    int chunk = T > 1 && h >= d->prefill_min && h > 1 && pos + T <= d->S ? first : 0;
    int rc = h ? dec_run(d, ids, pos, h, chunk, e) : 0;
    for (int64_t i = 0; !rc && i < r; i++)
        rc = dec_run(d, ids + h + i * d->R, pos + h + i * d->R, d->R, 3, e);
    for (int64_t i = 0, at = h + r * d->R; !rc && i < q; i++)
        rc = dec_run(d, ids + at + i * d->C, pos + at + i * d->C, d->C, 1, e);
    if (!rc && !q && !r)
        rc = dec_run(d, ids + h, pos + h, 1, 0, e);
    return rc;
}

void rt_dec_free(rt_dec *d)
{
    if (d->h)
        d->md->close(d->h);
    free(d->logits);
    free(d->tk);
    free(d->ps);
    free(d->sl);
    free(d->scratch);
    memset(d, 0, sizeof *d);
}

int rt_stop_scan(const char *s, size_t n, const char *const *stop, int nstop, size_t *end)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < nstop; k++) {
            size_t m = strlen(stop[k]);
            if (m <= n - i && !memcmp(s + i, stop[k], m)) {
                *end = i;
                return 1;
            }
        }
    size_t held = 0;
    for (int k = 0; k < nstop; k++) {
        size_t m = strlen(stop[k]);
        for (size_t h = m - 1 < n ? m - 1 : n; h > held; h--)
            if (!memcmp(s + n - h, stop[k], h)) {
                held = h;
                break;
            }
    }
    *end = n - held;
    return 0;
}
