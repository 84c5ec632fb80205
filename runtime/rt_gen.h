/* runtime/rt_gen.h: the runtime's generation part (gen/), for decoders:
 * `PROG generate`, sampling, the decode steps' team size, tokenizers.
 * A generated program carries it only when the model is a decoder
 * (ir_decoder); its rt_model.generate is then rt_generate. */
#ifndef KILN_RT_GEN_H
#define KILN_RT_GEN_H

#include "kiln_rt.h"

/* ---- generation (rt_generate.c, rt_chat.c, rt_sample.c) --------------- */
/* `PROG generate ...` (argv[1] is "generate" or "chat"; rt_main hands it over): a
 * decoder model prefills a prompt in chunks and draws tokens one by one,
 * printing them; rt_generate.c's comment gives the options and the
 * algorithm. Returns an RT_* status. */
RT_API int rt_generate(int argc, char **argv, const rt_model *md);
/* `PROG chat ...` (argv[1] is "chat"; rt_generate hands it over, so that
 * rt_model.generate serves both): a conversation with the model's chat
 * template; rt_chat.c's comment gives the options and the algorithm. */
RT_API int rt_chat(int argc, char **argv, const rt_model *md);
/* A coin in [0, 1): (x >> 11) * 2^-53, x the next rt_splitmix64 output. */
RT_API double rt_sample_coin(uint64_t *state);
/* The index of the largest of n logits; the lowest among equals. */
RT_API int rt_sample_argmax(const float *logits, int n);
/* The next token: the argmax when temperature is 0, else drawn from
 * softmax(logits / temperature) cut to its top-p nucleus (topp in (0, 1);
 * 0 or 1: all), one rt_sample_coin from state; rt_sample.c says how.
 * logits is overwritten with the probabilities; scratch holds 8 n bytes. */
RT_API int rt_sample(float *logits, int n, double temperature, double topp, uint64_t *state,
                     void *scratch);

/* ---- the decode steps' team size (rt_gov.c) ----------------------------- */
/* How many threads generate's decode steps run on, decided from their
 * times (without --threads): rt_gov.c gives the rules. The caller sets
 * the team (rt_set_threads) to what rt_gov_next says. */
#define RT_GOV_TRIAL 4                  /* steps a trial runs; steps a median takes */
#define RT_GOV_SLOW 1.5                 /* median / best past this: something took a core */
#define RT_GOV_GAIN 0.9                 /* a trial wins below this share of the steps before */
#define RT_GOV_WAIT 8                   /* steps between trials, doubled by each lost one */
#define RT_GOV_WAIT_MAX 256
typedef struct {
    int on;                             /* 0: fixed (--threads, or one thread) */
    int most, cur, trial;               /* sizes: all threads, current, on trial (0: none) */
    double best;                        /* fastest step at cur */
    double last[RT_GOV_TRIAL], tried[RT_GOV_TRIAL];   /* the last steps at cur; the trial's */
    int nlast, ntried;
    int64_t since, wait;                /* steps since the last trial; before the next */
    int64_t fewer;                      /* steps run with fewer threads than the most */
} rt_gov;
/* most: the threads a step may use; fixed: the size may not change. */
RT_API void rt_gov_init(rt_gov *gv, int most, int fixed);
/* The team size the next step runs at: the current one, or a trial's. */
RT_API int rt_gov_next(rt_gov *gv);
/* Takes the time t (seconds, or any one unit) of the step just run at the
 * size rt_gov_next gave. */
RT_API void rt_gov_took(rt_gov *gv, double t);

