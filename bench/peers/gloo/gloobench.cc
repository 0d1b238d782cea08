// gloobench: times one Gloo collective (or a ping-pong) for the Hoplite
// benchmarks. Built and launched by bench/peers/gloo/run, one process per
// testbed host; see README.md.
//
//   gloobench --rank I --nranks N --host ADDR --store DIR
//             --op bcast|reduce|allreduce|gather|p2p --size BYTES --reps R
//             [--algorithm NAME] [--interval-ms X] [--timeout S]
//             [--start-lead-ms L]
//
// The processes meet through a gloo::rendezvous::FileStore in DIR (every
// testbed namespace sees the same file system) and talk over Gloo's TCP
// transport bound to ADDR. Algorithms (default: what gloo::broadcast,
// gloo::reduce, gloo::allreduce do when asked for nothing in particular):
//
//   bcast      binomial (gloo::broadcast), one_to_all (BroadcastOneToAll)
//   reduce     ring (gloo::reduce: ring reduce-scatter, then gather to root)
//   allreduce  ring, bcube (gloo::allreduce with RING / BCUBE),
//              ring_chunked (AllreduceRingChunked),
//              halving_doubling (AllreduceHalvingDoubling)
//   gather     direct (gloo::gather)
//   p2p        direct (send/recv between ranks 0 and 1)
//
// Timing is the same as bench/peers/mpi/mpibench.c, and as Hoplite's bench
// times its own: after a barrier rank 0 schedules a common start L ms
// ahead (default 20) on CLOCK_REALTIME, which the testbed's namespaces
// share, and broadcasts it; every rank sleeps until it and notes when it
// actually woke; the repetition's time runs from the first rank's start to
// the last rank's completion. The slowest rank from its own start (own=,
// what timing each rank from its own barrier exit used to report) and the
// ranks' start skew (skew=) are reported beside, medians. With
// --interval-ms X rank i starts i*X ms after the common start and the
// time runs from the last actual start. One warm-up repetition is not
// counted. Data
// are random float32 (a counter-based hash, so any rank can recompute any
// other rank's value), and after the last repetition a few sampled values
// of the result are checked, so a run that moved the wrong bytes fails
// instead of reporting a time. Rank 0 prints one RESULT line.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <cerrno>
#include <sys/resource.h>
#include <unistd.h>

#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

struct Flags {
  int rank = -1, nranks = -1;
  std::string host, store, op, algorithm = "default";
  long long size = -1;
  long reps = -1;
  double interval_ms = 0;
  double lead_ms = 20; // Hoplite's bench schedules its starts 20 ms ahead
  long timeout_s = 600;
};

[[noreturn]] void usage_fail(const std::string& msg) {
  fprintf(stderr,
          "gloobench: %s\nusage: gloobench --rank I --nranks N --host ADDR --store DIR "
          "--op bcast|reduce|allreduce|gather|p2p --size BYTES --reps R "
          "[--algorithm NAME] [--interval-ms X] [--timeout S] [--start-lead-ms L]\n",
          msg.c_str());
  exit(2);
}

// The algorithms each op has, the default first.
std::vector<std::string> algorithms(const std::string& op) {
  if (op == "bcast") return {"binomial", "one_to_all"};
  if (op == "reduce") return {"ring"};
  if (op == "allreduce") return {"ring", "bcube", "ring_chunked", "halving_doubling"};
  if (op == "gather" || op == "p2p") return {"direct"};
  return {};
}

