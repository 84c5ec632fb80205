/* cli/help.c: what `kiln --help` and `kiln COMMAND --help` print. The
 * overview names every command; a command's usage gives its own options
 * and the sections of options it shares (each written once, below, and
 * pasted into the overview and the usages that take them). kiln bench
 * and kiln machine print their own (bench/cmd.c). */
#include "cli.h"

#include <string.h>

#define MODEL_OPTS \
    "options of every model command:\n" \
    "  --stop-after PASS             run the pipeline up to PASS only\n" \
    "  --disable-pass PASS           skip PASS (repeatable; not frontend, distribute,\n" \
    "                                lower, codegen)\n" \
    "  --max-memory BYTES            fail when the intermediates need more (plan-memory)\n" \
    "  --machine SPEC                the figures tile and parallelize use, instead of\n" \
    "                                this machine's: l1d=48K,l2=2M,l3=32M,vector=64,cores=2,\n" \
    "                                amx=1 (any subset), or default (fixed figures, as\n" \
    "                                kiln opt)\n" \
    "  --weight-dtype TYPE           hold every weight of rank >= 2 so in memory: auto (the\n" \
    "                                default: as the weights file stores it), f32, bf16, f16\n" \
    "                                (rounded at load, lossy; docs/16-bit-weights.md), q8_0,\n" \
    "                                q4_0, q4_k, q6_k, q4_k_m, mxfp4 (GGML's blocks, quantized\n" \
    "                                once into the weights' image; docs/quantized-weights.md),\n" \
    "                                f8_e4m3 (an FP8 checkpoint's bytes as stored, or\n" \
    "                                quantized at load; docs/fp8.md)\n" \
    "  --ranks N                     split the model over N MPI ranks (distribute,\n" \
    "                                Megatron-style; docs/distributed.md); default 1.\n" \
    "                                build makes one executable for mpirun -np N; print\n" \
    "                                and dump show the split\n" \
    "  -v, --verbose                 say what is done and how long it took\n" \
    "  --tokens T  --max-seq S       a folder's, GGUF's or checkpoint's graph: T tokens a\n" \
    "                                call (default 1), a KV cache of S rows\n" \
    "                                (docs/importing.md)\n" \
    "  --slots N                     ...with the KV caches of N sequences, a token's slot\n" \
    "                                an input: batched decode (docs/serving.md)\n" \
    "  --chunk N                     emit-c, build, run, profile of a decoder: its prefill\n" \
    "                                variant's tokens a call (default 256; 1: none); from\n" \
    "                                128, with one of N/4 for a prompt's rest\n" \
    "  --target LEVEL                not run: compile for native (the default: this CPU),\n" \
    "                                x86-64-v2, x86-64-v3 (AVX2) or x86-64-v4 (AVX-512),\n" \
    "                                to run on other CPUs (docs/program.md)\n"

#define RUN_OPTS \
    "RUN OPTIONS (the same as a built executable's):\n" \
    "  --weights FILE|DIR            weights: safetensors, GGUF, or a model folder's\n" \
    "                                (default: MODEL a folder or GGUF, its own; else\n" \
    "                                each weight's init)\n" \
    "  --input NAME=FILE.npy         an input (repeatable; inputs not given are seeded)\n" \
    "  --output NAME=FILE.npy        write an output (repeatable; others are summarised)\n" \
    "  --repeat N  --threads N  --seed S\n" \
    "  --profile FILE                time every kernel; one JSON line per kernel name\n" \
    "  --version                     the model's name, kiln's version, how it was built\n" \
    "  generate --tokens 1,2,3 | [--tokenizer FILE] --prompt TEXT | --prompt-file FILE\n" \
    "           -n N [--temperature T] [--topp P] [--seed S]  a decoder generates text\n" \
    "           (docs/generating.md); run DIR: the folder's weights, and its\n" \
    "           tokenizer.json for a text prompt (a GGUF: its own)\n" \
    "  chat [--system TEXT] [--chat-template NAME] [-n N] ...  a decoder's conversation\n" \
    "           on a terminal, in the model's chat template (run only; chat --help)\n"

#define CHECK_OPTS \
    "CHECK OPTIONS:\n" \
    "  --weights FILE  --input NAME=FILE.npy  --seed S\n" \
    "  --tolerance T                 relative to the reference's max |x| (default 1e-4;\n" \
    "                                3e-2 with quantized weights, whose kernels round\n" \
    "                                activations to int8)\n" \
    "  --no-cc, --no-jit             skip one of the builds\n" \
    "  --bisect                      JIT the program after every loop-level pass and\n" \
    "                                name the first pass whose outputs leave tolerance\n"

