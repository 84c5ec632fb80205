/* ir/op_elementwise.c: add sub mul div maximum minimum (NumPy broadcast),
 * relu sigmoid tanh exp log sqrt rsqrt neg abs silu gelu. f32 only. */
#include "ops.h"

#include <math.h>

const AttrSpec gelu_attrs[] = {
    {"approximate", AT_ENUM, 0, 0, 0, "none|tanh", 0, 0},
    {0},
};

/* ---- binary ------------------------------------------------------------ */

int infer_binary(InferCx *cx, Node *n)
{
    int bad = need_dtype(cx, n, 0, DT_F32) | need_dtype(cx, n, 1, DT_F32);
    Node *x = n->in[0], *y = n->in[1];
    int64_t dims[KILN_MAX_RANK];
    int r = shape_broadcast(x->rank, x->dims, y->rank, y->dims, dims);
    if (r < 0) {
        diag(cx->d, n->where, "%s: shapes %s and %s do not broadcast",
             op_table[n->op].name, shp(cx, x), shp(cx, y));
        return -1;
    }
    set_shape(n, DT_F32, r, dims);
    return bad;
}

static double binary(OpKind op, double x, double y)
{
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    case OP_DIV: return x / y;
    case OP_MAXIMUM: return x > y ? x : y;
    case OP_MINIMUM: return x < y ? x : y;
    default: KILN_BUG("not a binary op: %d", op);
    }
}

int ref_binary(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_in(cx, n, 1), *o = ref_out(cx, n);
    int64_t idx[KILN_MAX_RANK] = {0};
    for (int64_t i = 0; i < o->count; i++, index_next(o->rank, o->dims, idx)) {
        double a = x->f[bcast_offset(o->rank, idx, x->rank, x->dims)];
        double b = y->f[bcast_offset(o->rank, idx, y->rank, y->dims)];
        o->f[i] = (float)binary(n->op, a, b);
    }
    return 0;
}

static Expr *binary_expr(Arena *a, OpKind op, Expr *x, Expr *y)
{
    switch (op) {
    case OP_ADD: return e_bin(a, B_ADD, x, y);
    case OP_SUB: return e_bin(a, B_SUB, x, y);
    case OP_MUL: return e_bin(a, B_MUL, x, y);
    case OP_DIV: return e_bin(a, B_DIV, x, y);
    case OP_MAXIMUM: return e_bin(a, B_MAX, x, y);
    case OP_MINIMUM: return e_bin(a, B_MIN, x, y);
    default: KILN_BUG("not a binary op: %d", op);
    }
}

static const char *ew_name(LowerCx *cx, Node *n)
{
    return arena_printf(cx->a, "%s_n%lld", op_table[n->op].name,
                        (long long)node_count(n));
}

void lower_binary(LowerCx *cx, Node *n)
{
    Kernel *k = lw_kernel(cx, n, ew_name(cx, n));
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    Expr *x = lw_bcast_load(cx, n->in[0], n->rank, v);
    Expr *y = lw_bcast_load(cx, n->in[1], n->rank, v);
    s_store(cx->a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET,
            binary_expr(cx->a, n->op, x, y));
}

/* ---- unary ------------------------------------------------------------- */

int infer_unary(InferCx *cx, Node *n)
{
    set_like(n, n->in[0]);
    n->dtype = DT_F32;
    return need_dtype(cx, n, 0, DT_F32);
}

static double gelu(double x, int tanh_approx)
{
    if (tanh_approx)
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double unary(const Node *n, double x)
{
    switch (n->op) {
    case OP_RELU: return x > 0 ? x : 0;
    case OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case OP_TANH: return tanh(x);
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_SQRT: return sqrt(x);
    case OP_RSQRT: return 1.0 / sqrt(x);
    case OP_NEG: return -x;
    case OP_ABS: return fabs(x);
    case OP_SILU: return x / (1.0 + exp(-x));
    case OP_GELU: return gelu(x, attr_i(n, "approximate") == 1);
    default: KILN_BUG("not a unary op: %d", n->op);
    }
}

int ref_unary(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *o = ref_out(cx, n);
    for (int64_t i = 0; i < o->count; i++)
        o->f[i] = (float)unary(n, x->f[i]);
    return 0;
}

/* The loop IR expression of gelu; the tanh form as PyTorch writes it. */
static Expr *gelu_expr(Arena *a, Expr *x, int tanh_approx)
{
    Expr *inner;
    if (tanh_approx) {
        Expr *x3 = e_mul(a, e_mul(a, x, x), x);
        inner = e_un(a, U_TANH, e_mul(a, e_flt(a, sqrt(2.0 / M_PI)),
                                      e_add(a, x, e_mul(a, e_flt(a, 0.044715), x3))));
    } else {
        inner = e_un(a, U_ERF, e_mul(a, x, e_flt(a, M_SQRT1_2)));
    }
    return e_mul(a, e_mul(a, e_flt(a, 0.5), x), e_add(a, e_flt(a, 1.0), inner));
}

static Expr *unary_expr(Arena *a, const Node *n, Expr *x)
{
    switch (n->op) {
    case OP_RELU: return e_bin(a, B_MAX, x, e_flt(a, 0.0));
    case OP_SIGMOID: return e_un(a, U_SIGMOID, x);
    case OP_TANH: return e_un(a, U_TANH, x);
    case OP_EXP: return e_un(a, U_EXP, x);
    case OP_LOG: return e_un(a, U_LOG, x);
    case OP_SQRT: return e_un(a, U_SQRT, x);
    case OP_RSQRT: return e_un(a, U_RSQRT, x);
    case OP_NEG: return e_un(a, U_NEG, x);
    case OP_ABS: return e_un(a, U_ABS, x);
    case OP_SILU: return e_mul(a, x, e_un(a, U_SIGMOID, x));
    case OP_GELU: return gelu_expr(a, x, attr_i(n, "approximate") == 1);
    default: KILN_BUG("not a unary op: %d", n->op);
    }
}

void lower_unary(LowerCx *cx, Node *n)
{
    Kernel *k = lw_kernel(cx, n, ew_name(cx, n));
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    Expr *x = lw_bcast_load(cx, n->in[0], n->rank, v);
    s_store(cx->a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET,
            unary_expr(cx->a, n, x));
}
