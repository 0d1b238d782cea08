/*
 * echo: the smallest request-reply over TCP, written without a language
 * runtime in the way: the floor a data plane's own round trip is held to
 * (hoplite bench --peers echo, beside data-rtt, the same round trips on
 * Hoplite's data plane).
 *
 *   echo serve PORT SIZE
 *     answers every SIZE-byte message on every connection with SIZE
 *     bytes, one thread per connection, until SIGTERM; then prints
 *     "cpu_s=X" (its CPU time, every thread) on stdout.
 *   echo ping HOST PORT SIZE WARMUP REPS START_NS STEP_NS
 *     connects (TCP_NODELAY, as Hoplite's data plane), makes WARMUP
 *     round trips, then REPS more: rep k at START_NS + k*STEP_NS
 *     (CLOCK_REALTIME, shared by every host of the testbed), each timed
 *     from just before its send to just after its reply. Prints
 *     "rep K START_NS END_NS" per rep and "cpu_s=X" (the timed reps'
 *     CPU, user and system).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long size;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* full reads or writes n bytes; 0 at a clean end of the stream. */
static int full(int fd, char *p, long n, int writing)
{
	long done = 0;
	while (done < n) {
		ssize_t k = writing ? write(fd, p + done, n - done) : read(fd, p + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			return 0;
		done += k;
	}
	return 1;
}

static void *serve_conn(void *arg)
{
	int fd = (int)(long)arg;
	char *buf = malloc(size);
	while (full(fd, buf, size, 0) == 1)
		if (full(fd, buf, size, 1) != 1)
			break;
	free(buf);
	close(fd);
	return NULL;
}

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static int serve(int port)
{
	int ln = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (ln < 0)
		die("socket");
	setsockopt(ln, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(ln, (struct sockaddr *)&a, sizeof a) < 0)
		die("bind");
	if (listen(ln, 64) < 0)
		die("listen");
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL); /* no SA_RESTART: accept returns EINTR */
	printf("listening\n");
	fflush(stdout);
	while (!stop) {
		int fd = accept(ln, NULL, NULL);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pthread_t t;
		pthread_create(&t, NULL, serve_conn, (void *)(long)fd);
		pthread_detach(t);
	}
	printf("cpu_s=%.6f\n", cpu_seconds());
	return 0;
}

static int ping(const char *host, const char *port, long warmup, long reps, long long start, long long step)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		die("getaddrinfo");
	int fd = -1, one = 1;
	for (int tries = 0; tries < 200; tries++) { /* the server may still be starting */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(10000);
	}
	if (fd < 0)
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	char *buf = calloc(1, size);
	for (long i = 0; i < warmup; i++)
		if (full(fd, buf, size, 1) != 1 || full(fd, buf, size, 0) != 1)
			die("warm-up round trip");
	double cpu = 0;
	for (long k = 0; k < reps; k++) {
		long long at = start + k * step;
		struct timespec ts = {.tv_sec = at / 1000000000LL, .tv_nsec = at % 1000000000LL};
		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		double c0 = cpu_seconds();
		long long s = now_ns();
		if (full(fd, buf, size, 1) != 1 || full(fd, buf, size, 0) != 1)
			die("round trip");
		long long e = now_ns();
		cpu += cpu_seconds() - c0;
		printf("rep %ld %lld %lld\n", k, s, e);
	}
	printf("cpu_s=%.6f\n", cpu);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "serve") == 0) {
		size = atol(argv[3]);
		if (size <= 0)
			die("size");
		return serve(atoi(argv[2]));
	}
	if (argc == 9 && strcmp(argv[1], "ping") == 0) {
		size = atol(argv[4]);
		if (size <= 0)
			die("size");
		return ping(argv[2], argv[3], atol(argv[5]), atol(argv[6]), atoll(argv[7]), atoll(argv[8]));
	}
	fprintf(stderr, "usage: echo serve PORT SIZE | echo ping HOST PORT SIZE WARMUP REPS START_NS STEP_NS\n");
	return 2;
}
