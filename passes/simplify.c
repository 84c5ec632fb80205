/* passes/simplify.c: graph clean-ups before lowering: constants folded,
 * identities and dead nodes removed, transposes folded into matmul flags,
 * reshape chains merged.
 *
 * Contract: every output computes the same values as before (bit for bit,
 * except that x + 0 and x - 0 give +0 where x is -0, which compares equal),
 * with fewer or cheaper nodes. Inputs, weights and states are never
 * removed (they are the API). A kept node keeps its name and `where`, and
 * an output is never replaced by another node, so each output keeps the
 * name the user gave it (`--output NAME=...`): a rewrite that would do so
 * is skipped and noted (lowering copies an output anyway, and
 * canonicalize-memrefs writes its operand straight into the output, so
 * nothing is lost). Notes name nodes by their ids in the input graph, the
 * previous stage's dump.
 *
 * 1. In node order, a node's operands are first redirected to their
 *    replacements (so every rule below sees simplified operands), then:
 *    a. constant folding: a node whose operands are all constants and whose
 *       result is an f32 scalar becomes a constant, computed by the op's
 *       own reference kernel so that folding agrees with the reference
 *       (a NaN stays computed at run time: C spells no NaN literal);
 *    b. a reshape of a reshape reshapes the inner one's operand instead;
 *    c. matmul(a, transpose(b)), the transpose swapping the last two axes
 *       and keeping the others, becomes matmul(a, b) with transpose_b
 *       flipped;
 *    d. identities: x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1 (the 1 and 0
 *       constants, the result of x's own shape and dtype), a reshape to
 *       x's own shape and a transpose by the identity perm are replaced
 *       by x in every later use.
 * 2. Dead nodes: a node is live when an output or a cache_write (it writes
 *    a state that lives across calls) needs it; every other node is
 *    removed, except inputs, weights and states. Replaced nodes and
 *    constants left unused go without a note of their own: the rewrite
 *    that left them unused was noted.
 * 3. The survivors are renumbered. */
#include "passes.h"

#include <string.h>

typedef struct {
    Module *m;
    Node **rep;          /* by input id: the node replacing it, or NULL */
    char *is_output;     /* by input id */
    Tensor *t;           /* by input id: the reference's view of a fold */
    int changed;
} Simp;

/* "%5 'name'", or "%5" for a nameless node; control bytes as \xNN so
 * that a note stays on its line. */
static const char *label(Arena *a, const Node *n)
{
    if (!n->name)
        return arena_printf(a, "%%%d", n->id);
    size_t len = strlen(n->name);
    char *s = arena_alloc(a, 4 * len + 1), *q = s;
    for (const unsigned char *p = (const unsigned char *)n->name; *p; p++)
        q += *p < 0x20 || *p == 0x7f ? sprintf(q, "\\x%02x", *p) : sprintf(q, "%c", *p);
    return arena_printf(a, "%%%d '%s'", n->id, s);
}

static void note(Simp *sp, const char *text)
{
    ir_note(sp->m->a, &sp->m->notes, "%s", text);
    sp->changed = 1;
}

/* ---- 1a. constant folding ------------------------------------------------ */

static Tensor scalar(float *f) { return (Tensor){DT_F32, 0, {0}, 1, f, NULL}; }

static int fold(Simp *sp, Node *n)
{
    Arena *a = sp->m->a;
    if (n->rank != 0 || n->dtype != DT_F32 || n->nin == 0)
        return 0;
    for (int j = 0; j < n->nin; j++)
        if (n->in[j]->op != OP_CONST)
            return 0;
    float *v = arena_alloc(a, sizeof *v * (size_t)(n->nin + 1));
    for (int j = 0; j < n->nin; j++) {
        v[j] = (float)n->in[j]->value;
        sp->t[n->in[j]->id] = scalar(&v[j]);
    }
    sp->t[n->id] = scalar(&v[n->nin]);
    RefCx cx = {sp->m, sp->t, "", 0, 1, NULL};
    cx.peers = &cx;                /* one rank: a collective over more stays */
    if (op_table[n->op].ref(&cx, n) != 0 || v[n->nin] != v[n->nin])
        return 0;                  /* run-time errors and NaNs stay at run time */
    double value = v[n->nin];
    note(sp, arena_printf(a, "folded %s %s to %.9g", label(a, n), op_table[n->op].name, value));
    n->op = OP_CONST;
    n->in = NULL;
    n->nin = 0;
    n->value = value;
    attrs_default(n);
    return 1;
}

/* ---- 1b, 1c. reshape chains, transposes into matmul ------------------- */

static void merge_reshape(Simp *sp, Node *n)
{
    Node *x = n->in[0];
    if (n->op != OP_RESHAPE || x->op != OP_RESHAPE)
        return;
    Arena *a = sp->m->a;
    note(sp, arena_printf(a, "reshape %s merged into reshape %s", label(a, x), label(a, n)));
    n->in[0] = x->in[0];
}

/* The perm of transpose t as axes of its operand. */
static void perm_of(const Node *t, int *p)
{
    const AttrVal *perm = attr_v(t, "perm");
    for (int d = 0; d < perm->nints; d++)
        p[d] = axis_norm(perm->ints[d], t->rank);
}