long long parse_int(const char* v, const char* what) {
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (*v == '\0' || *end || errno || x < 0) usage_fail(std::string(what) + " must be a non-negative integer");
  return x;
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage_fail("every flag needs a value");
    const char* v = argv[i + 1];
    if (a == "--rank") f.rank = (int)parse_int(v, "--rank");
    else if (a == "--nranks") f.nranks = (int)parse_int(v, "--nranks");
    else if (a == "--host") f.host = v;
    else if (a == "--store") f.store = v;
    else if (a == "--op") f.op = v;
    else if (a == "--algorithm") f.algorithm = v;
    else if (a == "--size") f.size = parse_int(v, "--size");
    else if (a == "--reps") f.reps = (long)parse_int(v, "--reps");
    else if (a == "--timeout") f.timeout_s = (long)parse_int(v, "--timeout");
    else if (a == "--interval-ms") {
      char* end;
      f.interval_ms = strtod(v, &end);
      if (*end || !(f.interval_ms >= 0)) usage_fail("--interval-ms must be a non-negative number");
    } else if (a == "--start-lead-ms") {
      char* end;
      f.lead_ms = strtod(v, &end);
      if (*end || !(f.lead_ms >= 0) || f.lead_ms > 60000)
        usage_fail("--start-lead-ms must be a number of milliseconds in 0..60000");
    } else usage_fail("unknown flag " + a);
  }
  if (f.rank < 0 || f.nranks < 1 || f.rank >= f.nranks) usage_fail("need 0 <= --rank < --nranks");
  if (f.host.empty() || f.store.empty()) usage_fail("--host and --store are required");
  auto algs = algorithms(f.op);
  if (algs.empty()) usage_fail("unknown --op " + f.op);
  if (f.size <= 0 || f.reps <= 0) usage_fail("--size and --reps must be positive");
  if ((f.op == "reduce" || f.op == "allreduce") && f.size % 4 != 0)
    usage_fail("--size must be a multiple of 4 for reduce/allreduce (float32)");
  // The older algorithm classes count elements in an int.
  if (f.size / 4 > 0x7fffffffLL) usage_fail("--size too large");
  if (f.op == "p2p" && f.nranks < 2) usage_fail("p2p needs at least 2 ranks");
  if (f.op == "p2p" && f.interval_ms > 0) usage_fail("--interval-ms does not apply to p2p");
  if (f.timeout_s <= 0) usage_fail("--timeout must be positive");
  if (f.algorithm == "default") f.algorithm = algs[0];
  if (std::find(algs.begin(), algs.end(), f.algorithm) == algs.end()) {
    std::string valid;
    for (auto& s : algs) valid += " " + s;
    usage_fail("--algorithm " + f.algorithm + " is not one of " + f.op + "'s:" + valid);
  }
  return f;
}

