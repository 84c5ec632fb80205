/* tests/fuzz/fuzz_serve.c: the server's request bodies
 * (runtime/serve/rt_serve_req.c).
 *
 * Input: a request body, read as a completions request or (by the input's
 * hash) a chat one. rt_serve_parse must refuse it with one line (RT_EINVAL,
 * or RT_EINTERNAL when out of memory), or accept it with what the server
 * relies on: a prompt string (completions), or at least one message, each
 * with a role and content (chat); temperature in [0, 2], top_p in (0, 1],
 * max_tokens -1 (not given) or >= 0. Whatever it read is freed. */
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
        FUZZ_CHECK(r.temperature >= 0 && r.temperature <= 2);
        FUZZ_CHECK(r.top_p > 0 && r.top_p <= 1);
        FUZZ_CHECK(r.max_tokens >= -1);
    }
    rt_serve_req_free(&r);
    free(body);
    return 0;
}
