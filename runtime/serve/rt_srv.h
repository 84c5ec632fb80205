/* runtime/serve/rt_srv.h: what the serving part's files share (not for
 * generated code): a request's body read (rt_serve_req.c). */
#ifndef KILN_RT_SRV_H
#define KILN_RT_SRV_H

#include "runtime/rt_gen.h"
#include "runtime/rt_serve.h"

#define RT_SERVE_MAX_STOP 4             /* "stop" strings, as OpenAI's API allows */

/* A request's body as rt_serve reads it (rt_serve_parse). */
typedef struct {
    char *prompt;                       /* completions: the prompt */
    rt_chat_msg *msgs;                  /* chat: the messages, nmsgs */
    int nmsgs;
    int stream, ignore_eos;
    int64_t max_tokens;                 /* -1: not given */
    rt_sampler samp;                    /* temperature 1, top_p 1, no other cut or penalty */
    uint64_t seed;                      /* default 1 */
    const char *stop[RT_SERVE_MAX_STOP];        /* non-empty, nstop of them (owned) */
    int nstop;
} rt_serve_req;
/* Reads body[0, len) (NUL at body[len]) of a completions request (chat 0:
 * "prompt" a string) or a chat one ("messages", objects of string role
 * and content) into *r: fields of the wrong type, values out of range, a
 * missing prompt or messages, and malformed JSON are refused with one
 * line in e (RT_EINVAL); unknown fields are skipped. rt_serve_req_free
 * frees what it holds. rt_serve_req.c lists the fields. */
RT_API int rt_serve_parse(const char *body, size_t len, int chat, rt_serve_req *r, rt_err *e);
RT_API void rt_serve_req_free(rt_serve_req *r);

#endif
