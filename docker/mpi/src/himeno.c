/* Himeno-style benchmark, hybrid MPI + OpenMP: the 19-point Jacobi relaxation of a 3-D Poisson problem that
 * the RIKEN Himeno benchmark times, written here from its published description.
 *
 *   himeno [S|M] [iterations]        (defaults: S, 50 iterations)
 *
 * Sizes (array extents as in Himeno's "grid size" table; the grid used is one less in every direction):
 *   S: 65 x 65 x 129     M: 129 x 129 x 257
 * Flop count: 34 floating-point operations per interior grid point per iteration (Himeno's convention), so
 *   MFLOPS = 34 * (nx-2) * (ny-2) * (nz-2) * iterations / seconds / 1e6.
 * The iteration count caps the run time (the original runs for about a minute). The domain is split into
 * slabs along the first axis, one per MPI rank, with one ghost plane on each side exchanged every
 * iteration; OpenMP threads share each rank's slab. Prints one summary line:
 *   himeno: size=S grid=64x64x128 ranks=P threads=T iterations=N seconds=X gosa=G MFLOPS=M
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int nx, ny, nz;   /* grid actually iterated (array extents minus one) */
    int lo, hi;       /* global first-axis planes [lo, hi) owned by this rank (interior only) */
    int nloc;         /* hi - lo */
    float *p, *wrk1, *wrk2, *bnd, *a[4], *b[3], *c[3];
} grid_t;

/* local plane il (0 = ghost below lo, nloc+1 = ghost above hi) */
static inline size_t at(const grid_t *g, int il, int j, int k) {
    return ((size_t)il * (size_t)g->ny + (size_t)j) * (size_t)g->nz + (size_t)k;
}

