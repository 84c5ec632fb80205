/* tests/unit/test_chat_tmpl.c: chat templates (runtime/gen/rt_chat_tmpl.c).
 * Published models' templates (tests/chat/, README.md there names them)
 * are recognised as their family, one of no family is refused, and one
 * conversation is rendered per family; each expected text is written by
 * hand from the template's own Jinja (the comment above it says what the
 * template does to it). The conversation: a system message, "Hello", an
 * answer " Hi there " with spaces at both ends (which the templates that
 * trim take off), and "Who are you". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/core/rt_core.h"
#include "runtime/rt_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const rt_chat_msg conv[] = {{"system", "You are a helpful assistant"},
                                   {"user", "Hello"},
                                   {"assistant", " Hi there "},
                                   {"user", "Who are you"}};

/* The family tests/chat/FILE is recognised as (0: refused, msg set). */
static int family_of(const char *file, char *msg)
{
    char path[256], *text = NULL;
    size_t len;
    rt_err e = {0};
    snprintf(path, sizeof path, "tests/chat/%s", file);
    assert_int_equal(rt_read_file(path, 1 << 20, &text, &len, &e), 0);
    int f = -1, rc = rt_chat_template_find(text, NULL, &f, &e);
    free(text);
    if (msg)
        strcpy(msg, e.msg);
    assert_int_equal(rc != 0, f == 0);
    return f;
}

static void test_recognise(void **state)
{
    (void)state;
    assert_int_equal(family_of("qwen2.5.jinja", NULL), RT_CHAT_CHATML);
    assert_int_equal(family_of("llama3.jinja", NULL), RT_CHAT_LLAMA3);
    assert_int_equal(family_of("llama3.1.jinja", NULL), RT_CHAT_LLAMA3);
    assert_int_equal(family_of("llama2-chat.jinja", NULL), RT_CHAT_LLAMA2);
    assert_int_equal(family_of("mixtral-instruct.jinja", NULL), RT_CHAT_MISTRAL);
    assert_int_equal(family_of("mistral-nemo.jinja", NULL), RT_CHAT_MISTRAL);
    assert_int_equal(family_of("gemma2.jinja", NULL), RT_CHAT_GEMMA);
    assert_int_equal(family_of("phi3.5.jinja", NULL), RT_CHAT_PHI3);
    assert_int_equal(family_of("gpt-oss.jinja", NULL), RT_CHAT_HARMONY);
    char msg[512];
    assert_int_equal(family_of("deepseek-r1-distill.jinja", msg), 0);
    assert_non_null(strstr(msg, "none of the families kiln renders"));
    assert_non_null(strstr(msg, "--chat-template NAME"));
}

static void test_by_name(void **state)
{
    (void)state;
    rt_err e = {0};
    int f = 0;
    assert_int_equal(rt_chat_template_find("anything", "gemma", &f, &e), 0);
    assert_int_equal(f, RT_CHAT_GEMMA);                  /* the name wins over the text */
    assert_int_equal(rt_chat_template_find(NULL, "harmony", &f, &e), 0);
    assert_int_equal(f, RT_CHAT_HARMONY);
    assert_int_equal(rt_chat_template_find("<|im_start|>", "vicuna", &f, &e), RT_EUSAGE);
    assert_string_equal(e.msg, "--chat-template: unknown family 'vicuna' (known: chatml, "
                        "llama3, llama2, mistral, gemma, phi3, harmony)");
    rt_err e2 = {0};
    assert_int_equal(rt_chat_template_find(NULL, NULL, &f, &e2), RT_EINVAL);
    for (int k = 1; k <= RT_CHAT_HARMONY; k++)
        assert_int_equal(rt_chat_family(rt_chat_name(k)), k);
    assert_null(rt_chat_name(0));
}

