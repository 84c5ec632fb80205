/* runtime/gen/rt_chat_tmpl.c: chat templates (rt_gen.h "chat templates"):
 * a model's Jinja chat template recognised as one of the families kiln
 * imports, and a conversation rendered as that family's template renders
 * it, by C code per family (no Jinja interpreter).
 *
 * Recognition looks for each family's markers in the template's text, in
 * this order (the first match wins; docs/generating.md lists them):
 *   harmony  <|channel|> and <|message|>   (gpt-oss)
 *   chatml   <|im_start|>                  (Qwen2, Qwen2.5, Qwen3, many fine-tunes)
 *   llama3   <|start_header_id|>           (Llama 3, 3.1, 3.2, 3.3)
 *   gemma    <start_of_turn>               (Gemma, Gemma 2, Gemma 3)
 *   phi3     <|user|>, <|assistant|>, <|end|>  (Phi-3, Phi-3.5)
 *   llama2   [INST] and <<SYS>>            (Llama 2 chat)
 *   mistral  [INST]                        (Mistral, Mixtral instruct)
 * Anything else is refused by name; --chat-template NAME picks a family.
 *
 * Rendering, messages m[0..n) with roles system, user, assistant (a
 * system message counts only first; bos and eos are the tokenizer's
 * texts, "" when it has none):
 *   chatml   each: <|im_start|>ROLE\nCONTENT<|im_end|>\n; prompt:
 *            <|im_start|>assistant\n. A template's default system prompt
 *            (Qwen2's "You are a helpful assistant.") is not added.
 *   llama3   bos, then each: <|start_header_id|>ROLE<|end_header_id|>\n\n
 *            TRIM(CONTENT)<|eot_id|>; prompt: the assistant's header.
 *            (Llama 3.1's dated system header is not added.)
 *   llama2   per user turn: bos[INST] CONTENT [/INST], the first one's
 *            content <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER, trimmed; per
 *            assistant turn: " TRIM(CONTENT) " eos. No prompt is added:
 *            [/INST] is where the answer starts.
 *   mistral  bos, then [INST] USER [/INST] and ASSISTANTeos; a system
 *            message goes before the first user message, "\n\n" between.
 *   gemma    bos, then <start_of_turn>ROLE\nTRIM(CONTENT)<end_of_turn>\n
 *            (assistant is "model"); a system message goes before the
 *            first user message's content, "\n\n" between (as Gemma 3's
 *            template does); prompt: <start_of_turn>model\n.
 *   phi3     each: <|ROLE|>\nCONTENT<|end|>\n (an empty system message
 *            left out); prompt <|assistant|>\n, or else eos.
 *   harmony  <|start|>system<|message|> with the identity, knowledge
 *            cutoff, today's date (UTC), "Reasoning: medium" and the
 *            channels line, <|end|>; a system message as the developer's
 *            "# Instructions"; user: <|start|>user<|message|>CONTENT<|end|>;
 *            assistant: <|start|>assistant<|channel|>final<|message|>
 *            CONTENT<|end|> (<|return|> when last without a prompt);
 *            prompt: <|start|>assistant.
 * TRIM strips spaces, tabs and line breaks at both ends, as Jinja's trim. */
#include "runtime/gen/rt_tok.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const ct_names[] = {
    [RT_CHAT_CHATML] = "chatml", [RT_CHAT_LLAMA3] = "llama3", [RT_CHAT_LLAMA2] = "llama2",
    [RT_CHAT_MISTRAL] = "mistral", [RT_CHAT_GEMMA] = "gemma", [RT_CHAT_PHI3] = "phi3",
    [RT_CHAT_HARMONY] = "harmony"};
#define CT_N ((int)(sizeof ct_names / sizeof ct_names[0]))

const char *rt_chat_name(int family)
{
    return family > 0 && family < CT_N ? ct_names[family] : NULL;
}

int rt_chat_family(const char *name)
{
    for (int f = 1; f < CT_N; f++)
        if (!strcmp(name, ct_names[f]))
            return f;
    return 0;
}

