/*
 * mpibench: times one MPI collective (or a ping-pong) for the Hoplite
 * benchmarks. Built and launched by bench/peers/mpi/run; see README.md.
 *
 *   mpibench --op bcast|reduce|allreduce|gather|p2p --size BYTES --reps R
 *            [--interval-ms X] [--algorithm NAME] [--max-rep-s S]
 *
 * Data are random float32 so that nothing on the path can compress them.
 * Every repetition starts with MPI_Barrier; each rank takes its own exit
 * from the barrier as the common start and measures its own completion
 * against it, and the repetition's time is the MAX over ranks (the
 * collective is done when the last rank is done). With --interval-ms X,
 * rank i enters the collective i*X ms after the start, and the reported
 * time runs from the LAST rank's actual entry (about (N-1)*X) to the last
 * completion, which is what thesis Fig. 2.8 compares. p2p is a ping-pong between
 * ranks 0 and 1, reported as one-way time (round trip / 2). One warm-up
 * repetition is run and not counted. Rank 0 prints one RESULT line.
 * With --max-rep-s S, a repetition (the warm-up included) that takes
 * longer than S seconds ends the run: rank 0 prints a SKIPPED line
 * instead (run's --algorithm best uses it to drop hopeless candidates).
 *
 * cpu_s is the median over repetitions of the CPU time (user + system,
 * getrusage of each rank's own process, every thread) that the ranks
 * spent inside the timed call, summed over ranks: what the operation
 * cost the machine, for comparison with the members' own accounting.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum op { OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_GATHER, OP_P2P };

static const char *op_names[] = {"bcast", "reduce", "allreduce", "gather", "p2p"};

static int rank, nranks;

static void usage_fail(const char *msg)
{
	if (rank == 0)
		fprintf(stderr,
			"mpibench: %s\nusage: mpibench --op bcast|reduce|allreduce|gather|p2p "
			"--size BYTES --reps R [--interval-ms X] [--algorithm NAME] [--max-rep-s S]\n",
			msg);
	MPI_Finalize();
	exit(2);
}

static double now(void)
{
	/* CLOCK_MONOTONIC so the arrival schedule can use clock_nanosleep on
	 * the same clock as the measurement. */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* cpu_seconds is this process's CPU time so far, every thread, user and
 * system. */
