/*
 * The MPI side of topocomm's benchmark (bench/run.py): times MPI collectives the way
 * `topocomm run` times its own, so that the two columns of the table compare like
 * with like.
 *
 *   mpirun -np P ./collectives [-i ITERATIONS] [-w WARMUP] COLLECTIVE:BYTES ...
 *
 * COLLECTIVE is one of broadcast, reduce, allreduce, allgather, reduce-scatter,
 * alltoall, scatter, gather, scan, barrier (topocomm's names; a barrier moves no data);
 * BYTES is topocomm's `--size`, bytes per node, a whole number of doubles. Every call
 * moves MPI_DOUBLEs and reduces with MPI_SUM; roots are rank 0. The buffers follow topocomm's data layouts
 * (proto/src/reference.rs), with n = BYTES / 8 elements:
 *
 *   broadcast, reduce, allreduce, scan   one vector of n per node
 *   allgather, gather                    n per node in, p·n out (gather: at the root)
 *   scatter                              p·n at the root, n per node out
 *   alltoall                             n per node pair: p·n in, p·n out
 *   reduce-scatter                       p blocks of n per node in, one block of n out
 *                                        (MPI_Reduce_scatter_block)
 *
 * Timing, as topocomm's node runtime does it (node/src/run.rs): every iteration,
 * warm-ups included, starts with a barrier; each rank times its own call with
 * MPI_Wtime and keeps its times; after the loop the slowest rank's time of each
 * iteration is taken (one MPI_Reduce of the arrays, nothing between the calls but the
 * barrier); the result is the median over the timed iterations (and min, mean, max). Output: one JSON object per line,
 *
 *   {"collective":"broadcast","size_bytes":65536,"p":8,"iterations":20,
 *    "time_us":{"min":..,"median":..,"mean":..,"max":..}}
 *
 * Buffers are allocated and touched once per (collective, size), before the warm-ups,
 * and reused by every iteration (as an MPI application would).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum collective {
    BROADCAST,
    REDUCE,
    ALLREDUCE,
    ALLGATHER,
    REDUCE_SCATTER,
    ALLTOALL,
    SCATTER,
    GATHER,
    SCAN,
    BARRIER,
};

static const char *const NAMES[] = {
    "broadcast", "reduce", "allreduce", "allgather", "reduce-scatter", "alltoall", "scatter", "gather", "scan", "barrier",
};

static int parse_collective(const char *name) {
    for (int c = 0; c < (int)(sizeof NAMES / sizeof NAMES[0]); c++) {
        if (strcmp(name, NAMES[c]) == 0) {
            return c;
        }
    }
    return -1;
}

/* Doubles the send and the receive buffer need, per rank. */
static void buffer_counts(int c, int p, long n, long *send, long *recv) {
    switch (c) {
    case ALLGATHER:
    case GATHER:
        *send = n;
        *recv = (long)p * n;
        break;
    case SCATTER:
        *send = (long)p * n;
        *recv = n;
        break;
    case ALLTOALL:
        *send = (long)p * n;
        *recv = (long)p * n;
        break;
    case REDUCE_SCATTER:
        *send = (long)p * n;
        *recv = n;
        break;
    default:
        *send = n;
        *recv = n;
        break;
    }
}

/* One call of collective `c` on n doubles per node (see the layouts above). */
static void call(int c, double *send, double *recv, int n) {
    switch (c) {
    case BROADCAST:
        MPI_Bcast(send, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(send, recv, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        MPI_Allreduce(send, recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(send, recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLTOALL:
        MPI_Alltoall(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, MPI_COMM_WORLD);
        break;
    case SCATTER:
        MPI_Scatter(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        break;
    case GATHER:
        MPI_Gather(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        break;
    case SCAN:
        MPI_Scan(send, recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs one (collective, size) point and, on rank 0, prints its JSON line. */
static void measure(int c, long bytes, int warmup, int iterations, int rank, int p) {
    long n = bytes / 8;
    long send_count, recv_count;
    buffer_counts(c, p, n, &send_count, &recv_count);
    /* At least one element each, so that the pointers are valid for n = 0. */
    double *send = malloc((size_t)(send_count + 1) * sizeof(double));
    double *recv = malloc((size_t)(recv_count + 1) * sizeof(double));
    double *mine_us = malloc((size_t)(iterations + 1) * sizeof(double));
    double *times = malloc((size_t)(iterations + 1) * sizeof(double));
    if (send == NULL || recv == NULL || mine_us == NULL || times == NULL) {
        fprintf(stderr, "rank %d: out of memory for %s of %ld bytes\n", rank, NAMES[c], bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i <= send_count; i++) {
        send[i] = (double)(rank + 1) + (double)(i % 1000) * 1e-3;
    }
    memset(recv, 0, (size_t)(recv_count + 1) * sizeof(double));
    for (int iteration = 0; iteration < warmup + iterations; iteration++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double started = MPI_Wtime();
        call(c, send, recv, (int)n);
        double mine = MPI_Wtime() - started;
        if (iteration >= warmup) {
            mine_us[iteration - warmup] = mine * 1e6;
        }
    }
    /* Each iteration's slowest rank, taken once after the loop, as topocomm's
     * coordinator takes it from the nodes' reports: a reduction after every call would
     * make rank 0 enter each barrier last, leave it first, and start a broadcast or a
     * scatter while the other ranks are still leaving, and small broadcasts look
     * faster than they are (docs/PERFORMANCE-NOTES.md). */
    MPI_Reduce(mine_us, times, iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double sum = 0.0;
        for (int i = 0; i < iterations; i++) {
            sum += times[i];
        }
        qsort(times, (size_t)iterations, sizeof(double), by_value);
        double median = iterations % 2 == 1 ? times[iterations / 2]
                                            : (times[iterations / 2 - 1] + times[iterations / 2]) / 2.0;
        printf("{\"collective\":\"%s\",\"size_bytes\":%ld,\"p\":%d,\"iterations\":%d,"
               "\"time_us\":{\"min\":%.3f,\"median\":%.3f,\"mean\":%.3f,\"max\":%.3f}}\n",
               NAMES[c], bytes, p, iterations, times[0], median, sum / iterations, times[iterations - 1]);
        fflush(stdout);
    }
    free(send);
    free(recv);
    free(mine_us);
    free(times);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int warmup = 3, iterations = 20;
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "-i") == 0 && first + 1 < argc) {
            iterations = atoi(argv[first + 1]);
        } else if (strcmp(argv[first], "-w") == 0 && first + 1 < argc) {
            warmup = atoi(argv[first + 1]);
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: %s [-i ITERATIONS] [-w WARMUP] COLLECTIVE:BYTES ...\n", argv[0]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        first += 2;
    }
    if (iterations < 1) {
        iterations = 1;
    }
    for (int a = first; a < argc; a++) {
        char name[64];
        long bytes = -1;
        const char *colon = strchr(argv[a], ':');
        int c = -1;
        if (colon != NULL && (size_t)(colon - argv[a]) < sizeof name) {
            memcpy(name, argv[a], (size_t)(colon - argv[a]));
            name[colon - argv[a]] = '\0';
            c = parse_collective(name);
            bytes = strtol(colon + 1, NULL, 10);
        }
        if (c < 0 || bytes < 0 || bytes % 8 != 0) {
            if (rank == 0) {
                fprintf(stderr, "bad point %s: want COLLECTIVE:BYTES, BYTES a multiple of 8\n", argv[a]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        measure(c, bytes, warmup, iterations, rank, p);
    }
    MPI_Finalize();
    return 0;
}