static float *alloc_field(size_t n) {
    float *f = calloc(n, sizeof(float));
    if (f == NULL) {
        fprintf(stderr, "himeno: out of memory (%zu floats)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return f;
}

static void init(grid_t *g) {
    size_t n = (size_t)(g->nloc + 2) * (size_t)g->ny * (size_t)g->nz;
    g->p = alloc_field(n);
    g->wrk1 = alloc_field(n);
    g->wrk2 = alloc_field(n);
    g->bnd = alloc_field(n);
    for (int m = 0; m < 4; m++) g->a[m] = alloc_field(n);
    for (int m = 0; m < 3; m++) g->b[m] = alloc_field(n);
    for (int m = 0; m < 3; m++) g->c[m] = alloc_field(n);
    float denom = (float)(g->nz - 1) * (float)(g->nz - 1);
#pragma omp parallel for schedule(static)
    for (int il = 0; il < g->nloc + 2; il++) {
        int gi = g->lo - 1 + il;
        if (gi < 0 || gi >= g->nx) continue;
        for (int j = 0; j < g->ny; j++) {
            for (int k = 0; k < g->nz; k++) {
                size_t x = at(g, il, j, k);
                g->a[0][x] = g->a[1][x] = g->a[2][x] = 1.0f;
                g->a[3][x] = 1.0f / 6.0f;
                g->b[0][x] = g->b[1][x] = g->b[2][x] = 0.0f;
                g->c[0][x] = g->c[1][x] = g->c[2][x] = 1.0f;
                g->bnd[x] = 1.0f;
                g->wrk1[x] = 0.0f;
                g->p[x] = (float)k * (float)k / denom;
                g->wrk2[x] = g->p[x];
            }
        }
    }
}

/* Exchange the boundary planes of p with the neighbouring ranks. */
static void exchange(grid_t *g, int rank, int size) {
    int plane = g->ny * g->nz;
    int up = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    int down = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    MPI_Sendrecv(&g->p[at(g, g->nloc, 0, 0)], plane, MPI_FLOAT, up, 0,
                 &g->p[at(g, 0, 0, 0)], plane, MPI_FLOAT, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&g->p[at(g, 1, 0, 0)], plane, MPI_FLOAT, down, 1,
                 &g->p[at(g, g->nloc + 1, 0, 0)], plane, MPI_FLOAT, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static double jacobi(grid_t *g, int iterations, int rank, int size) {
    const float omega = 0.8f;
    const size_t sj = (size_t)g->nz;                 /* stride of j */
    const size_t si = (size_t)g->ny * (size_t)g->nz; /* stride of i */
    double gosa = 0.0;
    for (int n = 0; n < iterations; n++) {
        exchange(g, rank, size);
        double local = 0.0;
#pragma omp parallel for collapse(2) reduction(+ : local) schedule(static)
        for (int il = 1; il <= g->nloc; il++) {
            for (int j = 1; j < g->ny - 1; j++) {
                for (int k = 1; k < g->nz - 1; k++) {
                    size_t x = at(g, il, j, k);
                    const float *p = g->p;
                    float s0 = g->a[0][x] * p[x + si] + g->a[1][x] * p[x + sj] + g->a[2][x] * p[x + 1]
                             + g->b[0][x] * (p[x + si + sj] - p[x + si - sj] - p[x - si + sj] + p[x - si - sj])
                             + g->b[1][x] * (p[x + sj + 1] - p[x - sj + 1] - p[x + sj - 1] + p[x - sj - 1])
                             + g->b[2][x] * (p[x + si + 1] - p[x - si + 1] - p[x + si - 1] + p[x - si - 1])
                             + g->c[0][x] * p[x - si] + g->c[1][x] * p[x - sj] + g->c[2][x] * p[x - 1]
                             + g->wrk1[x];
                    float ss = (s0 * g->a[3][x] - p[x]) * g->bnd[x];
                    local += (double)(ss * ss);
                    g->wrk2[x] = p[x] + omega * ss;
                }
            }
        }
#pragma omp parallel for collapse(2) schedule(static)
        for (int il = 1; il <= g->nloc; il++) {
            for (int j = 1; j < g->ny - 1; j++) {
                memcpy(&g->p[at(g, il, j, 1)], &g->wrk2[at(g, il, j, 1)], (size_t)(g->nz - 2) * sizeof(float));
            }
        }
        MPI_Allreduce(&local, &gosa, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    return gosa;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const char *sz = argc > 1 ? argv[1] : "S";
    int iterations = argc > 2 ? atoi(argv[2]) : 50;
    int mi, mj, mk;
    if (strcmp(sz, "S") == 0 || strcmp(sz, "s") == 0) {
        mi = 65; mj = 65; mk = 129; sz = "S";
    } else if (strcmp(sz, "M") == 0 || strcmp(sz, "m") == 0) {
        mi = 129; mj = 129; mk = 257; sz = "M";
    } else {
        if (rank == 0) fprintf(stderr, "himeno: size must be S or M, got '%s' (usage: himeno [S|M] [iterations])\n", sz);
        MPI_Finalize();
        return 2;
    }
    if (iterations < 1) {
        if (rank == 0) fprintf(stderr, "himeno: iterations must be a positive integer (usage: himeno [S|M] [iterations])\n");
        MPI_Finalize();
        return 2;
    }

    grid_t g;
    memset(&g, 0, sizeof g);
    g.nx = mi - 1; g.ny = mj - 1; g.nz = mk - 1;
    int interior = g.nx - 2;  /* global planes 1 .. nx-2 are computed */
    if (size > interior) {
        if (rank == 0) fprintf(stderr, "himeno: %d ranks exceed the %d planes of size %s; use fewer ranks\n", size, interior, sz);
        MPI_Finalize();
        return 2;
    }
    int base = interior / size, extra = interior % size;
    g.lo = 1 + rank * base + (rank < extra ? rank : extra);
    g.nloc = base + (rank < extra ? 1 : 0);
    g.hi = g.lo + g.nloc;
    init(&g);

    /* one untimed warm-up iteration touches every page and warms the caches */
    (void)jacobi(&g, 1, rank, size);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double gosa = jacobi(&g, iterations, rank, size);
    MPI_Barrier(MPI_COMM_WORLD);
    double seconds = MPI_Wtime() - t0;

    if (rank == 0) {
        double flop = 34.0 * (double)(g.nx - 2) * (double)(g.ny - 2) * (double)(g.nz - 2) * (double)iterations;
        double mflops = seconds > 0.0 ? flop / seconds / 1e6 : 0.0;
        printf("himeno: size=%s grid=%dx%dx%d ranks=%d threads=%d iterations=%d seconds=%.3f gosa=%.6e MFLOPS=%.1f\n",
               sz, g.nx, g.ny, g.nz, size, omp_get_max_threads(), iterations, seconds, gosa, mflops);
        fflush(stdout);
    }
    free(g.p); free(g.wrk1); free(g.wrk2); free(g.bnd);
    for (int m = 0; m < 4; m++) free(g.a[m]);
    for (int m = 0; m < 3; m++) { free(g.b[m]); free(g.c[m]); }
    MPI_Finalize();
    return 0;
}