#define EXIT_TEXT \
    "exit status: 0 ok, 1 invalid model, weights or inputs (or check out of tolerance),\n" \
    "             2 usage, 3 I/O, 4 internal error; interrupted (SIGINT, SIGTERM, ...):\n" \
    "             its temporaries removed, kiln dies of the signal (the shell's 130, 143)\n"

/* What a model is, for the usages of the model commands. */
#define MODEL_TEXT \
    "MODEL is a kiln/1 JSON graph, or a Hugging Face folder or GGUF file imported\n" \
    "first (as kiln import hf, import gguf; its weights and tokenizer are used).\n"

static const char overview[] =
    "usage: kiln COMMAND MODEL.json [options]\n"
    "\n"
    "Compiles a model (a kiln/1 JSON graph) to C specialised to its shapes.\n"
    "MODEL may also be a Hugging Face folder or a GGUF file, imported first (as kiln\n"
    "import hf, import gguf).\n"
    "\n"
    "commands:\n"
    "  emit-c MODEL [-o FILE.c]      write the generated C (stdout without -o);\n"
    "                                --jit: the C kiln run hands libtcc\n"
    "  build MODEL [-o EXE]          build an executable with $CC (default cc; -o default: NAME);\n"
    "                                it remembers its weights (--weights, a folder's or a\n"
    "                                GGUF's) and a folder's tokenizer (absolute paths) as\n"
    "                                its defaults\n"
    "  build MODEL --lib -o DIR      DIR/libNAME.so, .a, NAME.h and NAME.pc (pkg-config)\n"
    "                                (builds are cached: --no-cache builds anew)\n"
    "  run MODEL [RUN OPTIONS]       compile in memory with libtcc and run\n"
    "  profile MODEL [RUN OPTIONS]   build with cc, run with --profile (--repeat 10 unless\n"
    "                                given); each kernel's time and rates, slowest first\n"
    "  check MODEL [CHECK OPTIONS]   run the reference, the cc build and the JIT on the\n"
    "                                same inputs; compare every output\n"
    "  print MODEL                   print the IR (.kir) after the last pass run\n"
    "  dump MODEL --dump-dir DIR     write every stage: DIR/00-frontend.kir ... 10-codegen.c\n"
    "  dump MODEL --after PASS       print one stage\n"
    "  opt FILE.kir --passes a,b     run passes on a dumped stage [-o OUT.kir]\n"
    "                                [--machine SPEC] (default: fixed figures)\n"
    "  passes                        list the pass pipeline\n"
    "  bench [MODEL ...]             time every example (reference, cc, JIT) and the\n"
    "                                linear kernels vs OpenBLAS (kiln bench --help)\n"
    "  bench MODEL -p 256 -n 64      a decoder's prefill and decode tokens/s, as llama-bench\n"
    "  machine [--refresh]           this machine's FMA peak and read bandwidth, cached\n"
    "  import hf DIR [-o MODEL.json] a Hugging Face folder's decoder graph (llama, gemma,\n"
    "                                gemma2, gemma3_text, mistral, mixtral, phi3, qwen2, qwen3,\n"
    "                                qwen3_moe, gpt2); stdout without -o\n"
    "  import gguf FILE.gguf [-o MODEL.json]\n"
    "                                a GGUF file's decoder graph (llama, qwen2, qwen3,\n"
    "                                qwen3moe, gemma, gemma2, gemma3, phi3); its weights\n"
    "                                stay in the file\n"
    "  import llama2c FILE.bin [-o MODEL.json] [--weights-out W.safetensors]\n"
    "                                a llama2.c checkpoint's graph, its weights converted\n"
    "  help, version                 this text; the version\n"
    "\n" MODEL_OPTS "\n" RUN_OPTS "\n" CHECK_OPTS "\n" EXIT_TEXT;

typedef struct {
    const char *name, *text;
} Usage;

