/*
 * mpibench: times one MPI collective (or a ping-pong) for the Hoplite
 * benchmarks. Built and launched by bench/peers/mpi/run; see README.md.
 *
 *   mpibench --op bcast|reduce|allreduce|gather|p2p --size BYTES --reps R
 *            [--interval-ms X] [--algorithm NAME] [--max-rep-s S]
 *            [--start-lead-ms L]
 *
 * Data are random float32 so that nothing on the path can compress them.
 * Every repetition is timed as Hoplite's bench times its own: after an
 * MPI_Barrier, rank 0 schedules a common start L ms ahead (default 20,
 * the bench's startLead) on CLOCK_REALTIME, which every namespace of the
 * testbed shares, and sends it to the others; each rank sleeps until it,
 * notes when it actually woke (its start) and calls the collective. The
 * repetition's time runs from the FIRST rank's start to the LAST rank's
 * completion. A rank that wakes late on a busy machine is charged, as a
 * member that wakes late is charged to ours; timing each rank from its
 * own exit from a barrier, as this program did before, is not (a leaf
 * that left the barrier late could find an eager message already there).
 * The slowest rank from its own start (own=) and how far apart the ranks
 * started (skew=) are reported beside, medians over the repetitions:
 * own is the old method's figure, so the difference between the two is
 * in every RESULT line. With --interval-ms X, rank i starts i*X ms after
 * the common start, and the time runs from the LAST rank's actual start
 * (about (N-1)*X) to the last completion, which is what thesis Fig. 2.8
 * compares. p2p is a ping-pong between ranks 0 and 1 from the common
 * start, reported as one-way time (round trip / 2). One warm-up
 * repetition is run and not counted. Rank 0 prints one RESULT line, with
 * timing=scheduled. With --max-rep-s S, a repetition (the warm-up
 * included) that takes longer than S seconds ends the run: rank 0 prints
 * a SKIPPED line instead (run's --algorithm best uses it to drop hopeless
 * candidates).
 *
 * cpu_s is the median over repetitions of the CPU time (user + system,
 * getrusage of each rank's own process, every thread) that the ranks
 * spent inside the timed call, summed over ranks: what the operation
 * cost the machine, for comparison with the members' own accounting.
 * machine_s is the median of the whole machine's busy CPU time (all of
 * /proc/stat's but idle and iowait) from rank 0's start of the call to
 * the moment every rank has ended it, as Hoplite's bench records
 * machine_busy_s: it counts the kernel's network work wherever it ran.
 * It is left out if /proc/stat cannot be read.
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
#include <unistd.h>

enum op { OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_GATHER, OP_P2P };

static const char *op_names[] = {"bcast", "reduce", "allreduce", "gather", "p2p"};

static int rank, nranks;

static void usage_fail(const char *msg)
{
	if (rank == 0)
		fprintf(stderr,
			"mpibench: %s\nusage: mpibench --op bcast|reduce|allreduce|gather|p2p "
			"--size BYTES --reps R [--interval-ms X] [--algorithm NAME] [--max-rep-s S] "
			"[--start-lead-ms L]\n",
			msg);
	MPI_Finalize();
	exit(2);
}

/* now_ns is CLOCK_REALTIME in nanoseconds: the testbed's namespaces
 * share it, so a start scheduled by rank 0 is the same instant on every
 * rank (Hoplite's bench agents schedule theirs on it too). Integer
 * nanoseconds: a double of seconds since 1970 has only about 0.2 us of
 * resolution, a tenth of a small operation's skew. */
static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
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

/* machine_busy_seconds is the whole machine's busy CPU time so far,
 * summed over its CPUs: the first line of /proc/stat but idle and iowait.
 * The kernel runs the network stack's receive work in whichever task is
 * on the CPU, or in its own threads, so a process's CPU time does not say
 * what its messages cost; the machine's does, when nothing else runs.
 * -1 if it cannot be read. */
