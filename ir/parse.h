/* ir/parse.h: what the files of the .kir parser share (grammar: KIR.md).
 *   parse_lex.c   lines and tokens
 *   parse.c       the graph section, and ir_parse
 *   parse_prog.c  the program section: buffers, kernels, statements
 *   parse_expr.c  expressions, and the variables and buffers they name
 *
 * The parser works a line at a time: [bol, eol) is the current line, p the
 * cursor in it. On the first problem kir_fail records "FILE: line N:
 * message" and longjmps out of ir_parse, which returns NULL; nothing is
 * freed (all of it is in the caller's arena). */
#ifndef KILN_IR_PARSE_H
#define KILN_IR_PARSE_H

#include "ir.h"

typedef struct {
    Arena *a;
    Diags *d;
    Module *m;
    jmp_buf fail;
    const char *bol, *eol, *p;    /* the current line, the cursor */
    const char *next;             /* the text after the current line */
    int lineno, indent, eof;      /* eof: there is no current line */
    int noutputs_cap;
    Prog *prog;                   /* the program being read: prog, or open */
    int open;                     /* it is the open program */
    /* the kernel being read */
    Kernel *k;
    Var **vars;                   /* every var of k, in definition order */
    int nvars, capvars;
    Var **scope;                  /* vars usable here, innermost last */
    int nscope, capscope;
    Buf **locals;                 /* local bufs usable here */
    int nlocals, caplocals;
    int parallel;                 /* inside a parallel loop */
    int depth;                    /* expression nesting */
    int nexpr;                    /* expression nodes in this statement */
} Parser;

/* ---- parse_lex.c: lines and tokens --------------------------------------- */
_Noreturn void kir_fail(Parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Moves to the next line that is not blank (sets eof after the last). */
void kir_next_line(Parser *ps);
/* The current line is a note (its first non-blank character is '#'). */
int kir_is_note(const Parser *ps);
/* Its text, after "#" and one space. */
const char *kir_note_text(Parser *ps);
/* Fails unless the current line is indented by exactly n spaces. */
void kir_indent(Parser *ps, int n);
/* Nothing but blanks is left on the line; kir_end fails unless so. */
int kir_at_end(Parser *ps);
void kir_end(Parser *ps);
/* How the next token reads in a message: "'foo'", "the end of the line". */
const char *kir_found(Parser *ps);
/* The next character (after blanks) is c. */
int kir_peek(Parser *ps, char c);
/* Takes s when it comes next (a word only when whole). */
int kir_accept(Parser *ps, const char *s);
void kir_expect(Parser *ps, const char *s);
/* A NAME, or NULL (nothing taken). */
char *kir_name(Parser *ps);
/* c followed by digits (%3, b4, i0), whole: the number; -1 (nothing
 * taken) when not next. */
int kir_ref(Parser *ps, char c);
/* A NUMBER when one comes next: 1, with *is_float, *f (and *i for an
 * integer) set; else 0. */
int kir_number(Parser *ps, int64_t *i, double *f, int *is_float);
/* An INT / any NUMBER; fails naming `what` when there is none. */
int64_t kir_int(Parser *ps, const char *what);
double kir_float(Parser *ps, const char *what);
char *kir_string(Parser *ps);
/* type = ("f32" | "i32") "[" [INT {"," INT}] "]" */
void kir_type(Parser *ps, DType *t, int *rank, int64_t *dims);

/* ---- parse.c: the graph ------------------------------------------------- */
/* %N: a node defined above. */
Node *kir_node(Parser *ps);

/* ---- parse_prog.c: the program ------------------------------------------ */
/* prog = "prog" NAME NL {note | buf | arena} {kernel}, from the prog line
 * on, then the open program when an `open` line follows (the same
 * grammar). Links each node to the buffer holding its value. */
void kir_prog(Parser *ps);

/* ---- parse_expr.c: expressions -------------------------------------------- */
static inline char kir_var_char(VarKind kind) { return kind == VAR_LOOP ? 'i' : 'v'; }
/* The variable iN / vN in scope here. */
Var *kir_lookup(Parser *ps, VarKind kind, int id);
/* Buffer bN of the program; a local one only inside its declaration. */
Buf *kir_buf(Parser *ps, int id);
Expr *kir_expr(Parser *ps);
/* An expression of integer type (what names it in the message). */
Expr *kir_integer(Parser *ps, const char *what);
/* "[" [expr {"," expr}] "]": one integer index per dimension of b. */
Expr **kir_indices(Parser *ps, Buf *b);

#endif
