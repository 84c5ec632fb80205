/* runtime/gen/rt_sample.c: the next token from a row of logits (kiln_rt.h
 * "generation"), as `generate` draws it.
 *
 * temperature 0: the argmax, the lowest id among equal maxima. Otherwise
 * p = softmax(logits / temperature) (max subtracted, summed in double);
 * with 0 < topp < 1 only the nucleus is kept: the tokens by probability,
 * highest first (ties: lower id first), up to and including the first at
 * which their sum passes topp; tokens below (1 - topp) / (V - 1) are left
 * out before sorting, as llama2.c's run.c does, since they cannot be in
 * it. A coin u in [0, 1) (rt_sample_coin) then picks the first token
 * whose running sum passes u times the kept mass. */
#include "runtime/gen/rt_tok.h"

#include <math.h>
#include <stdlib.h>

double rt_sample_coin(uint64_t *state)
{
    return (double)(rt_splitmix64(state) >> 11) * 0x1.0p-53;
}

int rt_sample_argmax(const float *logits, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

typedef struct {
    float p;
    int id;
} rs_cand;

static int rs_by_p(const void *x, const void *y)
{
    const rs_cand *a = x, *b = y;
    if (a->p != b->p)
        return a->p > b->p ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

int rt_sample(float *logits, int n, double temperature, double topp, uint64_t *state,
              void *scratch)
{
    if (temperature <= 0)
        return rt_sample_argmax(logits, n);
    float mx = logits[rt_sample_argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        logits[i] = expf((float)((logits[i] - mx) / temperature));
        sum += logits[i];
    }
    for (int i = 0; i < n; i++)
        logits[i] = (float)(logits[i] / sum);
    double u = rt_sample_coin(state);
    if (topp <= 0 || topp >= 1 || n < 2) {
        double acc = 0;
        for (int i = 0; i < n; i++) {
            acc += logits[i];
            if (u < acc)
                return i;
        }
        return n - 1;
    }
    rs_cand *c = scratch;
    int k = 0;
    float cutoff = (float)((1 - topp) / (n - 1));
    for (int i = 0; i < n; i++)
        if (logits[i] >= cutoff)
            c[k++] = (rs_cand){logits[i], i};
    if (!k)
        return rt_sample_argmax(logits, n);
    qsort(c, (size_t)k, sizeof *c, rs_by_p);
    double mass = 0;
    int last = k - 1;
    for (int i = 0; i < k; i++) {
        mass += c[i].p;
        if (mass > topp) {
            last = i;
            break;
        }
    }
    double r = u * mass, acc = 0;
    for (int i = 0; i <= last; i++) {
        acc += c[i].p;
        if (r < acc)
            return c[i].id;
    }
    return c[last].id;
}
