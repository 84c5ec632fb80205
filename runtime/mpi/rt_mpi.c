/* runtime/mpi/rt_mpi.c: the MPI part (rt_mpi.h): the main of a program of
 * several ranks and its collectives, over Open MPI.
 *
 * Errors return (MPI_ERRORS_RETURN); each is reported as one line naming
 * the rank and the call, then the job is ended (MPI_Abort), so no rank
 * hangs waiting for one that failed. The collectives' scratch (every
 * rank's operand) is kept between calls and grown when needed: they run
 * on the program's one calling thread. Each collective counts itself
 * into mp_comm (rt_comm: calls, bytes, MPI_Wtime's seconds), which the
 * core reads through rt_ranks.comm. */
#include "runtime/rt_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mp_rank, mp_size;
static char *mp_scratch;
static size_t mp_scratch_bytes;
static rt_comm mp_comm;

/* Says "rank R: WHAT: why" and ends the job. */
static _Noreturn void mp_abort(const char *what, int err)
{
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (err != MPI_SUCCESS)
        MPI_Error_string(err, why, &len);
    fprintf(stderr, "rank %d: %s%s%s\n", mp_rank, what, len ? ": " : "", why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, RT_EIO);
    exit(RT_EIO);
}

/* Room for every rank's `bytes`. */
static char *mp_room(size_t bytes)
{
    size_t all = bytes * (size_t)mp_size;
    if (all > mp_scratch_bytes) {
        char *p = realloc(mp_scratch, all);
        if (!p)
            mp_abort("out of memory for a collective's scratch", MPI_SUCCESS);
        mp_scratch = p;
        mp_scratch_bytes = all;
    }
    return mp_scratch;
}

/* Every rank's `bytes` at x into all, rank by rank (MPI's counts are
 * int: an operand over 1 GiB a rank ends the job, said). */
static void mp_gather(char *all, const void *x, size_t bytes)
{
    if (bytes <= (size_t)1 << 30) {
        int rc = MPI_Allgather(x, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            mp_abort("MPI_Allgather", rc);
        return;
    }
    mp_abort("a collective's operand over 1 GiB", MPI_SUCCESS);
}

void rt_mpi_allreduce(float *y, const float *x, int64_t n)
{
    double t0 = MPI_Wtime();
    const float *all = (const float *)mp_room((size_t)n * sizeof *x);
    mp_gather((char *)all, x, (size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) {
        float s = all[i];
        for (int r = 1; r < mp_size; r++)
            s += all[(int64_t)r * n + i];
        y[i] = s;
    }
    mp_comm.allreduce++;
    mp_comm.bytes += n * (int64_t)sizeof *x;
    mp_comm.received += (mp_size - 1) * n * (int64_t)sizeof *x;
    mp_comm.seconds += MPI_Wtime() - t0;
}

void rt_mpi_allgather(void *y, const void *x, int64_t outer, int64_t row, int esize)
{
    double t0 = MPI_Wtime();
    size_t run = (size_t)row * (size_t)esize, bytes = run * (size_t)outer;
    if (outer == 1) {
        mp_gather(y, x, bytes);
    } else {
        char *all = mp_room(bytes), *dst = y;
        mp_gather(all, x, bytes);
        for (int64_t o = 0; o < outer; o++)
            for (int r = 0; r < mp_size; r++, dst += run)
                memcpy(dst, all + (size_t)r * bytes + (size_t)o * run, run);
    }
    mp_comm.allgather++;
    mp_comm.bytes += (int64_t)bytes * mp_size;
    mp_comm.received += (int64_t)bytes * (mp_size - 1);
    mp_comm.seconds += MPI_Wtime() - t0;
}

/* rank 0's bytes at buf into every rank's. */
static int mp_bcast(void *buf, int64_t bytes)
{
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        mp_abort("MPI_Bcast", rc);
    return RT_OK;
}

int rt_mpi_main(int argc, char **argv, const rt_model *md, int ranks)
{
    const char *prog = argc > 0 && argv[0] && *argv[0] ? argv[0] : md->name;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init failed: run it under mpirun -np %d\n", prog, ranks);
        return RT_EIO;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &mp_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mp_size);
    if (mp_size != ranks) {
        if (mp_rank == 0)
            fprintf(stderr, "%s: built for %d ranks, run on %d: run it as mpirun -np %d %s ...\n",
                    prog, ranks, mp_size, ranks, prog);
        MPI_Finalize();
        return RT_EUSAGE;
    }
    rt_ranks_set(&(rt_ranks){mp_rank, mp_size, mp_bcast, &mp_comm});
    if (mp_rank != 0 && !freopen("/dev/null", "w", stdout))
        mp_abort("cannot send standard output to /dev/null", MPI_SUCCESS);
    char name[512];
    snprintf(name, sizeof name, "%s: rank %d", prog, mp_rank);
    char **args = malloc(sizeof *args * ((size_t)argc + 1));
    if (!args)
        mp_abort("out of memory", MPI_SUCCESS);
    memcpy(args, argv, sizeof *args * (size_t)argc);
    args[argc] = NULL;
    if (argc > 0)
        args[0] = name;
    int rc = rt_main(argc, args, md);
    free(args);
    fflush(stdout);
    if (rc != RT_OK) {
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc);
        return rc;
    }
    free(mp_scratch);
    MPI_Finalize();
    return RT_OK;
}
