/* runtime/rt_mpi.h: the runtime's MPI part (mpi/), for programs built to
 * run as N > 1 ranks (kiln build --ranks N; docs/distributed.md), under
 * mpirun -np N or any MPI launcher. A generated program carries it only
 * when its graph has a collective over several ranks (codegen's
 * cg_rt_uses); it is compiled and linked with Open MPI's flags (mpicc
 * --showme). Nothing else of the runtime includes <mpi.h>.
 *
 * rt_mpi_main is the program's main: MPI_Init; the rank and size for the
 * core (rt_ranks_set); standard output kept by rank 0 alone (the others'
 * goes to /dev/null: rank 0 prints text and writes outputs); messages
 * prefixed "PROG: rank R: "; rt_main; MPI_Finalize. A rank that fails
 * (weights it cannot read, a bad option) has said why in one line and
 * ends the whole job with MPI_Abort, so no rank waits on it; a rank that
 * dies is the launcher's to notice (mpirun ends the job). The
 * collectives abort the job the same way when MPI reports an error.
 *
 * The collectives give every rank the same bytes:
 *   rt_mpi_allreduce  y[i] = x_0[i] + x_1[i] + ... + x_{N-1}[i], rank
 *                     order, f32 (every rank's x gathered, then summed
 *                     in that order: the same sum whatever the timing,
 *                     unlike MPI_Allreduce's reduction trees);
 *   rt_mpi_allgather  x is outer runs of `row` elements (esize bytes
 *                     each); y is, for each run, rank 0's, rank 1's, ...
 *                     (the ranks' values concatenated along one axis). */
#ifndef KILN_RT_MPI_H
#define KILN_RT_MPI_H

#include "kiln_rt.h"

/* ranks: how many the program was built for; run on another number, every
 * rank says so and the program exits with RT_EUSAGE. */
RT_API int rt_mpi_main(int argc, char **argv, const rt_model *md, int ranks);
RT_API void rt_mpi_allreduce(float *y, const float *x, int64_t n);
RT_API void rt_mpi_allgather(void *y, const void *x, int64_t outer, int64_t row, int esize);

#endif
