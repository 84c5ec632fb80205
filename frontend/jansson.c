/* frontend/jansson.c: jansson's parser on kiln's allocator (ir_malloc),
 * out of memory included.
 *
 * jansson cannot be trusted after an allocation fails: it reports a
 * syntax error at best, and at worst its lexer carries on without the
 * byte it failed to save and reads and writes past its buffer (jansson
 * 2.14, load.c lex_save; still so upstream). So a failed allocation never
 * returns to jansson: block_alloc longjmps back to fe_json_load, which
 * frees every block jansson had (each is linked into `blocks` for this)
 * and takes the arena's out-of-memory exit. kiln holds one jansson tree
 * at a time, the one fe_parse walks, so every block in the list is that
 * tree's. */
#include "fe.h"

#include <stdint.h>

typedef struct JBlock JBlock;
struct JBlock {
    JBlock *prev, *next;
    _Alignas(max_align_t) unsigned char data[];   /* what jansson gets */
};

static JBlock blocks = {.prev = &blocks, .next = &blocks};
static jmp_buf *parsing;          /* fe_json_load's recovery point */

static void *block_alloc(size_t size)
{
    JBlock *b = size <= SIZE_MAX - sizeof *b ? ir_malloc(sizeof *b + size) : NULL;
    if (!b && parsing)
        longjmp(*parsing, 1);
    if (!b)
        return NULL;
    b->prev = &blocks;
    b->next = blocks.next;
    b->next->prev = b;
    blocks.next = b;
    return b->data;
}

static void block_free(void *p)
{
    if (!p)
        return;
    JBlock *b = (JBlock *)((unsigned char *)p - offsetof(JBlock, data));
    b->prev->next = b->next;
    b->next->prev = b->prev;
    ir_free(b);
}

json_t *fe_json_load(Arena *a, const char *text, size_t len, json_error_t *err)
{
    jmp_buf oom;
    if (setjmp(oom)) {
        parsing = NULL;
        while (blocks.next != &blocks)
            block_free(blocks.next->data);
        arena_oom(a);
    }
    parsing = &oom;
    json_set_alloc_funcs(block_alloc, block_free);
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, err);
    parsing = NULL;
    return root;
}