static double machine_busy_seconds(void)
{
	unsigned long long v[8];
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return -1;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		       &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (n != 8 || hz <= 0)
		return -1;
	/* user nice system idle iowait irq softirq steal */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

/* sleep_until_ns sleeps until CLOCK_REALTIME reaches t (at once if it
 * has). */
static void sleep_until_ns(int64_t t)
{
	struct timespec ts;
	ts.tv_sec = (time_t)(t / 1000000000LL);
	ts.tv_nsec = (long)(t % 1000000000LL);
	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
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

/* median sorts v (n > 0 values) and returns their median. */
static double median(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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
	double lead_ms = 20;  /* Hoplite's bench schedules its starts 20 ms ahead */
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
		} else if (strcmp(a, "--start-lead-ms") == 0) {
			lead_ms = strtod(v, &end);
			if (*end || !(lead_ms >= 0) || lead_ms > 60000)
				usage_fail("--start-lead-ms must be a number of milliseconds in 0..60000");
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
	double *owns = calloc((size_t)reps, sizeof(double));
	double *skews = calloc((size_t)reps, sizeof(double));
	double *machines = calloc((size_t)reps, sizeof(double));
	int machine_ok = 1; /* every repetition's machine time was read */
	if (!times || !cpus || !owns || !skews || !machines) {
		fprintf(stderr, "mpibench: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	int skipped = 0; /* stopped by --max-rep-s: no RESULT */
	for (long r = -1; r < reps; r++) { /* r == -1 is the warm-up */
		/* The common start: rank 0's clock, lead_ms after everyone has
		 * reached the barrier, so that the start reaches every rank
		 * before it is due. */
		check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		int64_t at = 0;
		if (rank == 0)
			at = now_ns() + (int64_t)(lead_ms * 1e6);
		check(MPI_Bcast(&at, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast(start)");
		/* With an interval, rank i is due i*X ms after the common start. */
		sleep_until_ns(at + (int64_t)(rank * interval_ms * 1e6));
		/* start: when this rank actually called the collective. A rank
		 * woken late on a busy machine has not started yet, so the
		 * reference is its actual start, not the scheduled one. */
		int64_t start = now_ns();
		double cpu0 = cpu_seconds();
		/* Rank 0 reads the machine's counters: at its start, and once
		 * the CPU sum below has come from every rank, which each sends
		 * after its call ended. */
		double machine0 = rank == 0 ? machine_busy_seconds() : -1;
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
		int64_t end = now_ns();
		double cpu = cpu_seconds() - cpu0, cpu_sum = 0;
		check(MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
		      "MPI_Reduce(sum)");
		double machine1 = rank == 0 ? machine_busy_seconds() : -1;
		/* Seconds from the scheduled start (small numbers: exact in a
		 * double). The MAX over ranks of each gives the last end, the
		 * slowest rank from its own start, the last start and, negated,
		 * the first start. p2p is rank 0's round trip, halved. */
		double mine[4] = {(double)(end - at) * 1e-9, (double)(end - start) * 1e-9,
				  (double)(start - at) * 1e-9, -(double)(start - at) * 1e-9};
		double worst[4] = {0, 0, 0, 0};
		if (op == OP_P2P && rank != 0)
			mine[0] = mine[1] = 0, mine[2] = -1e9, mine[3] = -1e9;
		check(MPI_Reduce(mine, worst, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
		      "MPI_Reduce(max)");
		double first_start = -worst[3], last_start = worst[2];
		double t = worst[0] - (interval_ms > 0 ? last_start : first_start);
		if (op == OP_P2P)
			t = worst[1] / 2;
		if (r >= 0) {
			times[r] = t;
			cpus[r] = cpu_sum;
			machines[r] = machine0 >= 0 && machine1 >= 0 ? machine1 - machine0 : -1;
			if (machines[r] < 0)
				machine_ok = 0;
			owns[r] = op == OP_P2P ? worst[1] / 2 : worst[1];
			skews[r] = last_start - first_start;
		}
		/* A sweep's candidate that is far slower than the algorithm to
		 * beat stops after its first repetition (the warm-up) instead of
		 * running them all: every rank must stop together, so rank 0
		 * decides and tells the others, outside the timed call. */
		if (max_rep_s > 0) {
			int stop = rank == 0 && t > max_rep_s;
			check(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast(stop)");
			if (stop) {
				if (rank == 0) {
					printf("SKIPPED peer=mpi op=%s nodes=%d size=%lld algorithm=%s rep_s=%.6f "
					       "max_rep_s=%g\n",
					       op_names[op], nranks, size, algorithm, t, max_rep_s);
					fflush(stdout);
				}
				skipped = 1;
				break;
			}
		}
	}

	if (rank == 0 && !skipped) {
		/* min and max before median() sorts the times. */
		double lo = times[0], hi = times[0];
		for (long i = 1; i < reps; i++)
			lo = times[i] < lo ? times[i] : lo, hi = times[i] > hi ? times[i] : hi;
		printf("RESULT peer=mpi op=%s nodes=%d size=%lld algorithm=%s interval_ms=%g "
		       "median=%.6f min=%.6f max=%.6f reps=%ld cpu_s=%.6f timing=scheduled own=%.6f "
		       "skew=%.6f",
		       op_names[op], nranks, size, algorithm, interval_ms, median(times, reps), lo, hi,
		       reps, median(cpus, reps), median(owns, reps), median(skews, reps));
		if (machine_ok)
			printf(" machine_s=%.6f", median(machines, reps));
		printf("\n");
		fflush(stdout);
	}
	free(owns);
	free(machines);
	free(skews);
	free(times);
	free(cpus);
	free(dst);
	free(src);
	MPI_Finalize();
	return 0;
}
