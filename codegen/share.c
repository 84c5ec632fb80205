/* codegen/share.c: the table of kernel templates (codegen.h, "share.c"):
 * text to entry, open addressing over an FNV-1a hash of the text, grown
 * at half full. A model of 48 layers has a few dozen distinct kernels
 * among thousands; its experts' copies at open, three among 18432. */
#include "codegen.h"

#include <string.h>

struct CgShare {
    Arena *a;
    CgShared **slot;
    size_t cap, n;
    int next;
};

CgShare *cg_share_new(Arena *a)
{
    CgShare *sh = arena_alloc(a, sizeof *sh);
    sh->a = a;
    sh->cap = 64;
    sh->slot = arena_alloc(a, sizeof *sh->slot * sh->cap);
    return sh;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static CgShared **find(CgShare *sh, const char *text)
{
    size_t i = fnv(text) & (sh->cap - 1);
    while (sh->slot[i] && strcmp(sh->slot[i]->text, text))
        i = (i + 1) & (sh->cap - 1);
    return &sh->slot[i];
}

CgShared *cg_share_find(CgShare *sh, const char *text)
{
    CgShared **at = find(sh, text);
    if (*at)
        return *at;
    if (2 * (sh->n + 1) > sh->cap) {
        CgShared **old = sh->slot;
        size_t n = sh->cap;
        sh->cap *= 2;
        sh->slot = arena_alloc(sh->a, sizeof *sh->slot * sh->cap);
        for (size_t i = 0; i < n; i++)
            if (old[i])
                *find(sh, old[i]->text) = old[i];
        at = find(sh, text);
    }
    *at = arena_alloc(sh->a, sizeof **at);
    (*at)->text = text;
    (*at)->n = -1;
    sh->n++;
    return *at;
}

int cg_share_next(CgShare *sh) { return sh->next++; }