/* ---- tokenizers (rt_tokenizer.c, _hf.c, _vocab.c, _bpe.c, _sp.c, _gguf.c) */
/* Text to token ids and back, for generation. The format is told by the
 * file's content: llama2.c's tokenizer.bin, encoded as its run.c does
 * (byte fallback, then merges by score), a Hugging Face tokenizer.json
 * with a BPE model: byte-level as GPT-2's and Qwen2's (added tokens, the
 * pre-tokenizer's split, then merges by rank), or SentencePiece-style as
 * Llama 2's and Mistral's (added tokens, spaces as U+2581, characters
 * with byte fallback, then merges by rank), or a GGUF file's metadata,
 * encoded as llama.cpp does: its tokenizer.ggml.model llama
 * (SentencePiece: special tokens, spaces as U+2581, merges by score, byte
 * fallback) or gpt2 (byte-level BPE, the pre-tokenizer tokenizer.ggml.pre
 * names). rt_tokenizer.c's comment gives the formats and what is checked;
 * rt_tokenizer_bpe.c's, rt_tokenizer_sp.c's and rt_tokenizer_gguf.c's
 * what is approximated. */
typedef struct rt_tok rt_tok;
/* Reads and checks the whole file (a GGUF: its tokenizer's keys); *tok is
 * NULL on error. A malformed file is refused with one line "PATH: what
 * is wrong" (a GGUF's keys: "PATH: key 'KEY': what is wrong"). */
RT_API int rt_tok_open(const char *path, rt_tok **tok, rt_err *e);
RT_API void rt_tok_close(rt_tok *t);
/* Ids are [0, rt_tok_size). BOS and EOS: -1 when the tokenizer has none
 * (llama2.c: 1 and 2; tokenizer.json: BOS is the token its post-processor
 * puts before the text, EOS the added token <|endoftext|> (GPT-2, Qwen2),
 * DeepSeek-R1-Distill's end of sentence, Llama 3's <|end_of_text|>, or
 * Llama 2's and Mistral's </s>; GGUF: tokenizer.ggml.bos_token_id and
 * eos_token_id). */
RT_API int rt_tok_size(const rt_tok *t);
RT_API int rt_tok_bos(const rt_tok *t);
RT_API int rt_tok_eos(const rt_tok *t);
/* Whether generation ends at token id: EOS, or with a tokenizer.json any
 * other end of a text or of a chat turn it has (<|im_end|>, Llama 3's
 * <|eot_id|> and <|eom_id|>, Phi-3's <|end|>, Gemma's <end_of_turn>), as
 * these models' generation configs list them; with a GGUF, its EOT and
 * EOM tokens and those llama.cpp ends at by their text. */
RT_API int rt_tok_is_end(const rt_tok *t, int id);
/* The id of the token whose text is exactly `text` (e.g. "<|im_end|>"),
 * or -1. */
RT_API int rt_tok_find(const rt_tok *t, const char *text);
/* A GGUF's tokenizer.chat_template (Jinja text, for chat), else NULL. */
RT_API const char *rt_tok_chat_template(const rt_tok *t);
/* Encodes text (tokenizer.json, GGUF: valid UTF-8) into ids[0, *n), with
 * the tokenizer's own marks when add_bos: BOS first when it puts one
 * there (llama2.c: always; tokenizer.json: its post-processor's; GGUF:
 * when tokenizer.ggml.add_bos_token says so, by default for llama), and
 * a GGUF's EOS last when its tokenizer.ggml.add_eos_token says so. At
 * most cap ids: a text of more tokens is refused ("the text is N tokens,
 * more than CAP", or before encoding when its length alone says so); it
 * never has more than strlen(text) + 2, or SentencePiece-style (where a
 * space is the three bytes of U+2581, each of which may fall back to a
 * byte token, and each stretch of text between added tokens may get one
 * more U+2581 first) 6 * strlen(text) + 2. */
RT_API int rt_tok_encode(const rt_tok *t, const char *text, int add_bos, int32_t *ids, int cap,
                         int *n, rt_err *e);
/* The text to print for token id, generated after prev_id (-1 for none):
 * its bytes (llama2.c: a byte token's byte; after BOS without its leading
 * space, as run.c; SentencePiece-style tokenizer.json: as its decoder
 * says, rt_tokenizer_sp.c; GGUF: by its type, rt_tokenizer_gguf.c), less
 * the end of a UTF-8 character that the next tokens complete, which is
 * held back and printed with them. NUL bytes and ids outside [0, size)
 * give nothing. Valid until the next call. */