static void render_is(int family, int from, int n, int gen, const char *bos, const char *eos,
                      const char *want)
{
    rt_err e = {0};
    char *got = rt_chat_render(family, conv + from, n, gen, bos, eos, &e);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_chatml(void **state)
{
    (void)state;
    /* Qwen2.5: '<|im_start|>' + role + '\n' + content + '<|im_end|>\n' each, untrimmed. */
    render_is(RT_CHAT_CHATML, 0, 4, 1, "", "",
              "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
              "<|im_start|>user\nHello<|im_end|>\n"
              "<|im_start|>assistant\n Hi there <|im_end|>\n"
              "<|im_start|>user\nWho are you<|im_end|>\n"
              "<|im_start|>assistant\n");
}

static void test_llama3(void **state)
{
    (void)state;
    /* bos first; the header, '\n\n', the content trimmed, <|eot_id|>. */
    render_is(RT_CHAT_LLAMA3, 0, 4, 1, "<|begin_of_text|>", "<|end_of_text|>",
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
              "You are a helpful assistant<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_llama2(void **state)
{
    (void)state;
    /* The system message in <<SYS>> inside the first [INST]; each user turn
     * bos + '[INST] ' + strip + ' [/INST]'; each answer ' ' + strip + ' ' + eos;
     * no generation prompt. */
    render_is(RT_CHAT_LLAMA2, 0, 4, 1, "<s>", "</s>",
              "<s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]"
              " Hi there </s><s>[INST] Who are you [/INST]");
    render_is(RT_CHAT_LLAMA2, 1, 1, 1, "<s>", "</s>", "<s>[INST] Hello [/INST]");
}

static void test_mistral(void **state)
{
    (void)state;
    /* Mixtral's: bos, '[INST] ' + content + ' [/INST]', the answer + eos
     * untrimmed; a system message before the first user's, "\n\n" between. */
    render_is(RT_CHAT_MISTRAL, 1, 3, 1, "<s>", "</s>",
              "<s>[INST] Hello [/INST] Hi there </s>[INST] Who are you [/INST]");
    render_is(RT_CHAT_MISTRAL, 0, 2, 1, "<s>", "</s>",
              "<s>[INST] You are a helpful assistant\n\nHello [/INST]");
}

static void test_gemma(void **state)
{
    (void)state;
    /* bos; '<start_of_turn>' + role ('model' for assistant) + '\n' + trim +
     * '<end_of_turn>\n'; the system text before the first user's (Gemma 3). */
    render_is(RT_CHAT_GEMMA, 1, 3, 1, "<bos>", "<eos>",
              "<bos><start_of_turn>user\nHello<end_of_turn>\n"
              "<start_of_turn>model\nHi there<end_of_turn>\n"
              "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\n");
    render_is(RT_CHAT_GEMMA, 0, 2, 0, "<bos>", "<eos>",
              "<bos><start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n");
}

static void test_phi3(void **state)
{
    (void)state;
    /* Phi-3.5: '<|' role '|>\n' + content + '<|end|>\n'; then the prompt, or eos. */
    render_is(RT_CHAT_PHI3, 0, 4, 1, "<s>", "<|endoftext|>",
              "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n"
              "<|assistant|>\n Hi there <|end|>\n<|user|>\nWho are you<|end|>\n"
              "<|assistant|>\n");
    render_is(RT_CHAT_PHI3, 1, 1, 0, "<s>", "<|endoftext|>",
              "<|user|>\nHello<|end|>\n<|endoftext|>");
}

static void test_harmony(void **state)
{
    (void)state;
    /* gpt-oss: the system message (today's date), the developer's
     * instructions, the answer in the final channel; the prompt opens the
     * assistant's message; the last answer without a prompt ends <|return|>. */
    char d0[16], d1[16], want[2][1024];
    time_t t = time(NULL);
    strftime(d0, sizeof d0, "%Y-%m-%d", gmtime(&t));
    rt_err e = {0};
    char *got = rt_chat_render(RT_CHAT_HARMONY, conv, 4, 1, "", "", &e);
    t = time(NULL);
    strftime(d1, sizeof d1, "%Y-%m-%d", gmtime(&t));
    for (int k = 0; k < 2; k++)
        snprintf(want[k], sizeof want[k],
                 "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
                 "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\nReasoning: medium\n\n"
                 "# Valid channels: analysis, commentary, final. Channel must be included for "
                 "every message.<|end|><|start|>developer<|message|># Instructions\n\nYou are a "
                 "helpful assistant\n\n<|end|><|start|>user<|message|>Hello<|end|><|start|>"
                 "assistant<|channel|>final<|message|> Hi there <|end|><|start|>user<|message|>"
                 "Who are you<|end|><|start|>assistant", k ? d1 : d0);
    assert_non_null(got);
    assert_true(!strcmp(got, want[0]) || !strcmp(got, want[1]));
    free(got);
    got = rt_chat_render(RT_CHAT_HARMONY, conv + 1, 2, 0, "", "", &e);
    assert_non_null(strstr(got, "<|start|>user<|message|>Hello<|end|><|start|>assistant"
                                "<|channel|>final<|message|> Hi there <|return|>"));
    assert_null(strstr(got, "developer"));
    free(got);
}

static void test_bad_role(void **state)
{
    (void)state;
    rt_err e = {0};
    rt_chat_msg m[] = {{"user", "hi"}, {"tool", "42"}};
    assert_null(rt_chat_render(RT_CHAT_CHATML, m, 2, 1, "", "", &e));
    assert_string_equal(e.msg, "message 1: role 'tool' is not system, user or assistant");
}

/* tokenizer_config.json beside the tokenizer: a string, or a list's "default". */
static void test_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/kiln-chat-XXXXXX", tok[128], cfg[128], *text = NULL;
    assert_non_null(mkdtemp(dir));
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    rt_err e = {0};
    assert_int_equal(rt_chat_template_load(NULL, tok, &text, &e), 0);
    assert_null(text);                                   /* no file: no template */
    const char *files[][2] = {
        {"{\"bos_token\": \"<s>\", \"chat_template\": \"{{ '<|im_start|>' }}\\n\"}",
         "{{ '<|im_start|>' }}\n"},
        {"{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
         "{\"name\": \"default\", \"template\": \"D\"}], \"x\": [1, {\"y\": null}]}", "D"},
        {"{\"model_max_length\": 8}", NULL}};
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen(cfg, "w");
        fputs(files[k][0], f);
        fclose(f);
        assert_int_equal(rt_chat_template_load(NULL, tok, &text, &e), 0);
        if (files[k][1])
            assert_string_equal(text, files[k][1]);
        else
            assert_null(text);
        free(text);
    }
    FILE *f = fopen(cfg, "w");
    fputs("{\"chat_template\": 3", f);
    fclose(f);
    assert_int_equal(rt_chat_template_load(NULL, tok, &text, &e), RT_EINVAL);
    assert_null(text);
    assert_non_null(strstr(e.msg, "tokenizer_config.json: "));
    unlink(cfg);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recognise), cmocka_unit_test(test_by_name),
        cmocka_unit_test(test_chatml),    cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_llama2),    cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_gemma),     cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_harmony),   cmocka_unit_test(test_bad_role),
        cmocka_unit_test(test_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