static int ct_recognise(const char *t)
{
    if (strstr(t, "<|channel|>") && strstr(t, "<|message|>"))
        return RT_CHAT_HARMONY;
    if (strstr(t, "<|im_start|>"))
        return RT_CHAT_CHATML;
    if (strstr(t, "<|start_header_id|>"))
        return RT_CHAT_LLAMA3;
    if (strstr(t, "<start_of_turn>"))
        return RT_CHAT_GEMMA;
    if (strstr(t, "<|user|>") && strstr(t, "<|assistant|>") && strstr(t, "<|end|>"))
        return RT_CHAT_PHI3;
    if (strstr(t, "[INST]"))
        return strstr(t, "<<SYS>>") ? RT_CHAT_LLAMA2 : RT_CHAT_MISTRAL;
    return 0;
}

int rt_chat_template_find(const char *text, const char *name, int *family, rt_err *e)
{
    *family = 0;
    if (name) {
        *family = rt_chat_family(name);
        if (!*family)
            return rt_errf(e, RT_EUSAGE, "--chat-template: unknown family '%s' (known: chatml, "
                           "llama3, llama2, mistral, gemma, phi3, harmony)", name);
        return 0;
    }
    if (!text)
        return rt_errf(e, RT_EINVAL, "the tokenizer has no chat template: give "
                       "--chat-template NAME (chatml, llama3, llama2, mistral, gemma, phi3, "
                       "harmony)");
    *family = ct_recognise(text);
    if (!*family)
        return rt_errf(e, RT_EINVAL, "the model's chat template is none of the families kiln "
                       "renders (chatml, llama3, llama2, mistral, gemma, phi3, harmony): give "
                       "--chat-template NAME");
    return 0;
}

/* ---- a growing text ---------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} ct_buf;

static void ct_put(ct_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

/* The strings up to a NULL, one after the other. */
static void ct_cat(ct_buf *b, ...)
{
    va_list ap;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        ct_put(b, s, strlen(s));
    va_end(ap);
}

static int ct_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* s without the whitespace at both ends, as Jinja's trim. */
static void ct_trim(ct_buf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && ct_space(*s))
        s++, n--;
    while (n && ct_space(s[n - 1]))
        n--;
    ct_put(b, s, n);
}

/* ---- the families -------------------------------------------------------- */

typedef struct {
    const rt_chat_msg *m;
    int n, gen;
    const char *bos, *eos, *sys; /* sys: the first message's when it is a system one */
    int first;                   /* the first message after the system one */
} ct_conv;

static int ct_is(const rt_chat_msg *m, const char *role) { return !strcmp(m->role, role); }

static void ct_chatml(ct_buf *b, const ct_conv *c)
{
    for (int i = 0; i < c->n; i++)
        ct_cat(b, "<|im_start|>", c->m[i].role, "\n", c->m[i].content, "<|im_end|>\n", NULL);
    if (c->gen)
        ct_cat(b, "<|im_start|>assistant\n", NULL);
}

