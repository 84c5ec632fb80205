/* ir/optable.c: the op table, expanded from ops.def. */
#include "ops.h"

#include <string.h>

const AttrSpec no_attrs[] = {{0}};

const OpDesc op_table[OP_COUNT] = {
#define OP(e, name, min_in, max_in, attrs, infer, ref, lower)              \
    [OP_##e] = {name, min_in, max_in, attrs, infer, ref, lower},
#include "ops.def"
#undef OP
};

int op_lookup(const char *name)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (!OP_IS_LEAF(op) && strcmp(op_table[op].name, name) == 0)
            return op;
    return -1;
}

int attr_index(OpKind op, const char *name)
{
    const AttrSpec *s = op_table[op].attrs;
    for (int i = 0; s[i].name; i++)
        if (strcmp(s[i].name, name) == 0)
            return i;
    return -1;
}

static int attr_must(const Node *n, const char *name)
{
    int i = attr_index(n->op, name);
    if (i < 0)
        KILN_BUG("op %s has no attribute %s", op_table[n->op].name, name);
    return i;
}

int64_t attr_i(const Node *n, const char *name)
{
    return n->attrs.v[attr_must(n, name)].i;
}

double attr_f(const Node *n, const char *name)
{
    return n->attrs.v[attr_must(n, name)].f;
}

const AttrVal *attr_v(const Node *n, const char *name)
{
    return &n->attrs.v[attr_must(n, name)];
}

void attrs_default(Node *n)
{
    const AttrSpec *s = op_table[n->op].attrs;
    for (int i = 0; s[i].name; i++) {
        n->attrs.v[i].i = s[i].i;
        n->attrs.v[i].f = s[i].f;
        n->attrs.v[i].ints = NULL;
        n->attrs.v[i].nints = 0;
        n->attrs.v[i].given = 0;
    }
}
