/* Hybrid MPI + OpenMP hello: every OpenMP thread of every MPI rank prints one line
 *   Hello from thread <t> out of <T> from process <p> out of <P> on <hostname>
 * The e2e suite and tests/images assert that each expected line appears exactly once. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int provided = 0;
    /* FUNNELED: only the main thread calls MPI; the threads only print. */
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "hybrid-hello: MPI_Init_thread failed\n");
        return 1;
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    char host[256];
    if (gethostname(host, sizeof host) != 0) {
        strcpy(host, "unknown");
    }
    host[sizeof host - 1] = '\0';

#pragma omp parallel
    {
        int t = omp_get_thread_num();
        int nt = omp_get_num_threads();
        /* One printf per line, flushed, so lines of different threads do not interleave. */
#pragma omp critical
        {
            printf("Hello from thread %d out of %d from process %d out of %d on %s\n", t, nt, rank, size, host);
            fflush(stdout);
        }
    }
    MPI_Finalize();
    return 0;
}