static void ct_llama3(ct_buf *b, const ct_conv *c)
{
    ct_cat(b, c->bos, NULL);
    for (int i = 0; i < c->n; i++) {
        ct_cat(b, "<|start_header_id|>", c->m[i].role, "<|end_header_id|>\n\n", NULL);
        ct_trim(b, c->m[i].content);
        ct_cat(b, "<|eot_id|>", NULL);
    }
    if (c->gen)
        ct_cat(b, "<|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
}

static void ct_llama2(ct_buf *b, const ct_conv *c)
{
    for (int i = c->first; i < c->n; i++) {
        const rt_chat_msg *m = &c->m[i];
        if (ct_is(m, "user")) {
            ct_buf u = {0};
            if (i == c->first && c->sys)
                ct_cat(&u, "<<SYS>>\n", c->sys, "\n<</SYS>>\n\n", NULL);
            ct_cat(&u, m->content, NULL);
            ct_cat(b, c->bos, "[INST] ", NULL);
            ct_trim(b, u.s ? u.s : "");
            ct_cat(b, " [/INST]", NULL);
            b->oom |= u.oom;
            free(u.s);
        } else if (ct_is(m, "assistant")) {
            ct_cat(b, " ", NULL);
            ct_trim(b, m->content);
            ct_cat(b, " ", c->eos, NULL);
        }
    }
}

/* The system text before the first user message's content, "\n\n" between. */
static void ct_user_content(ct_buf *b, const ct_conv *c, int i, int trim)
{
    if (c->sys && i == c->first)
        ct_cat(b, c->sys, "\n\n", NULL);
    if (trim)
        ct_trim(b, c->m[i].content);
    else
        ct_cat(b, c->m[i].content, NULL);
}

static void ct_mistral(ct_buf *b, const ct_conv *c)
{
    ct_cat(b, c->bos, NULL);
    for (int i = c->first; i < c->n; i++) {
        if (ct_is(&c->m[i], "user")) {
            ct_cat(b, "[INST] ", NULL);
            ct_user_content(b, c, i, 0);
            ct_cat(b, " [/INST]", NULL);
        } else if (ct_is(&c->m[i], "assistant")) {
            ct_cat(b, c->m[i].content, c->eos, NULL);
        }
    }
}

static void ct_gemma(ct_buf *b, const ct_conv *c)
{
    ct_cat(b, c->bos, NULL);
    for (int i = c->first; i < c->n; i++) {
        const char *role = ct_is(&c->m[i], "assistant") ? "model" : c->m[i].role;
        ct_cat(b, "<start_of_turn>", role, "\n", NULL);
        ct_user_content(b, c, i, 1);
        ct_cat(b, "<end_of_turn>\n", NULL);
    }
    if (c->gen)
        ct_cat(b, "<start_of_turn>model\n", NULL);
}

static void ct_phi3(ct_buf *b, const ct_conv *c)
{
    for (int i = 0; i < c->n; i++)
        if (!ct_is(&c->m[i], "system") || *c->m[i].content)
            ct_cat(b, "<|", c->m[i].role, "|>\n", c->m[i].content, "<|end|>\n", NULL);
    ct_cat(b, c->gen ? "<|assistant|>\n" : c->eos, NULL);
}

static void ct_harmony(ct_buf *b, const ct_conv *c)
{
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%d", gmtime_r(&now, &tm));
    ct_cat(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
           "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ", date, "\n\nReasoning: medium"
           "\n\n# Valid channels: analysis, commentary, final. Channel must be included for "
           "every message.<|end|>", NULL);
    if (c->sys && *c->sys)
        ct_cat(b, "<|start|>developer<|message|># Instructions\n\n", c->sys, "\n\n<|end|>", NULL);
    for (int i = c->first; i < c->n; i++) {
        const rt_chat_msg *m = &c->m[i];
        if (ct_is(m, "assistant"))
            ct_cat(b, "<|start|>assistant<|channel|>final<|message|>", m->content,
                   i == c->n - 1 && !c->gen ? "<|return|>" : "<|end|>", NULL);
        else
            ct_cat(b, "<|start|>", m->role, "<|message|>", m->content, "<|end|>", NULL);
    }
    if (c->gen)
        ct_cat(b, "<|start|>assistant", NULL);
}

char *rt_chat_render(int family, const rt_chat_msg *msgs, int n, int add_generation_prompt,
                     const char *bos, const char *eos, rt_err *e)
{
    static void (*const render[])(ct_buf *, const ct_conv *) = {
        [RT_CHAT_CHATML] = ct_chatml, [RT_CHAT_LLAMA3] = ct_llama3,
        [RT_CHAT_LLAMA2] = ct_llama2, [RT_CHAT_MISTRAL] = ct_mistral,
        [RT_CHAT_GEMMA] = ct_gemma, [RT_CHAT_PHI3] = ct_phi3, [RT_CHAT_HARMONY] = ct_harmony};
    if (family <= 0 || family >= CT_N) {
        rt_errf(e, RT_EINVAL, "chat template family %d is none of kiln's", family);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ct_is(&msgs[i], "system") && !ct_is(&msgs[i], "user") &&
            !ct_is(&msgs[i], "assistant")) {
            rt_errf(e, RT_EINVAL, "message %d: role '%s' is not system, user or assistant", i,
                    msgs[i].role);
            return NULL;
        }
    ct_conv c = {msgs, n, add_generation_prompt, bos ? bos : "", eos ? eos : "", NULL, 0};
    if (n && ct_is(&msgs[0], "system")) {
        c.sys = msgs[0].content;
        c.first = 1;
    }
    ct_buf b = {0};
    ct_put(&b, "", 0);
    render[family](&b, &c);
    if (b.oom) {
        free(b.s);
        rt_errf(e, RT_EINTERNAL, "out of memory");
        return NULL;
    }
    return b.s;
}

/* ---- where a model keeps its template ------------------------------------ */

/* One {"name": N, "template": T} of a list: T into *out when N is "default". */
static int ct_config_item(rt_json *J, char **out)
{
    char *name = NULL, *tmpl = NULL;
    int rc = rt_json_eat(J, '{') ? rt_json_syntax(J, "expected an object") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(J, '}', first)) != 0; first = 0) {
        char *k = NULL;
        rc = more < 0 ? RT_EINVAL : rt_json_string(J, &k);
        if (!rc && rt_json_eat(J, ':'))
            rc = rt_json_syntax(J, "expected ':'");
        if (!rc && !strcmp(k, "name") && !name)
            rc = rt_json_string(J, &name);
        else if (!rc && !strcmp(k, "template") && !tmpl)
            rc = rt_json_string(J, &tmpl);
        else if (!rc)
            rc = rt_json_skip(J);
        free(k);
    }
    if (!rc && name && tmpl && !strcmp(name, "default")) {
        free(*out);
        *out = tmpl;
        tmpl = NULL;
    }
    free(name);
    free(tmpl);
    return rc;
}