static double cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void sleep_until(double t)
{
	struct timespec ts;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Random float32 in [0,1): 23 random mantissa bits per value, different
 * per rank; xorshift64* is enough, this is about entropy not statistics. */
static void fill_random(float *buf, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		buf[i] = (float)((x * 0x2545F4914F6CDD1DULL) >> 40) / (float)(1 << 24);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void check(int rc, const char *what)
{
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "mpibench: rank %d: %s failed (code %d)\n", rank, what, rc);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);

	int op = -1;
	long long size = -1;
	long reps = -1;
	double interval_ms = 0;
	const char *algorithm = "default";
	double max_rep_s = 0; /* 0: no limit */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (i + 1 >= argc)
			usage_fail("every flag needs a value");
		const char *v = argv[++i];
		char *end;
		if (strcmp(a, "--op") == 0) {
			for (int k = 0; k < 5; k++)
				if (strcmp(v, op_names[k]) == 0)
					op = k;
			if (op < 0)
				usage_fail("unknown --op");
		} else if (strcmp(a, "--size") == 0) {
			size = strtoll(v, &end, 10);
			if (*end || size <= 0)
				usage_fail("--size must be a positive integer (bytes)");
		} else if (strcmp(a, "--reps") == 0) {
			reps = strtol(v, &end, 10);
			if (*end || reps <= 0)
				usage_fail("--reps must be a positive integer");
		} else if (strcmp(a, "--interval-ms") == 0) {
			interval_ms = strtod(v, &end);
			if (*end || interval_ms < 0)
				usage_fail("--interval-ms must be a non-negative number");
		} else if (strcmp(a, "--algorithm") == 0) {
			algorithm = v;
		} else if (strcmp(a, "--max-rep-s") == 0) {
			max_rep_s = strtod(v, &end);
			if (*end || max_rep_s < 0)
				usage_fail("--max-rep-s must be a non-negative number (seconds)");
		} else {
			usage_fail("unknown flag");
		}
	}
	if (op < 0 || size < 0 || reps < 0)
		usage_fail("--op, --size and --reps are required");
	if ((op == OP_REDUCE || op == OP_ALLREDUCE) && size % 4 != 0)
		usage_fail("--size must be a multiple of 4 for reduce/allreduce (float32)");
	if (op == OP_P2P && nranks < 2)
		usage_fail("p2p needs at least 2 ranks");
	if (op == OP_P2P && interval_ms > 0)
		usage_fail("--interval-ms does not apply to p2p");
	if (size > (long long)0x7fffffff * 4)
		usage_fail("--size too large for one MPI call");

	/* Counts in float32 where the op computes, in bytes where it only
	 * moves data, so odd sizes still work for bcast/gather/p2p. */
	size_t nfloat = (size_t)(size + 3) / 4;
	float *src = malloc(nfloat * 4);
	float *dst = NULL;
	size_t dst_bytes = 0;
	if (op == OP_REDUCE || op == OP_ALLREDUCE)
		dst_bytes = nfloat * 4;
	else if (op == OP_GATHER && rank == 0)
		dst_bytes = (size_t)size * (size_t)nranks;
	if (dst_bytes)
		dst = malloc(dst_bytes);
	if (!src || (dst_bytes && !dst)) {
		fprintf(stderr, "mpibench: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	fill_random(src, nfloat, (uint64_t)rank + 1);
	if (dst)
		memset(dst, 0, dst_bytes); /* touch the pages before timing */

	double *times = calloc((size_t)reps, sizeof(double));
	double *cpus = calloc((size_t)reps, sizeof(double));
	int skipped = 0; /* stopped by --max-rep-s: no RESULT */
	for (long r = -1; r < reps; r++) { /* r == -1 is the warm-up */
		check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		double start = now();
		/* entry: when this rank actually called the collective. A rank
		 * woken late on a busy machine has not "arrived" yet, so the
		 * reference is the last actual entry, not the scheduled one. */
		double entry = 0;
		if (interval_ms > 0) {
			sleep_until(start + rank * interval_ms * 1e-3);
			entry = now() - start;
		}
		double cpu0 = cpu_seconds();
		switch (op) {
		case OP_BCAST:
			check(MPI_Bcast(src, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
			break;
		case OP_REDUCE:
			check(MPI_Reduce(src, dst, (int)nfloat, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD),
			      "MPI_Reduce");
			break;
		case OP_ALLREDUCE:
			check(MPI_Allreduce(src, dst, (int)nfloat, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
			      "MPI_Allreduce");
			break;
		case OP_GATHER:
			check(MPI_Gather(src, (int)size, MPI_BYTE, dst, (int)size, MPI_BYTE, 0,
					 MPI_COMM_WORLD),
			      "MPI_Gather");
			break;
		case OP_P2P:
			if (rank == 0) {
				check(MPI_Send(src, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD), "MPI_Send");
				check(MPI_Recv(src, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
					       MPI_STATUS_IGNORE),
				      "MPI_Recv");
			} else if (rank == 1) {
				check(MPI_Recv(src, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
					       MPI_STATUS_IGNORE),
				      "MPI_Recv");
				check(MPI_Send(src, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD), "MPI_Send");
			}
			break;
		}
		double end = now();
		double cpu = cpu_seconds() - cpu0, cpu_sum = 0;
		check(MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
		      "MPI_Reduce(sum)");
		/* {completion, entry} relative to this rank's start; the MAX of
		 * each over ranks gives the last completion and last entry. */
		double mine[2] = {end - start, entry}, worst[2] = {0, 0};
		if (op == OP_P2P)
			mine[0] = rank == 0 ? (end - start) / 2 : 0;
		check(MPI_Reduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
		      "MPI_Reduce(max)");
		if (r >= 0) {
			times[r] = worst[0] - worst[1];
			cpus[r] = cpu_sum;
		}
		/* A sweep's candidate that is far slower than the algorithm to
		 * beat stops after its first repetition (the warm-up) instead of
		 * running them all: every rank must stop together, so rank 0
		 * decides and tells the others, outside the timed call. */
		if (max_rep_s > 0) {
			int stop = rank == 0 && worst[0] - worst[1] > max_rep_s;
			check(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast(stop)");
			if (stop) {
				if (rank == 0) {
					printf("SKIPPED peer=mpi op=%s nodes=%d size=%lld algorithm=%s rep_s=%.6f "
					       "max_rep_s=%g\n",
					       op_names[op], nranks, size, algorithm, worst[0] - worst[1], max_rep_s);
					fflush(stdout);
				}
				skipped = 1;
				break;
			}
		}
	}

	if (rank == 0 && !skipped) {
		qsort(times, (size_t)reps, sizeof(double), cmp_double);
		double median = reps % 2 ? times[reps / 2] : (times[reps / 2 - 1] + times[reps / 2]) / 2;
		qsort(cpus, (size_t)reps, sizeof(double), cmp_double);
		double cpu_median = reps % 2 ? cpus[reps / 2] : (cpus[reps / 2 - 1] + cpus[reps / 2]) / 2;
		printf("RESULT peer=mpi op=%s nodes=%d size=%lld algorithm=%s interval_ms=%g "
		       "median=%.6f min=%.6f max=%.6f reps=%ld cpu_s=%.6f\n",
		       op_names[op], nranks, size, algorithm, interval_ms, median, times[0],
		       times[reps - 1], reps, cpu_median);
		fflush(stdout);
	}
	free(times);
	free(cpus);
	free(dst);
	free(src);
	MPI_Finalize();
	return 0;
}