static int swaps_last_two(const Node *t)
{
    int p[KILN_MAX_RANK], r = t->rank;
    if (r < 2)
        return 0;
    perm_of(t, p);
    for (int d = 0; d < r - 2; d++)
        if (p[d] != d)
            return 0;
    return p[r - 2] == r - 1 && p[r - 1] == r - 2;
}

static void fold_transpose(Simp *sp, Node *n)
{
    if (n->op != OP_MATMUL)
        return;
    Node *t = n->in[1];
    if (t->op != OP_TRANSPOSE || !swaps_last_two(t))
        return;
    AttrVal *tb = &n->attrs.v[attr_index(OP_MATMUL, "transpose_b")];
    tb->i = !tb->i;
    n->in[1] = t->in[0];
    Arena *a = sp->m->a;
    note(sp, arena_printf(a, "transpose %s folded into matmul %s (transpose_b=%s)", label(a, t),
                          label(a, n), tb->i ? "true" : "false"));
}

/* ---- 1d. identities ------------------------------------------------------- */

static int is_const(const Node *x, double v) { return x->op == OP_CONST && x->value == v; }

static int same_type(const Node *x, const Node *y)
{
    return x->dtype == y->dtype && x->rank == y->rank &&
           memcmp(x->dims, y->dims, sizeof x->dims[0] * (size_t)x->rank) == 0;
}

static int identity_perm(const Node *t)
{
    int p[KILN_MAX_RANK];
    perm_of(t, p);
    for (int d = 0; d < t->rank; d++)
        if (p[d] != d)
            return 0;
    return 1;
}

/* The operand n equals, or NULL; *why says which identity. */
static Node *identity(const Node *n, const char **why)
{
    Node *x = NULL, *a = n->in[0], *b = n->nin == 2 ? n->in[1] : NULL;
    switch (n->op) {
    case OP_MUL:
        x = is_const(b, 1) ? a : is_const(a, 1) ? b : NULL;
        *why = "a product by 1";
        break;
    case OP_ADD:
        x = is_const(b, 0) ? a : is_const(a, 0) ? b : NULL;
        *why = "a sum with 0";
        break;
    case OP_SUB:
        x = is_const(b, 0) ? a : NULL;
        *why = "a difference with 0";
        break;
    case OP_DIV:
        x = is_const(b, 1) ? a : NULL;
        *why = "a quotient by 1";
        break;
    case OP_RESHAPE:
        x = a;
        *why = "a reshape to its operand's shape";
        break;
    case OP_TRANSPOSE:
        x = identity_perm(n) ? a : NULL;
        *why = "a transpose by the identity perm";
        break;
    default: break;
    }
    return x && same_type(x, n) ? x : NULL;
}

static void replace_identity(Simp *sp, Node *n)
{
    const char *why;
    Node *x = identity(n, &why);
    if (!x)
        return;
    Arena *a = sp->m->a;
    if (sp->is_output[n->id]) {
        ir_note(a, &sp->m->notes, "kept %s, %s: it is an output", label(a, n), why);
        return;
    }
    sp->rep[n->id] = x;
    note(sp, arena_printf(a, "replaced %s by %s: %s", label(a, n), label(a, x), why));
}

/* ---- 2. dead nodes ---------------------------------------------------------- */

static void remove_dead(Simp *sp)
{
    Module *m = sp->m;
    char *live = arena_alloc(m->a, (size_t)m->nnodes + 1);
    for (int i = 0; i < m->noutputs; i++)
        live[m->outputs[i]->id] = 1;
    for (int i = m->nnodes - 1; i >= 0; i--) {
        Node *n = m->nodes[i];
        live[i] |= n->op == OP_CACHE_WRITE || (OP_IS_LEAF(n->op) && n->op != OP_CONST);
        for (int j = 0; live[i] && j < n->nin; j++)
            live[n->in[j]->id] = 1;
    }
    int kept = 0;
    for (int i = 0; i < m->nnodes; i++) {
        Node *n = m->nodes[i];
        if (live[i]) {
            m->nodes[kept++] = n;
            continue;
        }
        sp->changed = 1;
        if (n->op != OP_CONST && !sp->rep[i])
            ir_note(m->a, &m->notes, "removed %s: no output needs it", label(m->a, n));
    }
    m->nnodes = kept;
}

int pass_simplify(Module *m, PassCtx *cx)
{
    (void)cx;
    size_t count = (size_t)m->nnodes + 1;
    Simp sp = {m, arena_alloc(m->a, sizeof(Node *) * count), arena_alloc(m->a, count),
               arena_alloc(m->a, sizeof(Tensor) * count), 0};
    for (int i = 0; i < m->noutputs; i++)
        sp.is_output[m->outputs[i]->id] = 1;
    for (int i = 0; i < m->nnodes; i++) {
        Node *n = m->nodes[i];
        for (int j = 0; j < n->nin; j++)
            if (sp.rep[n->in[j]->id])
                n->in[j] = sp.rep[n->in[j]->id];
        if (OP_IS_LEAF(n->op) || fold(&sp, n))
            continue;
        merge_reshape(&sp, n);
        fold_transpose(&sp, n);
        replace_identity(&sp, n);
    }
    remove_dead(&sp);
    ir_module_renumber(m);
    return sp.changed;
}
