/* tests/fuzz/fuzz_chat.c: chat templates (runtime/gen/rt_chat_tmpl.c).
 *
 * Input: a tokenizer_config.json. rt_chat_config_read must refuse it with
 * one line, or accept it with a chat template (a string) or none. The
 * template, or else the input as text, is then recognised
 * (rt_chat_template_find: a family, or one line), and a conversation
 * whose messages are cut from the input is rendered by every family, with
 * and without the generation prompt: each rendering is a string holding
 * every user message's text (which no family trims when it has no
 * spaces at its ends). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/gen/rt_tok.h"

static void check_err(const rt_err *e, int rc)
{
    FUZZ_CHECK(rc == e->code && (rc == RT_EINVAL || rc == RT_EINTERNAL || rc == RT_EIO));
    FUZZ_CHECK(e->msg[0] && !strchr(e->msg, '\n'));
}

/* Up to 64 bytes of text from `at`, without spaces at the ends. */
static char *cut(const char *text, size_t at)
{
    size_t n = strlen(text);
    const char *s = text + (at < n ? at : n);
    char *o = strndup(s, 64);
    size_t k = strlen(o);
    while (k && strchr(" \t\r\n", o[k - 1]))
        o[--k] = 0;
    size_t b = strspn(o, " \t\r\n");
    memmove(o, o + b, k - b + 1);
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_err e = {0};
    char *tmpl = NULL, *text = fuzz_text(data, size);
    int rc = rt_chat_config_read(fuzz_file(data, size), &tmpl, &e);
    if (rc)
        check_err(&e, rc);
    else
        FUZZ_CHECK(!tmpl || strlen(tmpl) < size);
    rt_err e2 = {0};
    int family = 0;
    rc = rt_chat_template_find(tmpl ? tmpl : text, NULL, &family, &e2);
    if (rc)
        check_err(&e2, rc);
    else
        FUZZ_CHECK(rt_chat_name(family) != NULL);
    char *u1 = cut(text, 0), *a1 = cut(text, size / 3), *u2 = cut(text, size / 2);
    rt_chat_msg msgs[] = {{"system", "s"}, {"user", u1}, {"assistant", a1}, {"user", u2}};
    for (int f = RT_CHAT_CHATML; f <= RT_CHAT_HARMONY; f++)
        for (int gen = 0; gen < 2; gen++) {
            rt_err e3 = {0};
            char *r = rt_chat_render(f, msgs, 4, gen, "<s>", "</s>", &e3);
            FUZZ_CHECK(r && strstr(r, u1) && strstr(r, u2));
            free(r);
        }
    free(u1);
    free(a1);
    free(u2);
    free(tmpl);
    free(text);
    return 0;
}
