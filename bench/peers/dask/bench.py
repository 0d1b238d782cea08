"""Dask distributed peer: the client side of bench/peers/dask/run.

Runs in host 0's namespace against a scheduler and one worker per testbed
host that `run` has started, times one collective the way a Dask user would
write it, and prints one RESULT line on stdout. Everything else goes to
stderr.

Run it through `run`, not directly: it needs the scheduler address and the
worker addresses in host order.
"""

import argparse
import os
import statistics
import sys
import time
import uuid

import dask
import numpy as np
from distributed import Client, wait


def log(*a):
    print("dask-peer:", *a, file=sys.stderr, flush=True)


# Task functions. They run on the workers; keep them top level so cloudpickle
# sends them by reference to this module's code, not by value of globals.


def make_random(nbytes, dtype, ready_at=None):
    """Incompressible data: Dask compresses what it sends when it can."""
    rng = np.random.default_rng()
    if dtype == "float32":
        a = rng.random(nbytes // 4, dtype=np.float32)
    else:
        a = np.frombuffer(rng.bytes(nbytes), dtype=np.uint8)
    if ready_at is not None:
        # Asynchrony: the object becomes ready at a fixed time, not when the
        # random generator happens to finish.
        d = ready_at - time.time()
        if d > 0:
            time.sleep(d)
    return a


def length(x):
    return x.nbytes


def total_length(*xs):
    return sum(x.nbytes for x in xs)


def sum_arrays(*xs):
    out = xs[0].copy()
    for x in xs[1:]:
        out += x
    return out


def add(a, b):
    return a + b


def head(x, n=16):
    return np.array(x[:n], dtype=np.float64)


def worker_data_count(dask_worker):
    return len(dask_worker.data)


def worker_compression():
    return str(dask.config.get("distributed.comm.compression"))


class Bench:
    def __init__(self, client, workers, args, bw_bytes):
        self.c = client
        self.w = workers  # addresses, host order
        self.n = len(workers)
        self.a = args
        # Generous deadline for one step: 4x a naive all-to-one pattern at the
        # emulated bandwidth, plus the asynchrony and scheduler slack.
        naive = self.n * args.size / bw_bytes if bw_bytes else 0
        self.deadline = 60 + 4 * naive + (self.n * args.interval_ms / 1000.0)

    def key(self, what, i=""):
        return f"{what}{i}-{uuid.uuid4().hex[:12]}"

    def pin(self, fn, *args, worker, name, **kw):
        return self.c.submit(
            fn, *args, key=self.key(name), workers=[self.w[worker]],
            allow_other_workers=False, pure=False, **kw)

    def wait(self, futs):
        wait(futs, timeout=self.deadline)
        bad = [f for f in futs if f.status != "finished"]
        if bad:
            raise RuntimeError(f"{len(bad)} task(s) failed: {bad[0].exception()!r}")

    def sources(self, idx, dtype, interval):
        """One pinned random object per worker in idx. With interval > 0
        source k becomes ready k*interval after a common start (returned)."""
        if interval <= 0:
            futs = [self.pin(make_random, self.a.size, dtype, worker=i, name=f"src{i}")
                    for i in idx]
            self.wait(futs)
            return futs, None
        # Leave time for the submissions and the random generation before
        # the first deadline, so readiness follows the schedule.
        start = time.time() + 2.0 + self.a.size / 25e6
        futs = [self.pin(make_random, self.a.size, dtype, start + k * interval,
                         worker=i, name=f"src{i}")
                for k, i in enumerate(idx)]
        return futs, start + (len(idx) - 1) * interval

    def last_ready(self, futs, planned, t_from):
        """When the last source's task actually finished (scheduler task
        stream), so a late source does not flatter the number."""
        keys = {f.key for f in futs}
        stops = []
        for t in self.c.get_task_stream(start=t_from - 1):
            if t.get("key") in keys:
                for ss in t.get("startstops", []):
                    if ss.get("action") == "compute":
                        stops.append(ss["stop"])
        if len(stops) < len(keys):
            log(f"task stream lacks {len(keys) - len(stops)} source(s); using the planned time")
            return planned
        actual = max(stops)
        if actual - planned > 0.05:
            log(f"last source ready {actual - planned:.3f}s after its planned time")
        return max(actual, planned)

    def rep(self):
        """One repetition; returns seconds. Every object has new keys."""
        op, S, v = self.a.op, self.a.size, self.a.variant
        n = self.n
        interval = self.a.interval_ms / 1000.0
        if op == "p2p":
            src, _ = self.sources([0], "uint8", 0)
            t0 = time.time()
            dst = self.pin(length, src[0], worker=1, name="p2p")
            self.wait([dst])
            t1 = time.time()
            assert dst.result() == S
            return t1 - t0, [src, dst]

        if op == "bcast":
            if v == "scatter":
                # The client holds the object (host 0) and scatters it to
                # every worker; Dask scatters to one and replicates in a tree.
                data = make_random(S, "uint8")
                t0 = time.time()
                fut = self.c.scatter(data, broadcast=True, hash=False)
                t1 = time.time()
                self.check_replicas(fut)
                return t1 - t0, [fut]
            src, _ = self.sources([0], "uint8", 0)
            if v == "replicate":
                t0 = time.time()
                self.c.replicate(src)
                t1 = time.time()
                self.check_replicas(src[0])
                return t1 - t0, [src]
            # tasks: one task per receiver depending on the object.
            t0 = time.time()
            cons = [self.pin(length, src[0], worker=i, name=f"bc{i}") for i in range(1, n)]
            self.wait(cons)
            t1 = time.time()
            assert all(x == S for x in self.c.gather(cons))
            return t1 - t0, [src, cons]

        if op == "gather":
            srcs, t_last = self.sources(range(1, n), "uint8", interval)
            t_sub = time.time()
            t0 = t_sub if t_last is None else None
            g = self.pin(total_length, *srcs, worker=0, name="gather")
            self.wait([g])
            t1 = time.time()
            if t0 is None:
                t0 = self.last_ready(srcs, t_last, t_sub)
            assert g.result() == (n - 1) * S
            return t1 - t0, [srcs, g]

        if op == "reduce":
            srcs, t_last = self.sources(range(n), "float32", interval)
            t_sub = time.time()
            t0 = t_sub if t_last is None else None
            if v == "tree":
                # Pairwise adds, placed by the scheduler next to their inputs.
                level = list(srcs)
                while len(level) > 1:
                    nxt = [self.c.submit(add, level[i], level[i + 1],
                                         key=self.key("add"), pure=False)
                           for i in range(0, len(level) - 1, 2)]
                    if len(level) % 2:
                        nxt.append(level[-1])
                    level = nxt
                out = level[0]
            else:
                # One task on worker 0 taking every future.
                out = self.pin(sum_arrays, *srcs, worker=0, name="reduce")
            self.wait([out])
            t1 = time.time()
            if t0 is None:
                t0 = self.last_ready(srcs, t_last, t_sub)
            self.check_sum(srcs, out)
            return t1 - t0, [srcs, out]

        raise ValueError(op)

    def check_replicas(self, fut):
        who = self.c.who_has([fut]).get(fut.key, ())
        if len(who) != self.n:
            raise RuntimeError(f"broadcast left {len(who)} of {self.n} copies")

    def check_sum(self, srcs, out):
        heads = self.c.gather([self.c.submit(head, f, pure=False) for f in srcs + [out]])
        want = np.sum(heads[:-1], axis=0)
        if not np.allclose(heads[-1], want, rtol=1e-5, atol=1e-5):
            raise RuntimeError("reduce result is not the sum of its sources")

    def release(self, held):
        """Drop this repetition's futures and wait until the workers have
        freed the data, so the next repetition starts from empty stores."""
        held.clear()
        end = time.time() + 30
        while True:
            counts = self.c.run(worker_data_count)
            if all(v == 0 for v in counts.values()):
                return
            if time.time() > end:
                raise RuntimeError(f"workers still hold data after 30 s: {counts}")
            time.sleep(0.05)


def bandwidth_bytes(s):
    """tc rate like 400mbit -> bytes/s (None if unparseable)."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for u in ("kbit", "mbit", "gbit", "bit"):
        if s and s.endswith(u):
            try:
                return float(s[: -len(u)]) * units[u] / 8
            except ValueError:
                return None
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--scheduler", required=True)
    p.add_argument("--op", required=True, choices=["bcast", "gather", "reduce", "p2p"])
    p.add_argument("--size", required=True, type=int)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--interval-ms", type=float, default=0.0)
    p.add_argument("--variant", default="")
    p.add_argument("--nodes", required=True, type=int)
    p.add_argument("--bandwidth", default="")
    p.add_argument("--connect-timeout", type=float, default=60)
    a = p.parse_args()

    defaults = {"bcast": "tasks", "reduce": "gather"}
    allowed = {"bcast": {"tasks", "scatter", "replicate"},
               "reduce": {"gather", "tree"}, "gather": {"tasks"}, "p2p": {"tasks"}}
    a.variant = a.variant or defaults.get(a.op, "tasks")
    if a.variant not in allowed[a.op]:
        p.error(f"--variant for {a.op} is one of {sorted(allowed[a.op])}")
    if a.interval_ms and a.op not in ("reduce", "gather"):
        p.error("--interval-ms applies to reduce and gather")
    if a.op == "reduce" and a.size % 4:
        p.error("reduce sums float32: --size must be a multiple of 4")
    if a.nodes < 2:
        p.error("needs at least 2 hosts")

    if dask.config.get("distributed.comm.compression") is not None:
        p.error("distributed.comm.compression must be None (run sets it)")

    client = Client(a.scheduler, timeout=a.connect_timeout, set_as_default=True)
    try:
        client.wait_for_workers(a.nodes, timeout=a.connect_timeout)
        info = client.scheduler_info()["workers"]
        by_name = {str(w["name"]): addr for addr, w in info.items()}
        workers = [by_name[f"w{i}"] for i in range(a.nodes)]
        comp = client.run(worker_compression)
        if any(v != "None" for v in comp.values()):
            raise RuntimeError(f"a worker compresses: {comp}")
        client.get_task_stream()  # installs the scheduler's task-stream plugin
        b = Bench(client, workers, a, bandwidth_bytes(a.bandwidth))
        log(f"op={a.op} variant={a.variant} nodes={a.nodes} size={a.size} "
            f"interval_ms={a.interval_ms:g} reps={a.reps} (+1 warm-up), compression=None")
        times = []
        for r in range(a.reps + 1):
            t, held = b.rep()
            b.release(held)
            log(f"{'warm-up' if r == 0 else f'rep {r}'}: {t:.4f}s")
            if r > 0:
                times.append(t)
        print(f"RESULT peer=dask op={a.op} nodes={a.nodes} size={a.size} "
              f"interval_ms={a.interval_ms:g} median={statistics.median(times):.6f} "
              f"min={min(times):.6f} max={max(times):.6f} reps={a.reps} "
              f"variant={a.variant}", flush=True)
    finally:
        client.close(timeout=10)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
