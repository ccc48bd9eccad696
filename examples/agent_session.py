#!/usr/bin/env python3
"""An agent's session in an nsbox sandbox, as the hosted MistralSandbox would run it.

A hook seeds the workspace with the data the agent works on (on_create) and archives the agent's
report before the sandbox is deleted (on_destroy). In between, the "agent" (scripted here; a
model would choose these steps) looks around, writes a Python program, runs it, and reads the
result back.

    python3 examples/agent_session.py                        # nsbox on PATH, as root
    NSBOX_BIN=build/nsbox python3 examples/agent_session.py  # a built, not installed, nsbox

(It imports the client from ../python when nsbox is not installed.)

Exit status 0 when the session went as expected.
"""
import asyncio
import json
import os
import sys

try:
    import nsbox
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import nsbox

SALES_CSV = b"""region,month,units,price
north,2024-01,120,9.5
north,2024-02,135,9.5
south,2024-01,80,11.0
south,2024-02,95,11.0
east,2024-01,60,10.0
east,2024-02,75,10.0
"""

AGENT_PROGRAM = '''\
import csv, json
from collections import defaultdict

revenue = defaultdict(float)
with open("data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        revenue[row["region"]] += int(row["units"]) * float(row["price"])
best = max(revenue, key=revenue.get)
report = {"revenue": dict(sorted(revenue.items())), "best_region": best,
          "total": round(sum(revenue.values()), 2)}
with open("report.json", "w") as f:
    json.dump(report, f, indent=2)
print(f"best region: {best} ({revenue[best]:.2f})")
'''


class SeedWorkspace(nsbox.Hook):
    """Gives the agent its data when the sandbox is created, keeps its report when it ends."""

    def __init__(self):
        self.archived = None

    async def on_create(self, ctx):
        await ctx.sandbox.write_file("data/sales.csv", SALES_CSV)
        r = await ctx.sandbox.execute("python3 --version")
        print(f"[hook] sandbox {ctx.sandbox_id} created, seeded data/sales.csv "
              f"({r.stdout.strip()})")

    async def on_destroy(self, ctx):
        try:
            self.archived = json.loads(await ctx.sandbox.read_file("report.json"))
            print("[hook] archived report.json before deletion")
        except FileNotFoundError:
            print("[hook] the agent left no report")


async def agent_session(box):
    async with box.session() as sb:
        # 1. Look around, as an agent's first tool call usually does.
        r = await sb.execute("pwd; ls -R", timeout=30)
        print(f"[agent] $ pwd; ls -R\n{r.stdout}", end="")

        # 2. Write a program and run it.
        await sb.write_file("analyze.py", AGENT_PROGRAM)
        r = await sb.execute("python3 analyze.py", timeout=60)
        print(f"[agent] $ python3 analyze.py -> exit {r.exit_code}\n{r.stdout}", end="")
        if r.exit_code != 0:
            raise SystemExit(f"the program failed:\n{r.stderr}")

        # 3. Read the result back.
        report = json.loads(await sb.read_file("report.json"))
        print(f"[agent] report: {report}")

        # 4. Commands fail like they would in a shell, and the agent sees why.
        r = await sb.execute("python3 -c 'import numpy'", timeout=30)
        print(f"[agent] numpy? exit {r.exit_code}: {r.stderr.strip().splitlines()[-1]}")

        # 5. A runaway command is stopped by its timeout.
        try:
            await sb.execute("echo working; sleep 60", timeout=1)
        except nsbox.ExecTimeout as e:
            print(f"[agent] timed out as asked, after printing {e.result.stdout!r}")
        return report


def main():
    seed = SeedWorkspace()
    box = nsbox.LocalSandbox(
        instance_type="small",
        ttl_seconds=600,                    # deleted after 10 minutes even if we crash
        network=nsbox.Network.none(),       # the agent cannot reach anything
        hooks=[seed],
    )
    report = asyncio.run(agent_session(box))
    ok = (report["best_region"] == "north" and report["total"] == 5697.5
          and seed.archived == report)
    print("session ok" if ok else "unexpected result", "- the sandbox is deleted")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
