/* tests/fuzz/fuzz_serve.c: the server's request bodies
 * (runtime/serve/rt_serve_req.c).
 *
 * Input: a request body, read as a completions request or (by the input's
 * hash) a chat one. rt_serve_parse must refuse it with one line (RT_EINVAL,
 * or RT_EINTERNAL when out of memory), or accept it with what the server
 * relies on: a prompt string (completions), or at least one message, each
 * with a role and content (chat); every sampler in its range (temperature
 * in [0, 2], top_p in (0, 1], ...), at most 4 stop strings of 1 to 256
 * bytes, max_tokens -1 (not given) or >= 0. Whatever it read is freed. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/serve/rt_srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_err e = {0};
    rt_serve_req r;
    int chat = (int)(fuzz_hash(data, size) & 1);
    char *body = fuzz_text(data, size);
    int rc = rt_serve_parse(body, strlen(body), chat, &r, &e);
    if (rc) {
        FUZZ_CHECK(rc == e.code && (rc == RT_EINVAL || rc == RT_EINTERNAL));
        FUZZ_CHECK(e.msg[0] && !strchr(e.msg, '\n'));
    } else {
        FUZZ_CHECK(chat ? r.nmsgs >= 1 && r.msgs : r.prompt != NULL);
        for (int i = 0; i < r.nmsgs; i++)
            FUZZ_CHECK(r.msgs[i].role && r.msgs[i].content);
        const rt_sampler *sp = &r.samp;
        FUZZ_CHECK(sp->temperature >= 0 && sp->temperature <= 2);
        FUZZ_CHECK(sp->top_p > 0 && sp->top_p <= 1);
        FUZZ_CHECK(sp->min_p >= 0 && sp->min_p <= 1 && sp->top_k >= 0);
        FUZZ_CHECK(sp->repeat_penalty > 0 && sp->repeat_penalty <= 10);
        FUZZ_CHECK(sp->presence_penalty >= -2 && sp->presence_penalty <= 2);
        FUZZ_CHECK(sp->frequency_penalty >= -2 && sp->frequency_penalty <= 2);
        FUZZ_CHECK(sp->repeat_last_n >= -1);
        FUZZ_CHECK(r.nstop >= 0 && r.nstop <= RT_SERVE_MAX_STOP);
        for (int i = 0; i < r.nstop; i++)
            FUZZ_CHECK(r.stop[i][0] && strlen(r.stop[i]) <= 256);
        FUZZ_CHECK(r.max_tokens >= -1);
    }
    rt_serve_req_free(&r);
    free(body);
    return 0;
}
