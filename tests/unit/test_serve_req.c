/* tests/unit/test_serve_req.c: a server request's body
 * (runtime/serve/rt_serve_req.c) and the stop strings that end its text
 * (rt_stop_scan, runtime/gen/rt_decode.c, which generate's --stop shares):
 * every field read, the defaults, each refusal naming its field, and
 * where a stop string cuts or what it holds back, worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/serve/rt_srv.h"
#include "runtime/gen/rt_tok.h"

#include <string.h>

static int parse(const char *body, int chat, rt_serve_req *r, rt_err *e)
{
    memset(e, 0, sizeof *e);
    return rt_serve_parse(body, strlen(body), chat, r, e);
}

static void test_fields(void **state)
{
    (void)state;
    rt_serve_req r;
    rt_err e;
    assert_int_equal(parse("{\"prompt\": \"hi\", \"max_tokens\": 8, \"stream\": true, "
                           "\"ignore_eos\": true, \"stop\": [\"\\n\", \"cat\"], "
                           "\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 40, "
                           "\"min_p\": 0.05, \"presence_penalty\": -2, \"frequency_penalty\": 2, "
                           "\"repeat_penalty\": 1.1, \"repeat_last_n\": -1, \"seed\": 3, "
                           "\"user\": {\"x\": [1]}}", 0, &r, &e), 0);
    assert_string_equal(r.prompt, "hi");
    assert_int_equal(r.max_tokens, 8);
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.ignore_eos, 1);
    assert_int_equal(r.nstop, 2);
    assert_string_equal(r.stop[0], "\n");
    assert_string_equal(r.stop[1], "cat");
    assert_true(r.samp.temperature == 0.5 && r.samp.top_p == 0.9 && r.samp.min_p == 0.05);
    assert_int_equal(r.samp.top_k, 40);
    assert_true(r.samp.presence_penalty == -2 && r.samp.frequency_penalty == 2);
    assert_true(r.samp.repeat_penalty == 1.1);
    assert_int_equal(r.samp.repeat_last_n, -1);
    assert_int_equal(r.seed, 3);
    rt_serve_req_free(&r);

    /* defaults: OpenAI's temperature 1 and top_p 1; no cut, no penalty */
    assert_int_equal(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], "
                           "\"stop\": \"x\", \"top_k\": null}", 1, &r, &e), 0);
    assert_int_equal(r.nmsgs, 1);
    assert_int_equal(r.nstop, 1);
    assert_string_equal(r.stop[0], "x");
    assert_int_equal(r.max_tokens, -1);
    assert_true(r.samp.temperature == 1 && r.samp.top_p == 1 && r.samp.min_p == 0);
    assert_int_equal(r.samp.top_k, 0);
    assert_true(r.samp.repeat_penalty == 1 && r.samp.presence_penalty == 0);
    assert_int_equal(r.samp.repeat_last_n, 64);
    assert_int_equal(r.seed, 1);
    assert_int_equal(r.stream + r.ignore_eos, 0);
    rt_serve_req_free(&r);
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"{\"prompt\": \"a\", \"top_k\": -1}", "'top_k' must be an integer >= 0"},
        {"{\"prompt\": \"a\", \"top_k\": 1.5}", "'top_k' must be an integer >= 0"},
        {"{\"prompt\": \"a\", \"min_p\": 1.01}", "'min_p' must be a number in [0, 1]"},
        {"{\"prompt\": \"a\", \"top_p\": 0}", "'top_p' must be a number in (0, 1]"},
        {"{\"prompt\": \"a\", \"repeat_penalty\": 0}", "'repeat_penalty' must be a number in (0, 10]"},
        {"{\"prompt\": \"a\", \"presence_penalty\": 2.5}", "'presence_penalty' must be a number in [-2, 2]"},
        {"{\"prompt\": \"a\", \"repeat_last_n\": -2}", "'repeat_last_n' must be an integer >= -1"},
        {"{\"prompt\": \"a\", \"ignore_eos\": 1}", "'ignore_eos' must be a boolean"},
        {"{\"prompt\": \"a\", \"stop\": [1]}", "'stop' must be a string or an array of at most 4"},
        {"{\"prompt\": \"a\", \"stop\": \"\"}", "'stop' must be a string or an array of at most 4"},
        {"{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "'stop' must be"},
        {"{\"prompt\": \"a\", \"stop\": \"a\", \"stop\": \"b\"}", "'stop' must be given once"},
        {"{\"prompt\": \"a\", \"stop\": {}}", "'stop' must be a string or an array"},
        {"{\"prompt\": \"a\", \"stop\": [\"a\"", "request"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rt_serve_req r;
        rt_err e;
        assert_int_equal(parse(bad[i].body, 0, &r, &e), RT_EINVAL);
        if (!strstr(e.msg, bad[i].msg))
            fail_msg("%s: '%s' lacks '%s'", bad[i].body, e.msg, bad[i].msg);
        rt_serve_req_free(&r);          /* what it read before the fault */
    }
}

static void test_stop_scan(void **state)
{
    (void)state;
    const char *stops[] = {"cat", "at!", "dog"};
    size_t end;
    /* "the cat": "cat" at 4 */
    assert_int_equal(rt_stop_scan("the cat", 7, stops, 3, &end), 1);
    assert_int_equal(end, 4);
    /* "a hat!": "at!" at 3, before any other */
    assert_int_equal(rt_stop_scan("a hat!", 6, stops, 3, &end), 1);
    assert_int_equal(end, 3);
    /* "the ca": "ca" may begin "cat": 2 bytes held back */
    assert_int_equal(rt_stop_scan("the ca", 6, stops, 3, &end), 0);
    assert_int_equal(end, 4);
    /* "do" may begin "dog", "o" nothing: 2 held */
    assert_int_equal(rt_stop_scan("a do", 4, stops, 3, &end), 0);
    assert_int_equal(end, 2);
    /* "c a": "a" may begin "at!" */
    assert_int_equal(rt_stop_scan("c a", 3, stops, 3, &end), 0);
    assert_int_equal(end, 2);
    /* nothing held: "c x" */
    assert_int_equal(rt_stop_scan("c x", 3, stops, 3, &end), 0);
    assert_int_equal(end, 3);
    /* no stop strings: all of it, nothing held */
    assert_int_equal(rt_stop_scan("cat", 3, stops, 0, &end), 0);
    assert_int_equal(end, 3);
    /* empty text */
    assert_int_equal(rt_stop_scan("", 0, stops, 3, &end), 0);
    assert_int_equal(end, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_stop_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