static int ct_config_list(rt_json *J, char **out)
{
    int rc = rt_json_eat(J, '[') ? rt_json_syntax(J, "expected an array") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(J, ']', first)) != 0; first = 0)
        rc = more < 0 ? RT_EINVAL : ct_config_item(J, out);
    return rc;
}

/* tokenizer_config.json's chat_template: a string, or a list of
 * {"name", "template"} of which "default" is taken; *out NULL when the
 * file has none. */
static int ct_config(rt_json *J, char **out)
{
    if (rt_json_eat(J, '{'))
        return rt_json_syntax(J, "expected an object");
    for (int first = 1, more; (more = rt_json_next(J, '}', first)) != 0; first = 0) {
        char *k = NULL;
        int rc = more < 0 ? RT_EINVAL : rt_json_string(J, &k);
        if (!rc && rt_json_eat(J, ':'))
            rc = rt_json_syntax(J, "expected ':'");
        int chat = !rc && !strcmp(k, "chat_template");
        free(k);
        rt_json_ws(J);
        if (!rc && chat && *J->p == '"') {
            free(*out);
            *out = NULL;
            rc = rt_json_string(J, out);
        } else if (!rc && chat && *J->p == '[') {
            rc = ct_config_list(J, out);
        } else if (!rc) {
            rc = rt_json_skip(J);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int rt_chat_config_read(const char *path, char **text, rt_err *e)
{
    char *d = NULL;
    size_t len;
    *text = NULL;
    int rc = rt_read_file(path, 64u << 20, &d, &len, e);
    size_t bad = rc ? 0 : rt_utf8_bad((const unsigned char *)d, len);
    if (!rc && bad < len)
        rc = rt_errf(e, RT_EINVAL, "%s: not valid UTF-8 at byte %zu", path, bad);
    if (!rc) {
        const unsigned char *s = (const unsigned char *)d;
        rt_json J = {.p = s, .start = s, .end = s + len, .path = path, .e = e};
        rc = ct_config(&J, text);
        rt_json_ws(&J);
        if (!rc && J.p != J.end)
            rc = rt_json_syntax(&J, "text after the object");
    }
    if (rc) {
        free(*text);
        *text = NULL;
    }
    free(d);
    return rc;
}

int rt_chat_template_load(const rt_tok *tok, const char *tokenizer_path, char **text, rt_err *e)
{
    *text = NULL;
    const char *t = tok ? rt_tok_chat_template(tok) : NULL;
    if (t) {
        *text = strdup(t);
        return *text ? 0 : rt_errf(e, RT_EINTERNAL, "out of memory");
    }
    const char *slash = strrchr(tokenizer_path, '/');
    int dir = slash ? (int)(slash - tokenizer_path) + 1 : 0;
    char path[4096];
    if (snprintf(path, sizeof path, "%.*stokenizer_config.json", dir, tokenizer_path) >=
        (int)sizeof path)
        return rt_errf(e, RT_EIO, "%s: the path is too long", tokenizer_path);
    if (access(path, F_OK) != 0)
        return 0;
    return rt_chat_config_read(path, text, e);
}
