/* runtime/rt_serve.h: the serving part of the runtime (runtime/serve/),
 * carried by programs of a slotted decoder (kiln build --slots N) and
 * linked with libmicrohttpd (docs/serving.md; docs/design.md says why a
 * part of its own).
 *
 *   PROG serve [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel B]
 *        [--queue Q] [--max-tokens M] [--weights W] [--tokenizer F]
 *        [--chat-template NAME] [--threads N]
 *
 * An OpenAI-compatible HTTP server: POST /v1/completions and
 * /v1/chat/completions (streamed as server-sent events, or not), GET
 * /v1/models and /health. rt_serve.c's comment gives the algorithm. */
#ifndef KILN_RT_SERVE_H
#define KILN_RT_SERVE_H

#include "runtime/kiln_rt.h"

RT_API int rt_serve(int argc, char **argv, const rt_model *md);

#endif
