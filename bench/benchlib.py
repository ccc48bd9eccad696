"""What several bench scripts share: the statistics they report of a list of timings, and the
config file a bench's nsbox runs with."""
import json
import os
import statistics


def summary(xs):
    """Median, p10 and p90 (the value at that share of the sorted list) and n."""
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    return {"median": statistics.median(xs), "p10": q(0.10), "p90": q(0.90), "n": len(xs)}


def summary_ms(ns):
    """Timings in ns as ms: median, p10 and p90 (inclusive deciles) and n."""
    ms = sorted(x / 1e6 for x in ns)
    q = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) >= 2 else [ms[0]] * 9
    return {"median_ms": statistics.median(ms), "p10_ms": q[0], "p90_ms": q[-1], "n": len(ms)}


def pool_config(work, name, pool):
    """A config file with the given pool section (None: none, nsbox's default), merged over
    $NSBOX_CONFIG's (or /etc/nsbox/config.json's) other sections; the env that selects it."""
    cfg = {}
    base = os.environ.get("NSBOX_CONFIG") or "/etc/nsbox/config.json"
    if os.path.exists(base):
        with open(base) as f:
            cfg = json.load(f)
    cfg.pop("pool", None)
    if pool is not None:
        cfg["pool"] = pool
    path = os.path.join(work, name + "-config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return {"NSBOX_CONFIG": path}