RT_API const char *rt_tok_decode_piece(rt_tok *t, int prev_id, int id);
/* What is held back at the end of a text (an incomplete character, as
 * bytes); decoding then starts afresh. Valid until the next call. */
RT_API const char *rt_tok_decode_flush(rt_tok *t);

/* ---- chat templates (rt_chat_tmpl.c) ----------------------------------- */
/* A model's Jinja chat template (tokenizer_config.json's chat_template, a
 * GGUF's tokenizer.chat_template) recognised as one of the families kiln
 * renders by C code, and conversations rendered as that template renders
 * them; rt_chat_tmpl.c gives each family's markers and text. `PROG chat`
 * uses them, and so does `PROG serve` (h-serve's branch): keep this
 * interface stable. */
enum {
    RT_CHAT_CHATML = 1,                 /* Qwen2/2.5/3: <|im_start|> */
    RT_CHAT_LLAMA3,                     /* <|start_header_id|> */
    RT_CHAT_LLAMA2,                     /* [INST] with <<SYS>> */
    RT_CHAT_MISTRAL,                    /* [INST] */
    RT_CHAT_GEMMA,                      /* <start_of_turn> */
    RT_CHAT_PHI3,                       /* <|user|> ... <|end|> */
    RT_CHAT_HARMONY                     /* gpt-oss: <|start|> <|channel|> <|message|> */
};
typedef struct {
    const char *role;                   /* "system", "user" or "assistant" */
    const char *content;
} rt_chat_msg;
/* The family's name ("chatml", "llama3", "llama2", "mistral", "gemma",
 * "phi3", "harmony"), or NULL; and back (0: none). */
RT_API const char *rt_chat_name(int family);
RT_API int rt_chat_family(const char *name);
/* *family: the family name_or_null names (--chat-template NAME; an unknown
 * name is RT_EUSAGE), else the one template_text is recognised as; a
 * template of no known family, or none (NULL), is refused (RT_EINVAL)
 * with one line that says to give --chat-template NAME. */
RT_API int rt_chat_template_find(const char *template_text, const char *name_or_null,
                                 int *family, rt_err *e);
/* The conversation msgs[0, n) as the family's template renders it, with
 * the assistant's header after it when add_generation_prompt; bos and eos
 * are the tokenizer's texts of its BOS and EOS (NULL or "": none), which
 * some families write. Roles other than system, user, assistant are
 * refused. Returns a malloc'd string, or NULL with e set. */
RT_API char *rt_chat_render(int family, const rt_chat_msg *msgs, int n,
                            int add_generation_prompt, const char *bos, const char *eos,
                            rt_err *e);
/* The model's chat template, malloc'd into *text: the tokenizer's own (a
 * GGUF's; tok may be NULL), else the chat_template of tokenizer_config.json beside
 * tokenizer_path (a string, or the list entry named "default"); NULL
 * when there is none. A malformed tokenizer_config.json is one line
 * "PATH: what is wrong" (RT_EINVAL). */
RT_API int rt_chat_template_load(const rt_tok *tok, const char *tokenizer_path, char **text,
                                 rt_err *e);

/* The symbols of this part that generated code may call: the JIT hands
 * them to libtcc (X(name) per function; kiln_rt.h's RT_CORE_SYMBOLS). */
#define RT_GEN_SYMBOLS(X)                                                   \
    X(rt_generate) X(rt_tok_open) X(rt_tok_close) X(rt_tok_size)            \
    X(rt_tok_bos) X(rt_tok_eos) X(rt_tok_is_end) X(rt_tok_find)             \
    X(rt_tok_chat_template) X(rt_tok_encode) X(rt_tok_decode_piece)         \
    X(rt_tok_decode_flush)

#endif