// cpu_seconds is this process's CPU time so far, every thread (Gloo's
// transport threads too), user and system.
double cpu_seconds() {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// machine_busy_seconds is the whole machine's busy CPU time so far,
// summed over its CPUs: /proc/stat's first line but idle and iowait (see
// mpibench.c), -1 if it cannot be read.
double machine_busy_seconds() {
  unsigned long long v[8];
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return -1;
  int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                      &v[6], &v[7]);
  std::fclose(f);
  long hz = sysconf(_SC_CLK_TCK);
  if (n != 8 || hz <= 0) return -1;
  // user nice system idle iowait irq softirq steal
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

// now_ns is CLOCK_REALTIME in nanoseconds: the testbed's namespaces share
// it, so rank 0's scheduled start is the same instant on every rank (as
// for Hoplite's bench agents). Integers: a double of seconds since 1970
// resolves only about 0.2 us.
int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// sleep_until_ns sleeps until CLOCK_REALTIME reaches t (at once if it has).
void sleep_until_ns(int64_t t) {
  struct timespec ts;
  ts.tv_sec = (time_t)(t / 1000000000LL);
  ts.tv_nsec = (long)(t % 1000000000LL);
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// value is element i of rank r's data: random float32 in [0,1) with 24
// random bits, from splitmix64 of (r, i), so a checker can recompute any
// element of any rank without generating the whole stream.
float value(int r, size_t i) {
  uint64_t z = ((uint64_t)(r + 1) << 40) ^ (uint64_t)i;
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (float)(z >> 40) / (float)(1 << 24);
}

void fill(float* buf, size_t n, int r) {
  for (size_t i = 0; i < n; i++) buf[i] = value(r, i);
}

// Sampled element indices for the final check: both ends and a spread.
std::vector<size_t> samples(size_t n) {
  std::vector<size_t> out;
  const size_t k = 16;
  for (size_t j = 0; j < k && j < n; j++) out.push_back(n <= k ? j : j * (n - 1) / (k - 1));
  return out;
}

struct Failure : std::exception {
  std::string msg;
  explicit Failure(std::string m) : msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
};

void expect_sum(const float* got, size_t n, int nranks, const char* what) {
  for (size_t i : samples(n)) {
    float want = 0;
    for (int r = 0; r < nranks; r++) want += value(r, i);
    if (std::fabs(got[i] - want) > 1e-4f * (float)nranks)
      throw Failure(std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                    ", want the sum " + std::to_string(want));
  }
}

void expect_copy(const void* got, size_t nbytes, int from, const char* what) {
  // Whole float32 elements only; got may be unaligned (gather of an odd
  // size), hence memcmp.
  size_t n = nbytes / 4;
  for (size_t i : samples(n)) {
    float want = value(from, i);
    if (std::memcmp(static_cast<const uint8_t*>(got) + 4 * i, &want, 4) != 0)
      throw Failure(std::string(what) + ": element " + std::to_string(i) + " differs from rank " +
                    std::to_string(from) + "'s");
  }
}

// median returns the median of v (not empty), sorting it.
double median(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size();
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

int run(const Flags& f) {
  const int rank = f.rank, n = f.nranks;
  const auto timeout = std::chrono::milliseconds(f.timeout_s * 1000);

  gloo::transport::tcp::attr attr;
  attr.hostname = f.host;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(f.store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(timeout);
  ctx->connectFullMesh(store, dev);

  // Counts in float32 where the op computes, in bytes where it only moves
  // data, so odd sizes still work for bcast, gather and p2p.
  const size_t size = (size_t)f.size;
  const size_t nfloat = (size + 3) / 4;
  std::vector<float> src(nfloat), dst, work;
  fill(src.data(), nfloat, rank);
  const std::string& op = f.op;
  const std::string& alg = f.algorithm;
  if (op == "reduce" || op == "allreduce" || op == "bcast" || op == "p2p") dst.assign(nfloat, 0.0f);
  if (op == "gather" && rank == 0) dst.assign((size * n + 3) / 4, 0.0f);
  // The older algorithm classes reduce or copy in place: each repetition
  // starts from a fresh copy of the inputs (made before the barrier).
  std::vector<float*> ptrs;
  std::unique_ptr<gloo::Algorithm> legacy;
  if (op == "allreduce" && (alg == "ring_chunked" || alg == "halving_doubling")) {
    work = src;
    ptrs = {work.data()};
    if (alg == "ring_chunked")
      legacy.reset(new gloo::AllreduceRingChunked<float>(ctx, ptrs, (int)nfloat));
    else
      legacy.reset(new gloo::AllreduceHalvingDoubling<float>(ctx, ptrs, (int)nfloat));
  } else if (op == "bcast" && alg == "one_to_all") {
    auto* p = reinterpret_cast<uint8_t*>(rank == 0 ? src.data() : dst.data());
    legacy.reset(new gloo::BroadcastOneToAll<uint8_t>(ctx, std::vector<uint8_t*>{p}, size, 0));
  }

  auto barrier = [&] {
    gloo::BarrierOptions o(ctx);
    gloo::barrier(o);
  };
  const uint64_t p2pSlot = 0x7032703270327032ULL;
  auto once = [&] {
    if (op == "bcast" && alg == "binomial") {
      gloo::BroadcastOptions o(ctx);
      o.setRoot(0);
      // In place at the root (no extra local copy), into dst elsewhere.
      o.setOutput(reinterpret_cast<uint8_t*>(rank == 0 ? src.data() : dst.data()), size);
      gloo::broadcast(o);
    } else if (op == "reduce") {
      gloo::ReduceOptions o(ctx);
      o.setRoot(0);
      o.setInput(src.data(), nfloat);
      o.setOutput(dst.data(), nfloat);
      o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
      gloo::reduce(o);
    } else if (op == "allreduce" && !legacy) {
      gloo::AllreduceOptions o(ctx);
      o.setAlgorithm(alg == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                    : gloo::AllreduceOptions::Algorithm::RING);
      o.setInput(src.data(), nfloat);
      o.setOutput(dst.data(), nfloat);
      o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
      gloo::allreduce(o);
    } else if (op == "gather") {
      gloo::GatherOptions o(ctx);
      o.setRoot(0);
      o.setInput(reinterpret_cast<uint8_t*>(src.data()), size);
      if (rank == 0) o.setOutput(reinterpret_cast<uint8_t*>(dst.data()), size * n);
      gloo::gather(o);
    } else if (op == "p2p") {
      if (rank == 0) {
        auto out = ctx->createUnboundBuffer(src.data(), size);
        auto in = ctx->createUnboundBuffer(dst.data(), size);
        in->recv(1, p2pSlot);
        out->send(1, p2pSlot);
        out->waitSend(timeout);
        in->waitRecv(timeout);
      } else if (rank == 1) {
        auto buf = ctx->createUnboundBuffer(dst.data(), size);
        buf->recv(0, p2pSlot);
        buf->waitRecv(timeout);
        buf->send(0, p2pSlot);
        buf->waitSend(timeout);
      }
    } else {
      legacy->run();
    }
  };

  std::vector<double> times(f.reps), cpus(f.reps), owns(f.reps), skews(f.reps), machines(f.reps);
  bool machineOK = true;  // every repetition's machine time was read
  for (long r = -1; r < f.reps; r++) { // r == -1 is the warm-up
    if (!work.empty()) std::copy(src.begin(), src.end(), work.begin());
    // The common start: rank 0's clock, lead_ms after everyone reached
    // the barrier, so that it reaches every rank before it is due.
    barrier();
    int64_t at = rank == 0 ? now_ns() + (int64_t)(f.lead_ms * 1e6) : 0;
    {
      gloo::BroadcastOptions o(ctx);
      o.setRoot(0);
      o.setOutput(&at, 1);
      gloo::broadcast(o);
    }
    // With an interval, rank i is due i*X ms after the common start.
    sleep_until_ns(at + (int64_t)(rank * f.interval_ms * 1e6));
    // start: when this rank actually called the collective; a rank woken
    // late on a busy machine has not started yet.
    int64_t start = now_ns();
    double cpu0 = cpu_seconds();
    // Rank 0 reads the machine's counters: at its start, and once the CPU
    // sum below has come from every rank, each after its call ended.
    double machine0 = rank == 0 ? machine_busy_seconds() : -1;
    once();
    int64_t end = now_ns();
    double cpu = cpu_seconds() - cpu0, cpuSum = 0;
    // Seconds from the scheduled start; the max of each over ranks is the
    // last end, the slowest rank from its own start, the last start and,
    // negated, the first start. p2p is rank 0's round trip, halved.
    double mine[4] = {(double)(end - at) * 1e-9, (double)(end - start) * 1e-9, (double)(start - at) * 1e-9,
                      -(double)(start - at) * 1e-9};
    double worst[4] = {0, 0, 0, 0};
    if (op == "p2p" && rank != 0) mine[0] = mine[1] = 0, mine[2] = mine[3] = -1e9;
    gloo::AllreduceOptions o(ctx);
    o.setInput(mine, 4);
    o.setOutput(worst, 4);
    o.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    gloo::allreduce(o);
    // What the call cost every rank's process together, as mpibench
    // reports it.
    gloo::AllreduceOptions c(ctx);
    c.setInput(&cpu, 1);
    c.setOutput(&cpuSum, 1);
    c.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<double>));
    gloo::allreduce(c);
    double machine1 = rank == 0 ? machine_busy_seconds() : -1;
    double firstStart = -worst[3], lastStart = worst[2];
    double t = worst[0] - (f.interval_ms > 0 ? lastStart : firstStart);
    if (op == "p2p") t = worst[1] / 2;
    if (r >= 0) {
      times[r] = t, cpus[r] = cpuSum;
      machines[r] = machine0 >= 0 && machine1 >= 0 ? machine1 - machine0 : -1;
      if (machines[r] < 0) machineOK = false;
      owns[r] = op == "p2p" ? worst[1] / 2 : worst[1];
      skews[r] = lastStart - firstStart;
    }
  }

  // The last repetition's result, sampled.
  if (op == "allreduce") {
    expect_sum(work.empty() ? dst.data() : work.data(), nfloat, n, "allreduce");
  } else if (op == "reduce" && rank == 0) {
    expect_sum(dst.data(), nfloat, n, "reduce");
  } else if (op == "bcast" && rank != 0) {
    expect_copy(dst.data(), size, 0, "bcast");
  } else if (op == "gather" && rank == 0) {
    for (int k = 1; k < n; k++)
      expect_copy(reinterpret_cast<const uint8_t*>(dst.data()) + (size_t)k * size, size, k, "gather");
  } else if (op == "p2p" && rank == 0) {
    expect_copy(dst.data(), size, 0, "p2p echo");
  }
  // Nobody leaves while a slower rank may still be checking or reading.
  barrier();

  if (rank == 0) {
    double lo = *std::min_element(times.begin(), times.end());
    double hi = *std::max_element(times.begin(), times.end());
    double med = median(times), cpuMedian = median(cpus), own = median(owns), skew = median(skews);
    printf("RESULT peer=gloo op=%s nodes=%d size=%lld algorithm=%s interval_ms=%g "
           "median=%.6f min=%.6f max=%.6f reps=%ld cpu_s=%.6f timing=scheduled own=%.6f skew=%.6f",
           op.c_str(), n, f.size, alg.c_str(), f.interval_ms, med, lo, hi, f.reps, cpuMedian, own, skew);
    if (machineOK) printf(" machine_s=%.6f", median(machines));
    printf("\n");
    fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  try {
    return run(f);
  } catch (const std::exception& e) {
    fprintf(stderr, "gloobench: rank %d (%s, op=%s algorithm=%s): %s\n", f.rank, f.host.c_str(), f.op.c_str(),
            f.algorithm.c_str(), e.what());
    return 1;
  }
}
