"""python -m tests.sql.fuzz [technique ...] [--queries N] [--seed S] [--per-world N]
                        [--replay SEED] [-v]

Runs the SQL fuzzers (tests/sql/fuzz/__init__.py) and prints, per technique,
`N queries, M mismatches` with the wall time, then each mismatch (seed and SQL)."""

from __future__ import annotations

import argparse
import sys
import time

from tests.sql.fuzz.runner import TECHNIQUES, Runner


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sql.fuzz")
    ap.add_argument("techniques", nargs="*", default=list(TECHNIQUES),
                    help=f"any of {', '.join(TECHNIQUES)}, wire (default: all but wire)")
    ap.add_argument("--queries", type=int, default=1000, help="queries per technique")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-world", type=int, default=200,
                    help="queries per random schema and data set")
    ap.add_argument("--replay", type=int, metavar="SEED",
                    help="run the one query of this seed (from a mismatch report) again")
    ap.add_argument("--interleave", action="store_true",
                    help="advance all techniques together, world by world")
    ap.add_argument("--progress", action="store_true",
                    help="print the running counts after each world (long runs)")
    ap.add_argument("-v", "--verbose", action="store_true", help="outcome counts too")
    args = ap.parse_args(argv)
    failed = False
    if args.interleave:       # every technique advances world by world (partial runs count)
        runners = {tech: Runner(tech, args.seed) for tech in args.techniques}
        shown = dict.fromkeys(runners, 0)
        t0 = time.perf_counter()
        done, w = 0, 0
        while done < args.queries:
            n = min(args.per_world, args.queries - done)
            for r in runners.values():
                r.run_world(w, n)
            done += n
            w += 1
            secs = time.perf_counter() - t0
            for tech, r in runners.items():
                print(f"{'  ... ' if done < args.queries else ''}{tech}: {r.stats.queries} "
                      f"queries, {len(r.stats.mismatches)} mismatches ({secs:.0f} s)",
                      flush=True)
                for m in r.stats.mismatches[shown[tech]:]:
                    print("  " + str(m).replace("\n", "\n  "), flush=True)
                shown[tech] = len(r.stats.mismatches)
        return 1 if any(r.stats.mismatches for r in runners.values()) else 0
    for tech in args.techniques:
        t = time.perf_counter()
        shown = [0]

        def progress(st, tech=tech, t0=t):
            if args.progress:
                print(f"  ... {tech}: {st.queries} queries, {len(st.mismatches)} mismatches "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
                for m in st.mismatches[shown[0]:]:
                    print("  " + str(m).replace("\n", "\n  "), flush=True)
                shown[0] = len(st.mismatches)
        if tech == "wire":       # through a real `kudusql serve` (tests/sql/fuzz/wire.py)
            from tests.sql.fuzz.wire import WireRunner
            st = WireRunner(args.seed).run(args.queries, min(args.per_world, 100))
        else:
            r = Runner(tech, args.seed)
            st = r.replay(args.replay) if args.replay is not None else \
                r.run(args.queries, args.per_world, progress=progress)
        secs = time.perf_counter() - t
        print(f"{tech}: {st.queries} queries, {len(st.mismatches)} mismatches "
              f"({secs:.1f} s)", flush=True)
        if args.verbose:
            for k, v in st.outcomes.most_common():
                print(f"    {v:7d} {k}")
            for k, v in st.unsupported.most_common(10):
                print(f"    {v:7d} 0A000 {k}")
        for m in st.mismatches[shown[0]:][:20]:
            print("  " + str(m).replace("\n", "\n  "))
        failed |= bool(st.mismatches)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
