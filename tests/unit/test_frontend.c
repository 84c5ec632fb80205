/* tests/unit/test_frontend.c: the frontend (frontend/): a valid model
 * becomes the expected graph, and each kind of bad file gives exactly the
 * expected lines, no more. Test JSON is written with single quotes, which
 * stand for double quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "tests/unit/testlib.h"

/* A model named m around body; X declares the input x: f32[4,8]. */
#define M(body) "{'format': 'kiln/1', 'name': 'm', " body "}"
#define X "'inputs': [{'name': 'x', 'shape': [4, 8]}], "

typedef struct {
    Arena *a;
    Diags d;
    Module *m;
} Run;

static void parse(Run *r, const char *text)
{
    char *t = strdup(text);
    for (char *p = t; *p; p++)
        if (*p == '\'')
            *p = '"';
    r->a = arena_new();
    diag_init(&r->d, r->a, "model.json");
    r->m = fe_parse(r->a, "model.json", t, strlen(t), &r->d);
    free(t);
}

/* Asserts text is refused with exactly the n lines given, in order. */
static void refused(const char *text, int n, ...)
{
    Run r;
    parse(&r, text);
    if (r.d.n != n)
        diag_print(&r.d, stderr);
    assert_null(r.m);
    assert_int_equal(r.d.n, n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        assert_string_equal(r.d.lines[i], va_arg(ap, const char *));
    va_end(ap);
    arena_free(r.a);
}

/* Asserts text is accepted and prints as the graph kir. */
static void accepted(const char *text, const char *kir)
{
    Run r;
    parse(&r, text);
    diag_print(&r.d, stderr);
    assert_non_null(r.m);
    char *buf = tl_graph_text(r.m);
    assert_string_equal(buf, kir);
    free(buf);
    arena_free(r.a);
}

/* ---- valid models ------------------------------------------------------ */

static void test_mlp(void **state)
{
    (void)state;
    accepted("{'format': 'kiln/1', 'name': 'mlp_block',"
             " 'inputs': [{'name': 'x', 'shape': [4, 8], 'dtype': 'f32'}],"
             " 'weights': [{'name': 'w_up', 'shape': [16, 8]},"
             "             {'name': 'w_down', 'shape': [8, 16],"
             "              'init': {'random': {'seed': 7, 'scale': 0.02}}},"
             "             {'name': 'b', 'shape': [2], 'init': {'data': [1, -2.5]}},"
             "             {'name': 'g', 'shape': [], 'init': {'fill': 0.5}}],"
             " 'state': [],"
             " 'nodes': ["
             "   {'name': 'up', 'op': 'linear', 'inputs': ['x', 'w_up']},"
             "   {'name': 'act', 'op': 'gelu', 'inputs': ['up'],"
             "    'attrs': {'approximate': 'tanh'}},"
             "   {'name': 'down', 'op': 'linear', 'inputs': ['act', 'w_down']}],"
             " 'outputs': ['down', 'x']}",
             "graph mlp_block\n"
             "  input  %0 \"x\" : f32[4,8]\n"
             "  weight %1 \"w_up\" : f32[16,8]\n"
             "  weight %2 \"w_down\" : f32[8,16] init random(seed=7, scale=0.02)\n"
             "  weight %3 \"b\" : f32[2] init data(1, -2.5)\n"
             "  weight %4 \"g\" : f32[] init fill(0.5)\n"
             "  %5 \"up\" = linear %0, %1 : f32[4,16]\n"
             "  %6 \"act\" = gelu %5 {approximate=tanh} : f32[4,16]\n"
             "  %7 \"down\" = linear %6, %2 : f32[4,8]\n"
             "  output %7\n"
             "  output %0\n");
}

static void test_module_fields(void **state)
{
    (void)state;
    Run r;
    parse(&r, M(X "'weights': [{'name': 'w', 'shape': [8]}],"
                  " 'state': [{'name': 's', 'shape': [2, 8]}],"
                  " 'nodes': [{'name': 'y', 'op': 'mul', 'inputs': ['x', 'w']},"
                  "           {'name': 'z', 'op': 'gelu', 'inputs': ['y'],"
                  "            'attrs': {'approximate': 'none'}},"
                  "           {'name': 'u', 'op': 'gelu', 'inputs': ['z']}],"
                  " 'outputs': ['u', 'y']"));
    assert_non_null(r.m);
    assert_string_equal(r.m->name, "m");
    assert_string_equal(r.m->file, "model.json");
    assert_int_equal(r.m->ninputs, 1);
    assert_int_equal(r.m->nweights, 1);
    assert_int_equal(r.m->nstates, 1);
    assert_string_equal(r.m->states[0]->where, "state[0]");
    assert_string_equal(r.m->nodes[3]->where, "nodes[0]");
    assert_int_equal(r.m->nodes[4]->attrs.v[0].given, 1);
    assert_int_equal(r.m->nodes[5]->attrs.v[0].given, 0);
    assert_int_equal(r.m->noutputs, 2);
    assert_ptr_equal(r.m->outputs[0], r.m->nodes[5]);
    assert_ptr_equal(r.m->outputs[1], r.m->nodes[3]);
    arena_free(r.a);
}

static void test_const_input(void **state)
{
    (void)state;
    Run r;
    parse(&r, M(X "'nodes': [{'name': 'y', 'op': 'add', 'inputs': [2, 'x']},"
                  "          {'name': 'z', 'op': 'mul', 'inputs': ['y', 0.1]}],"
                  " 'outputs': ['z']"));
    assert_non_null(r.m);
    assert_int_equal(r.m->nnodes, 5);
    Node *c = r.m->nodes[1], *c2 = r.m->nodes[3];
    assert_int_equal(c->op, OP_CONST);
    assert_int_equal(c->rank, 0);
    assert_int_equal(c->dtype, DT_F32);
    assert_true(c->value == 2.0);
    assert_string_equal(c->where, "nodes[0].inputs[0]");
    assert_ptr_equal(r.m->nodes[2]->in[0], c);
    assert_true(c2->value == (double)0.1f);       /* rounded to f32 */
    assert_string_equal(c2->where, "nodes[1].inputs[1]");
    arena_free(r.a);
}

static void test_topk_outputs(void **state)
{
    (void)state;
    accepted(M(X "'nodes': [{'name': 't', 'op': 'topk', 'inputs': ['x'],"
                 " 'outputs': ['v', 'i'], 'attrs': {'k': 2}},"
                 " {'name': 'w', 'op': 'relu', 'inputs': ['v']}],"
                 " 'outputs': ['i', 'w']"),
             "graph m\n"
             "  input  %0 \"x\" : f32[4,8]\n"
             "  %1 \"v\" = topk %0 {k=2, axis=-1, result=values} : f32[4,2]\n"
             "  %2 \"i\" = topk %0 {k=2, axis=-1, result=indices} : i32[4,2]\n"
             "  %3 \"w\" = relu %1 : f32[4,2]\n"
             "  output %2\n"
             "  output %3\n");
    accepted(M(X "'nodes': [{'name': 't', 'op': 'topk', 'inputs': ['x'], 'attrs': {'k': 3}}],"
                 " 'outputs': ['t']"),
             "graph m\n"
             "  input  %0 \"x\" : f32[4,8]\n"
             "  %1 \"t\" = topk %0 {k=3, axis=-1, result=values} : f32[4,3]\n"
             "  output %1\n");
}

static void test_topk_errors(void **state)
{
    (void)state;
    refused(M(X "'nodes': [{'name': 't', 'op': 'topk', 'inputs': ['x'],"
                " 'outputs': ['v', 'i'], 'attrs': {'k': 2}},"
                " {'name': 'w', 'op': 'relu', 'inputs': ['t']}],"
                " 'outputs': ['t']"),
            2,
            "model.json: nodes[1].inputs[0]: 't' names a node with several results;"
            " use 'v' or 'i'",
            "model.json: outputs[0]: 't' names a node with several results; use 'v' or 'i'");
    refused(M(X "'nodes': [{'op': 'topk', 'inputs': ['x'], 'outputs': ['v', 'v', 'i'],"
                " 'attrs': {'k': 2, 'result': 'indices'}}], 'outputs': ['x']"),
            3,
            "model.json: nodes[0].outputs: topk outputs must be 2 names [values, indices], got 3",
            "model.json: nodes[0].outputs[1]: 'v' is already defined at nodes[0].outputs[0]",
            "model.json: nodes[0].attrs: unknown attribute 'result' for topk");
    refused(M(X "'nodes': [{'op': 'relu', 'inputs': ['x'], 'outputs': ['a', 'b']},"
                " {'name': 'c', 'op': 'relu', 'inputs': ['a']}], 'outputs': ['c']"),
            1, "model.json: nodes[0].outputs: only topk takes outputs; relu has one result");
    /* infer_topk's problem (its text is op_reduce.c's) is reported once,
     * not once per result */
    Run r;
    parse(&r, M(X "'nodes': [{'op': 'topk', 'inputs': ['x'], 'outputs': ['v', 'i'],"
                  " 'attrs': {'k': 9}}], 'outputs': ['v']"));
    assert_null(r.m);
    assert_int_equal(r.d.n, 1);
    assert_true(strncmp(r.d.lines[0], "model.json: nodes[0]", 20) == 0);
    arena_free(r.a);
}

/* ---- the file and the top level -------------------------------------- */

static void test_syntax(void **state)
{
    (void)state;
    refused("{'format': 'kiln/1',\n 'name': 'm',}", 1,
            "model.json: line 2, column 14: string or '}' expected near '}'");
    refused("", 1, "model.json: line 1, column 0: unexpected token near end of file");
    refused("{'a': 1,\n 'a': 2}", 1,
            "model.json: line 2, column 4: duplicate object key near '\"a\"'");
}

static void test_top_level(void **state)
{
    (void)state;
    refused("[1, 2]", 1, "model.json: the top level must be an object, got an array");
    refused("7", 1, "model.json: the top level must be an object, got 7");
    refused(M(X "'nodes': [], 'outputs': ['x'], 'foo': 1, 'bar': {}"), 2,
            "model.json: unknown key 'foo'", "model.json: unknown key 'bar'");
    refused("{'name': 'm', 'nodes': [], 'outputs': []}", 2,
            "model.json: format: missing; this kiln reads \"kiln/1\"",
            "model.json: outputs: outputs must name at least one value");
    refused("{'format': 'kiln/2', 'foo': 1, 'nodes': 3}", 1,
            "model.json: format: unsupported format \"kiln/2\"; this kiln reads \"kiln/1\"");
    refused("{'format': 1}", 1,
            "model.json: format: unsupported format 1; this kiln reads \"kiln/1\"");
}

static void test_model_name(void **state)
{
    (void)state;
    refused("{'format': 'kiln/1', 'name': 'my-model', 'nodes': [], 'outputs': ['x']}", 2,
            "model.json: name: name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*),"
            " got \"my-model\"",
            "model.json: outputs[0]: 'x' is not defined");
    refused("{'format': 'kiln/1', 'name': '9a', " X "'nodes': [], 'outputs': ['x']}", 1,
            "model.json: name: name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*),"
            " got \"9a\"");
    refused("{'format': 'kiln/1', 'name': "
            "'a1234567890123456789012345678901234567890123456789012345678901234', "
            X "'nodes': [], 'outputs': ['x']}", 1,
            "model.json: name: name has 65 characters, more than 64");
    refused("{'format': 'kiln/1', 'name': ['m'], " X "'nodes': [], 'outputs': ['x']}", 1,
            "model.json: name: name must be a string, got an array");
    refused("{'format': 'kiln/1', " X "'nodes': [], 'outputs': ['x']}", 1,
            "model.json: name: missing");
}

static void test_sections(void **state)
{
    (void)state;
    refused(M(X "'outputs': ['x', 'y']"), 1, "model.json: nodes: missing");
    refused(M(X "'nodes': []"), 1, "model.json: outputs: missing");
    refused(M(X "'nodes': [], 'outputs': []"), 1,
            "model.json: outputs: outputs must name at least one value");
    refused(M(X "'nodes': {}, 'outputs': 'x'"), 2,
            "model.json: nodes: nodes must be an array, got an object",
            "model.json: outputs: outputs must be an array of names, got \"x\"");
    refused(M("'inputs': 1, 'nodes': [{'name': 'y', 'op': 'relu', 'inputs': ['x']}],"
              " 'outputs': ['y']"), 1,
            "model.json: inputs: inputs must be an array, got 1");
    refused(M(X "'nodes': [3, {'name': 'y', 'op': 'relu', 'inputs': ['x'], 'rank': 2}],"
                " 'outputs': ['y']"), 2,
            "model.json: nodes[0]: a node must be an object, got 3",
            "model.json: nodes[1]: unknown key 'rank'");
}

/* ---- declarations ------------------------------------------------------ */

static void test_dtype(void **state)
{
    (void)state;
    refused(M("'inputs': [{'name': 'x', 'shape': [2], 'dtype': 'f16'},"
              "           {'name': 'y', 'shape': [2], 'dtype': 32}],"
              " 'nodes': [], 'outputs': ['x']"), 2,
            "model.json: inputs[0].dtype: dtype must be \"f32\" or \"i32\", got \"f16\"",
            "model.json: inputs[1].dtype: dtype must be \"f32\" or \"i32\", got 32");
    refused(M("'inputs': [{'name': 'ids', 'shape': [2], 'dtype': 'i32'}],"
              " 'weights': [{'name': 'w', 'shape': [2], 'dtype': 'i32'}],"
              " 'state': [{'name': 's', 'shape': [2], 'dtype': 'i32'}],"
              " 'nodes': [], 'outputs': ['ids']"), 2,
            "model.json: weights[0].dtype: a weight must be f32, got \"i32\"",
            "model.json: state[0].dtype: state must be f32, got \"i32\"");
}

static void test_shape(void **state)
{
    (void)state;
    refused(M("'inputs': [{'name': 'a', 'shape': 4},"
              " {'name': 'b', 'shape': [2.0, 3]},"
              " {'name': 'c', 'shape': [0, -1]},"
              " {'name': 'd', 'shape': [1, 1, 1, 1, 1, 1, 1]},"
              " {'name': 'e', 'shape': [2147483648, 2147483648, 2147483648]},"
              " {'name': 'f', 'shape': ['4']},"
              " {'name': 'g'}],"
              " 'nodes': [{'name': 'y', 'op': 'add', 'inputs': ['a', 'b']}],"
              " 'outputs': ['y', 'c']"), 8,
            "model.json: inputs[0].shape: shape must be an array of dimensions, got 4",
            "model.json: inputs[1].shape[0]: dimension must be an integer, got 2.0",
            "model.json: inputs[2].shape[0]: dimension must be at least 1, got 0",
            "model.json: inputs[2].shape[1]: dimension must be at least 1, got -1",
            "model.json: inputs[3].shape: shape has rank 7, more than 6",
            "model.json: inputs[4].shape: shape [2147483648,2147483648,2147483648]"
            " has more than 2^40 elements",
            "model.json: inputs[5].shape[0]: dimension must be an integer, got \"4\"",
            "model.json: inputs[6].shape: missing");
}

static void test_shape_limits(void **state)
{
    (void)state;
    accepted(M("'inputs': [{'name': 's', 'shape': []},"
               " {'name': 'big', 'shape': [1048576, 1048576]}],"
               " 'nodes': [], 'outputs': ['s', 'big']"),
             "graph m\n"
             "  input  %0 \"s\" : f32[]\n"
             "  input  %1 \"big\" : f32[1048576,1048576]\n"
             "  output %0\n"
             "  output %1\n");
    refused(M("'inputs': [{'name': 'big', 'shape': [1048577, 1048576]}],"
              " 'nodes': [], 'outputs': ['big']"), 1,
            "model.json: inputs[0].shape: shape [1048577,1048576] has more than 2^40 elements");
}

/* ---- names ------------------------------------------------------------- */

static void test_duplicate_names(void **state)
{
    (void)state;
    refused(M(X "'weights': [{'name': 'x', 'shape': [8]}],"
                " 'state': [{'name': 'w', 'shape': [8]}, {'name': 'w', 'shape': [8]}],"
                " 'nodes': [{'name': 'w', 'op': 'relu', 'inputs': ['x']}],"
                " 'outputs': ['w']"), 3,
            "model.json: weights[0].name: 'x' is already defined at inputs[0]",
            "model.json: state[1].name: 'w' is already defined at state[0]",
            "model.json: nodes[0].name: 'w' is already defined at state[0]");
}

static void test_bad_names(void **state)
{
    (void)state;
    refused(M("'inputs': [{'name': 'a\\u0001b', 'shape': [2]},"
              " {'name': '', 'shape': [2]}, {'name': 5, 'shape': [2]},"
              " {'name': 'del\\u007f', 'shape': [2]}, {'shape': [2]}],"
              " 'nodes': [{'name': 'y', 'op': 'relu', 'inputs': ['a\\u0001b']}],"
              " 'outputs': ['q\\nq', 'y']"), 6,
            "model.json: inputs[0].name: name 'a\\x01b' has a control character",
            "model.json: inputs[1].name: name is empty",
            "model.json: inputs[2].name: name must be a string, got 5",
            "model.json: inputs[3].name: name 'del\\x7f' has a control character",
            "model.json: inputs[4].name: missing",
            "model.json: outputs[0]: 'q\\x0aq' is not defined");
}

static void test_long_name(void **state)
{
    (void)state;
    char name[201], text[600], msg[300], cut[61];
    memset(name, 'n', 200);
    name[200] = 0;
    memcpy(cut, name, 60);
    cut[60] = 0;
    snprintf(text, sizeof text, M("'inputs': [{'name': '%s', 'shape': [2]}],"
                                  " 'nodes': [], 'outputs': ['%.129s']"), name, name);
    snprintf(msg, sizeof msg, "model.json: inputs[0].name: name '%s...' is 200 bytes,"
             " more than 128", cut);
    char msg2[300];
    snprintf(msg2, sizeof msg2, "model.json: outputs[0]: '%s...' is not defined", cut);
    refused(text, 2, msg, msg2);
    /* exactly 128 bytes is fine; a cut never splits a UTF-8 character */
    snprintf(text, sizeof text, M("'inputs': [{'name': '%.128s', 'shape': [2]}],"
                                  " 'nodes': [], 'outputs': ['%.128s']"), name, name);
    Run r;
    parse(&r, text);
    assert_non_null(r.m);
    arena_free(r.a);
    snprintf(text, sizeof text, M(X "'nodes': [], 'outputs': ['%.59s\xc3\xa9zzz']"), name);
    snprintf(msg, sizeof msg, "model.json: outputs[0]: '%.59s...' is not defined", name);
    refused(text, 1, msg);
}

/* ---- nodes ------------------------------------------------------------- */

/* An unknown name is reported at its first use only. */
static void test_undefined(void **state)
{
    (void)state;
    refused(M(X "'weights': [{'name': 'w', 'shape': [8, 8]}],"
                " 'nodes': [{'name': 'a', 'op': 'linear', 'inputs': ['x', 'wq']},"
                "           {'name': 'b', 'op': 'add', 'inputs': ['x', 'c']},"
                "           {'name': 'c', 'op': 'relu', 'inputs': ['c']},"
                "           {'name': 'd', 'op': 'relu', 'inputs': [true]},"
                "           {'name': 'e', 'op': 'add', 'inputs': ['a', 'b']},"
                "           {'name': 'f', 'op': 'add', 'inputs': ['wq', 'x']}],"
                " 'outputs': ['c', 'nope', 'wq']"), 5,
            "model.json: nodes[0].inputs[1]: 'wq' is not defined above this node",
            "model.json: nodes[1].inputs[1]: 'c' is not defined above this node",
            "model.json: nodes[2].inputs[0]: 'c' is not defined above this node",
            "model.json: nodes[3].inputs[0]: an input must be a name or a number, got true",
            "model.json: outputs[1]: 'nope' is not defined");
}

static void test_unknown_op(void **state)
{
    (void)state;
    refused(M(X "'nodes': [{'name': 'a', 'op': 'conv2d', 'inputs': ['x', 'k'],"
                " 'attrs': {'stride': 2}},"
                " {'name': 'b', 'op': 'input', 'inputs': []},"
                " {'name': 'c', 'op': 7, 'inputs': ['a']},"
                " {'name': 'd', 'inputs': ['a']},"
                " {'name': 'e', 'op': 'relu', 'inputs': ['a']}],"
                " 'outputs': ['e']"), 5,
            "model.json: nodes[0].op: unknown op 'conv2d'",
            "model.json: nodes[0].inputs[1]: 'k' is not defined above this node",
            "model.json: nodes[1].op: unknown op 'input'",
            "model.json: nodes[2].op: op must be a string, got 7",
            "model.json: nodes[3].op: missing");
}

static void test_arity(void **state)
{
    (void)state;
    refused(M(X "'nodes': [{'name': 'a', 'op': 'add', 'inputs': ['x', 'x', 'x']},"
                " {'name': 'b', 'op': 'linear', 'inputs': ['x']},"
                " {'name': 'c', 'op': 'relu', 'inputs': ['x', 'y']},"
                " {'name': 'd', 'op': 'concat', 'inputs': []},"
                " {'name': 'e', 'op': 'relu', 'inputs': 'x'},"
                " {'name': 'f', 'op': 'relu'}],"
                " 'outputs': ['a']"), 7,
            "model.json: nodes[0].inputs: add takes 2 inputs, got 3",
            "model.json: nodes[1].inputs: linear takes 2 to 3 inputs, got 1",
            "model.json: nodes[2].inputs: relu takes 1 input, got 2",
            "model.json: nodes[2].inputs[1]: 'y' is not defined above this node",
            "model.json: nodes[3].inputs: concat takes 1 to 64 inputs, got 0",
            "model.json: nodes[4].inputs: inputs must be an array, got \"x\"",
            "model.json: nodes[5].inputs: missing");
}

static void test_attrs(void **state)
{
    (void)state;
    refused(M(X "'weights': [{'name': 'g', 'shape': [8]}],"
                " 'nodes': ["
                "  {'name': 'a', 'op': 'rmsnorm', 'inputs': ['x', 'g'],"
                "   'attrs': {'foo': 1, 'eps': 'small'}},"
                "  {'name': 'b', 'op': 'matmul', 'inputs': ['x', 'x'],"
                "   'attrs': {'transpose_b': 1}},"
                "  {'name': 'c', 'op': 'reduce_sum', 'inputs': ['x'],"
                "   'attrs': {'axes': [1, 1.5, 'z'], 'keepdims': true}},"
                "  {'name': 'd', 'op': 'topk', 'inputs': ['x'], 'attrs': {'k': 2.0}},"
                "  {'name': 'e', 'op': 'gelu', 'inputs': ['x'], 'attrs': {'approximate': 'fast'}},"
                "  {'name': 'f', 'op': 'rope', 'inputs': ['x', 'x'], 'attrs': {'style': 1}},"
                "  {'name': 'g2', 'op': 'topk', 'inputs': ['x']},"
                "  {'name': 'h', 'op': 'reduce_max', 'inputs': ['x'], 'attrs': []},"
                "  {'name': 'i', 'op': 'add', 'inputs': ['x', 'x'], 'attrs': {'axis': 0}},"
                "  {'name': 'j', 'op': 'slice', 'inputs': ['x'], 'attrs': {'axes': 'x'}}],"
                " 'outputs': ['x']"), 13,
            "model.json: nodes[0].attrs: unknown attribute 'foo' for rmsnorm",
            "model.json: nodes[0].attrs.eps: eps must be a number, got \"small\"",
            "model.json: nodes[1].attrs.transpose_b: transpose_b must be true or false, got 1",
            "model.json: nodes[2].attrs.axes[1]: axes[1] must be an integer, got 1.5",
            "model.json: nodes[2].attrs.axes[2]: axes[2] must be an integer, got \"z\"",
            "model.json: nodes[3].attrs.k: k must be an integer, got 2.0",
            "model.json: nodes[4].attrs.approximate: approximate must be one of none, tanh;"
            " got \"fast\"",
            "model.json: nodes[5].attrs.style: style must be one of half, interleaved; got 1",
            "model.json: nodes[6].attrs: topk needs attribute 'k'",
            "model.json: nodes[7].attrs: attrs must be an object, got an array",
            "model.json: nodes[8].attrs: unknown attribute 'axis' for add",
            "model.json: nodes[9].attrs: unknown attribute 'axes' for slice",
            "model.json: nodes[9].attrs: slice needs attribute 'axis'");
}

/* ---- init -------------------------------------------------------------- */

static void test_init(void **state)
{
    (void)state;
    refused(M(X "'weights': ["
                " {'name': 'a', 'shape': [2], 'init': {'fill': 1, 'data': [1, 2]}},"
                " {'name': 'b', 'shape': [2, 3], 'init': {'data': [1, 2, 3, 4, 5]}},"
                " {'name': 'c', 'shape': [2], 'init': {'random': {'seed': -1, 'scale': 1}}},"
                " {'name': 'd', 'shape': [2], 'init': {'random': {'seed': 1}}},"
                " {'name': 'e', 'shape': [2], 'init': {}},"
                " {'name': 'f', 'shape': [2], 'init': {'fil': 1}},"
                " {'name': 'g', 'shape': [2], 'init': {'fill': 1e39}},"
                " {'name': 'h', 'shape': [3], 'init': {'data': [1, 'x', null]}},"
                " {'name': 'i', 'shape': [2], 'init': {'random':"
                "   {'seed': 9007199254740993, 'scale': -1, 'mean': 0}}},"
                " {'name': 'j', 'shape': [2], 'init': 0.5}],"
                " 'state': [{'name': 's', 'shape': [2], 'init': {'fill': 0}}],"
                " 'nodes': [], 'outputs': ['x']"), 13,
            "model.json: weights[0].init: init takes exactly one of fill, random, data; got 2",
            "model.json: weights[1].init.data: data has 5 elements; shape [2,3] has 6",
            "model.json: weights[2].init.random.seed: seed must be in [0, 2^53], got -1",
            "model.json: weights[3].init.random.scale: missing",
            "model.json: weights[4].init: init takes exactly one of fill, random, data; got 0",
            "model.json: weights[5].init: unknown key 'fil'",
            "model.json: weights[6].init.fill: fill 1e+39 does not fit in f32",
            "model.json: weights[7].init.data[1]: element must be a number, got \"x\"",
            "model.json: weights[8].init.random: unknown key 'mean'",
            "model.json: weights[8].init.random.seed: seed must be in [0, 2^53],"
            " got 9007199254740993",
            "model.json: weights[8].init.random.scale: scale must be at least 0, got -1",
            "model.json: weights[9].init: init must be an object, got 0.5",
            "model.json: state[0].init: only weights take an init");
}

/* ---- shapes through infer ---------------------------------------------- */

static void test_infer_messages(void **state)
{
    (void)state;
    refused(M(X "'weights': [{'name': 'w', 'shape': [16, 7]}, {'name': 'v', 'shape': [3]}],"
                " 'nodes': [{'name': 'a', 'op': 'linear', 'inputs': ['x', 'w']},"
                "           {'name': 'b', 'op': 'relu', 'inputs': ['a']},"
                "           {'name': 'c', 'op': 'add', 'inputs': ['x', 'v']},"
                "           {'name': 'd', 'op': 'mul', 'inputs': ['x', 1e39]}],"
                " 'outputs': ['b', 'c']"), 3,
            "model.json: nodes[0].inputs[1]: linear: w must be [N, 8] to match x f32[4,8],"
            " got f32[16,7]",
            "model.json: nodes[2]: add: shapes f32[4,8] and f32[3] do not broadcast",
            "model.json: nodes[3].inputs[1]: constant 1e+39 does not fit in f32");
}

static void test_many_problems(void **state)
{
    (void)state;
    refused("{'format': 'kiln/1', 'name': 'm', 'extra': 1,"
            " 'inputs': [{'name': 'x', 'shape': [4, 0]}],"
            " 'weights': [{'name': 'w', 'shape': [8, 8], 'dtype': 'i32'}],"
            " 'nodes': [{'name': 'a', 'op': 'relu', 'inputs': ['y']},"
            "           {'name': 'b', 'op': 'add', 'inputs': ['a', 'x']},"
            "           {'name': 'c', 'op': 'nope', 'inputs': []},"
            "           {'name': 'd', 'op': 'gelu', 'inputs': ['w'],"
            "            'attrs': {'approximate': 'fast'}},"
            "           {'name': 'e', 'op': 'add', 'inputs': ['c', 'd']}],"
            " 'outputs': ['b', 'zz', 'e']}", 7,
            "model.json: unknown key 'extra'",
            "model.json: inputs[0].shape[1]: dimension must be at least 1, got 0",
            "model.json: weights[0].dtype: a weight must be f32, got \"i32\"",
            "model.json: nodes[0].inputs[0]: 'y' is not defined above this node",
            "model.json: nodes[2].op: unknown op 'nope'",
            "model.json: nodes[3].attrs.approximate: approximate must be one of none, tanh;"
            " got \"fast\"",
            "model.json: outputs[1]: 'zz' is not defined");
}

static void test_outputs(void **state)
{
    (void)state;
    refused(M(X "'nodes': [{'name': 'y', 'op': 'relu', 'inputs': ['x']}],"
                " 'outputs': ['y', 'x', 'y', 3, 'q']"), 3,
            "model.json: outputs[2]: 'y' is already listed at outputs[0]",
            "model.json: outputs[3]: an output must be a name, got 3",
            "model.json: outputs[4]: 'q' is not defined");
}

/* ---- loading from disk ------------------------------------------------- */

static void test_load(void **state)
{
    (void)state;
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, "/nonexistent/model.json");
    int io = 0;
    assert_null(fe_load(a, "/nonexistent/model.json", &d, &io));
    assert_int_equal(io, 1);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.lines[0],
                        "/nonexistent/model.json: cannot read: No such file or directory");
    char path[] = "/tmp/kiln_fe_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"format\": \"kiln/1\", \"name\": \"m\", \"inputs\": [{\"name\": \"x\","
          " \"shape\": [2]}], \"nodes\": [], \"outputs\": [\"x\"]}", f);
    fclose(f);
    diag_init(&d, a, path);
    Module *m = fe_load(a, path, &d, &io);
    assert_non_null(m);
    assert_int_equal(io, 0);
    assert_string_equal(m->file, path);
    /* a file over 256 MiB is bad input, not an I/O failure */
    assert_int_equal(truncate(path, ((off_t)256 << 20) + 1), 0);
    assert_null(fe_load(a, path, &d, &io));
    remove(path);
    assert_int_equal(io, 0);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.lines[0] + strlen(path), ": file is larger than 256 MiB");
    arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_module_fields),
        cmocka_unit_test(test_const_input),
        cmocka_unit_test(test_topk_outputs),
        cmocka_unit_test(test_topk_errors),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_top_level),
        cmocka_unit_test(test_model_name),
        cmocka_unit_test(test_sections),
        cmocka_unit_test(test_dtype),
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_shape_limits),
        cmocka_unit_test(test_duplicate_names),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_long_name),
        cmocka_unit_test(test_undefined),
        cmocka_unit_test(test_unknown_op),
        cmocka_unit_test(test_arity),
        cmocka_unit_test(test_attrs),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_infer_messages),
        cmocka_unit_test(test_many_problems),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
