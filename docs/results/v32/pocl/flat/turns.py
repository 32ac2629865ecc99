"""The timing loop the scripts here share: each of `runs` (name, enqueue function) twice to
warm up, then `reps` turns of all of them, each waited for on queue `q`; prints the min and
the median ms of each."""
import time


def time_in_turns(runs, q, reps=15, width=12):
    res = {n: [] for n, _ in runs}
    for _, f in runs:
        f()
        f()
    q.finish()
    for _ in range(reps):
        for n, f in runs:
            t = time.perf_counter()
            f()
            q.finish()
            res[n].append(time.perf_counter() - t)
    for n, v in res.items():
        v = sorted(v)
        print("%-*s min %.2f med %.2f ms" % (width, n, v[0] * 1e3, v[len(v) // 2] * 1e3))