static const Usage usages[] = {
    {"emit-c",
     "usage: kiln emit-c MODEL [-o FILE.c] [--jit] [options]\n"
     "\n"
     "Writes MODEL's C program: one self-contained file for the system cc.\n" MODEL_TEXT
     "\n"
     "  -o FILE.c                     where (default, and -o -: stdout)\n"
     "  --jit                         the C kiln run hands libtcc instead\n"
     "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"build",
     "usage: kiln build MODEL [-o EXE] [options]\n"
     "       kiln build MODEL --lib -o DIR [options]\n"
     "\n"
     "Builds MODEL's program with $CC (default cc) and -O3 -march=native -fopenmp (or\n"
     "-march=LEVEL with --target LEVEL), then\n"
     "$KILN_CFLAGS_EXTRA. Builds are cached ($XDG_CACHE_HOME/kiln/builds, else\n"
     "~/.cache/kiln/builds).\n" MODEL_TEXT
     "\n"
     "  -o EXE                        the executable (default: the model's name);\n"
     "                                EXE --help says how to run it\n"
     "  --lib -o DIR                  DIR/libNAME.so, libNAME.a, NAME.h, NAME.pc instead\n"
     "  --no-cache                    build anew, neither reading nor filling the cache\n"
     "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"run",
     "usage: kiln run MODEL [RUN OPTIONS] [options]\n"
     "\n"
     "Compiles MODEL in memory with libtcc and runs it as its built executable would;\n"
     "kiln run MODEL --help names its inputs and outputs.\n" MODEL_TEXT
     "\n" RUN_OPTS "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"profile",
     "usage: kiln profile MODEL [RUN OPTIONS] [--no-cache] [options]\n"
     "\n"
     "Builds MODEL with cc (from the build cache when it is there; --no-cache: anew),\n"
     "runs it with --profile (--repeat 10 unless given) and prints each kernel's time\n"
     "and rates, the slowest first, with percentages of kiln machine's figures when it\n"
     "has measured them. A decoder without RUN OPTIONS runs generate with a prompt of 256\n"
     "token ids and 64 tokens drawn (as llama-bench's pp256 and tg64, fewer where its KV\n"
     "cache is smaller): its prefill chunks' kernels show as NAME@256 (and NAME@64 for\n"
     "the prompt's rest), beside the decode step's; or give `generate ...` as RUN\n"
     "OPTIONS.\n" MODEL_TEXT
     "\n" RUN_OPTS "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"check",
     "usage: kiln check MODEL [CHECK OPTIONS] [options]\n"
     "\n"
     "Runs the reference interpreter, the cc build and the JIT on the same weights and\n"
     "inputs and prints each output's error against the reference.\n" MODEL_TEXT
     "\n" CHECK_OPTS "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"print",
     "usage: kiln print MODEL [options]\n"
     "\n"
     "Prints the IR (.kir) after the last pass run (with --stop-after PASS: PASS).\n"
     MODEL_TEXT "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"dump",
     "usage: kiln dump MODEL --dump-dir DIR [options]\n"
     "       kiln dump MODEL --after PASS [options]\n"
     "\n"
     "Writes every stage of the pipeline, DIR/00-frontend.kir ... 10-codegen.c (made\n"
     "when missing), or prints the stage after PASS (kiln passes lists them).\n"
     MODEL_TEXT "\n" MODEL_OPTS "\n" EXIT_TEXT},
    {"opt",
     "usage: kiln opt FILE.kir --passes a,b [-o OUT.kir] [--machine SPEC]\n"
     "\n"
     "Runs the passes named, in order, on a stage kiln dump wrote (edited or not) and\n"
     "writes the result (stdout without -o). Tile sizes use fixed figures, the same on\n"
     "every machine, unless --machine gives others: l1d=48K,l2=2M,l3=32M,vector=64,\n"
     "cores=2,amx=1 (any subset).\n"
     "\n" EXIT_TEXT},
    {"passes",
     "usage: kiln passes\n"
     "\n"
     "Lists the pass pipeline: each pass's number, name, level and what it does, and\n"
     "whether --disable-pass may skip it.\n"},
    {"import",
     "usage: kiln import hf DIR [-o MODEL.json] [--tokens T] [--max-seq S] [--slots N]\n"
     "       kiln import gguf FILE.gguf [-o MODEL.json] [--tokens T] [--max-seq S] [--slots N]\n"
     "       kiln import llama2c FILE.bin [-o MODEL.json] [--weights-out W.safetensors]\n"
     "                           [--tokens T] [--max-seq S] [--slots N]\n"
     "\n"
     "Writes the kiln/1 graph of a Hugging Face folder's decoder (model_type llama,\n"
     "gemma, gemma2, gemma3_text, mistral, mixtral, phi3, qwen2, qwen3, qwen3_moe, gpt2),\n"
     "of a GGUF file's (general.architecture llama, qwen2, qwen3, qwen3moe, gemma, gemma2,\n"
     "gemma3, phi3; its tensors are checked against the graph and stay its weights) or\n"
     "of a llama2.c checkpoint, stdout without -o.\n"
     "\n"
     "  --tokens T                    tokens a call (default 1: a decode step)\n"
     "  --max-seq S                   the KV cache's rows (default: the model's context,\n"
     "                                at most 2048 for a folder or GGUF)\n"
     "  --slots N                     KV caches of N sequences [N, S, H, D]; an input slots\n"
     "                                i32[T] says each token's (docs/serving.md)\n"
     "  --weights-out W.safetensors   llama2c: its weights, converted\n"
     "\n" EXIT_TEXT},
};

int cli_help(const char *cmd)
{
    if (!cmd) {
        fputs(overview, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof usages / sizeof usages[0]; i++)
        if (!strcmp(cmd, usages[i].name)) {
            fputs(usages[i].text, stdout);
            return 0;
        }
    return -1;
}
