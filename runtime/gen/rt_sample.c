/* runtime/gen/rt_sample.c: the next token from a row of logits (rt_gen.h
 * "generation"), as `generate` and `chat` draw it, and the samplers'
 * command-line options.
 *
 * rt_sampler_draw, in this order (llama.cpp's default chain, less its
 * typical and XTC samplers):
 * 1. Penalties, over the last repeat_last_n tokens of the text (prompt and
 *    answer; -1: all of it): each token that occurs there c times has its
 *    logit l divided by repeat_penalty when l > 0, else multiplied by it
 *    (CTRL's, as llama.cpp's), then lowered by c * frequency_penalty +
 *    presence_penalty (OpenAI's).
 * 2. temperature 0: the argmax, the lowest id among equal maxima.
 *    Otherwise p = softmax(logits / temperature) (max subtracted, summed
 *    in double).
 * 3. Candidates: the tokens by probability, highest first (ties: lower id
 *    first), cut to the top_k first (0: all); then to the nucleus: up to
 *    and including the first at which their running sum passes top_p
 *    times the candidates' mass (0 or 1: all; without top_k, tokens below
 *    (1 - top_p) / (V - 1) are left out before sorting, as llama2.c's
 *    run.c does, since they cannot be in it); then those whose p is at
 *    least min_p times the largest (0: all).
 * 4. A coin u in [0, 1) (rt_sample_coin) picks the first candidate whose
 *    running sum passes u times the candidates' mass.
 * With neither top_k nor min_p nor a penalty this is rt_sample, the draw
 * `generate` always made. */
#include "runtime/gen/rt_tok.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

void rt_sampler_init(rt_sampler *s)
{
    *s = (rt_sampler){.temperature = 1, .top_p = 0.9, .repeat_penalty = 1,
                      .repeat_last_n = 64};
}

/* v as a number in [lo, hi]; 0 when it is not one. */
static int rs_num(const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi))
        return 0;
    *out = x;
    return 1;
}

int rt_sampler_opt(rt_sampler *s, const char *name, const char *v)
{
    double x;
    if (!strcmp(name, "temperature"))
        return rs_num(v, 0, 1e9, &s->temperature) ? 1 : -1;
    if (!strcmp(name, "topp") || !strcmp(name, "top-p"))
        return rs_num(v, 0, 1, &s->top_p) ? 1 : -1;
    if (!strcmp(name, "min-p"))
        return rs_num(v, 0, 1, &s->min_p) ? 1 : -1;
    if (!strcmp(name, "top-k")) {
        if (!rs_num(v, 0, 1e9, &x) || x != (int)x)
            return -1;
        s->top_k = (int)x;
        return 1;
    }
    if (!strcmp(name, "repeat-penalty"))
        return rs_num(v, 1e-3, 1e3, &s->repeat_penalty) ? 1 : -1;
    if (!strcmp(name, "presence-penalty"))
        return rs_num(v, -2, 2, &s->presence_penalty) ? 1 : -1;
    if (!strcmp(name, "frequency-penalty"))
        return rs_num(v, -2, 2, &s->frequency_penalty) ? 1 : -1;
    if (!strcmp(name, "repeat-last-n")) {
        if (!rs_num(v, -1, 1 << 30, &x) || x != (int)x)
            return -1;
        s->repeat_last_n = (int)x;
        return 1;
    }
    return 0;
}

void rt_sampler_penalize(float *logits, int n, const rt_sampler *s, const int32_t *text,
                         int ntext, void *scratch)
{
    if (s->repeat_penalty == 1 && !s->presence_penalty && !s->frequency_penalty)
        return;
    int from = s->repeat_last_n < 0 || s->repeat_last_n > ntext ? 0 : ntext - s->repeat_last_n;
    int32_t *count = scratch;          /* touched entries only */
    for (int i = from; i < ntext; i++)
        if (text[i] >= 0 && text[i] < n)
            count[text[i]] = 0;
    for (int i = from; i < ntext; i++)
        if (text[i] >= 0 && text[i] < n)
            count[text[i]]++;
    for (int i = from; i < ntext; i++) {
        int id = text[i];
        if (id < 0 || id >= n || count[id] <= 0)
            continue;                  /* done already */
        float l = logits[id];
        l = l > 0 ? (float)(l / s->repeat_penalty) : (float)(l * s->repeat_penalty);
        logits[id] = (float)(l - count[id] * s->frequency_penalty - s->presence_penalty);
        count[id] = -1;
    }
}

/* Candidates c[0, k) sorted, cut as step 3 says; their mass in *mass. */
static int rs_cut(const float *p, int n, const rt_sampler *s, rs_cand *c, double *mass)
{
    int k = 0, nucleus = s->top_p > 0 && s->top_p < 1;
    float cutoff = nucleus && !s->top_k && n > 1 ? (float)((1 - s->top_p) / (n - 1)) : 0;
    for (int i = 0; i < n; i++)
        if (p[i] >= cutoff)
            c[k++] = (rs_cand){p[i], i};
    if (!k)
        return 0;
    qsort(c, (size_t)k, sizeof *c, rs_by_p);
    if (s->top_k && s->top_k < k)
        k = s->top_k;
    double total = 1;                  /* all of softmax's mass, unless cut to top_k */
    if (s->top_k) {
        total = 0;
        for (int i = 0; i < k; i++)
            total += c[i].p;
    }
    *mass = 0;
    int last = k - 1;
    for (int i = 0; i < k; i++) {
        *mass += c[i].p;
        if (nucleus && *mass > s->top_p * total) {
            last = i;
            break;
        }
    }
    k = last + 1;
    if (s->min_p > 0) {
        float floor = (float)(s->min_p * c[0].p);
        while (k > 1 && c[k - 1].p < floor)
            *mass -= c[--k].p;
    }
    return k;
}

int rt_sampler_draw(float *logits, int n, const rt_sampler *s, const int32_t *text, int ntext,
                    uint64_t *state, void *scratch)
{
    rt_sampler_penalize(logits, n, s, text, ntext, scratch);
    if (s->temperature <= 0)
        return rt_sample_argmax(logits, n);
    float mx = logits[rt_sample_argmax(logits, n)];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        logits[i] = expf((float)((logits[i] - mx) / s->temperature));
        sum += logits[i];
    }
    for (int i = 0; i < n; i++)
        logits[i] = (float)(logits[i] / sum);
    double u = rt_sample_coin(state);
    int all = (s->top_p <= 0 || s->top_p >= 1) && !s->top_k && !s->min_p;
    if (all || n < 2) {
        double acc = 0;
        for (int i = 0; i < n; i++) {
            acc += logits[i];
            if (u < acc)
                return i;
        }
        return n - 1;
    }
    rs_cand *c = scratch;
    double mass = 0;
    int k = rs_cut(logits, n, s, c, &mass);
    if (!k)
        return rt_sample_argmax(logits, n);
    double r = u * mass, acc = 0;
    for (int i = 0; i < k; i++) {
        acc += c[i].p;
        if (r < acc)
            return c[i].id;
    }
    return c[k - 1].id;
}

int rt_sample(float *logits, int n, double temperature, double topp, uint64_t *state,
              void *scratch)
{
    rt_sampler s;
    rt_sampler_init(&s);
    s.temperature = temperature;
    s.top_p = topp;
    return rt_sampler_draw(logits, n, &s, NULL, 0, state, scratch);
}
