"""python -m tests.sql.fuzz [technique ...] [--queries N] [--seed S] [--per-world N]
                        [--jobs J] [--interleave] [--progress] [--replay SEED]
                        [--timeout SECS] [--first-world W] [-v]

Runs the SQL fuzzers (tests/sql/fuzz/__init__.py) and prints, per technique,
`N queries, M mismatches` with the wall time, then each mismatch (seed and SQL). A
statement that runs past `--timeout` seconds (default runner.STATEMENT_TIMEOUT) is stopped
and reported as a timeout with its seed (`, K timeouts` on the last line).

`--jobs J` runs the worlds in J worker processes (world w of seed S is the same world
whichever process builds it, so the seeds stay disjoint and replayable); results are
merged in world order. `--interleave` advances every technique together, world by world,
each world built once for all of them. `--progress` prints the running counts after each
world, naming it (`world 41: diff: ...`); `--first-world W` continues such a run, stopped
after world W-1, with the same seed (its counts then start from zero)."""

from __future__ import annotations

import argparse
import sys
import time

from tests.sql.fuzz.runner import STATEMENT_TIMEOUT, TECHNIQUES, Runner, Stats, world_results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sql.fuzz")
    ap.add_argument("techniques", nargs="*", default=list(TECHNIQUES),
                    help=f"any of {', '.join(TECHNIQUES)}, wire (default: all but wire)")
    ap.add_argument("--queries", type=int, default=1000, help="queries per technique")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-world", type=int, default=200,
                    help="queries per random schema and data set")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (worlds)")
    ap.add_argument("--replay", type=int, metavar="SEED",
                    help="run the one query of this seed (from a mismatch report) again")
    ap.add_argument("--interleave", action="store_true",
                    help="advance all techniques together, world by world")
    ap.add_argument("--progress", action="store_true",
                    help="print the running counts after each world (long runs)")
    ap.add_argument("--timeout", type=float, default=STATEMENT_TIMEOUT,
                    help="time limit of one statement in seconds (0: none)")
    ap.add_argument("--max-mismatches", type=int, default=50,
                    help="stop a technique after this many mismatches")
    ap.add_argument("--first-world", type=int, default=0, metavar="W",
                    help="start at world W of the seed (continue a stopped long run)")
    ap.add_argument("-v", "--verbose", action="store_true", help="outcome counts too")
    args = ap.parse_args(argv)
    if args.first_world and args.replay is not None:
        ap.error("--first-world continues a run; --replay runs one query")
    failed = False
    groups = [args.techniques] if args.interleave else [[t] for t in args.techniques]
    for group in groups:
        t0 = time.perf_counter()
        if group == ["wire"] and args.replay is None:
            # through real `kudusql serve` processes (tests/sql/fuzz/wire.py), one per job
            from tests.sql.fuzz.wire import wire_results
            st = Stats()
            shown = 0
            for w, out in wire_results(args.seed, args.queries, min(args.per_world, 100),
                                       args.jobs, args.first_world):
                st.merge(out)
                if args.progress:
                    secs = time.perf_counter() - t0
                    print(f"  ... world {w}: wire: {st.queries} queries, "
                          f"{len(st.mismatches)} mismatches ({secs:.0f} s, "
                          f"{st.queries / secs:.1f}/s)", flush=True)
                    for m in st.mismatches[shown:]:
                        print("  " + str(m).replace("\n", "\n  "), flush=True)
                    shown = len(st.mismatches)
                if len(st.mismatches) >= args.max_mismatches:
                    break
            results = {"wire": st}
        elif args.replay is not None:
            from tests.sql.fuzz.wire import WireRunner
            results = {t: WireRunner().replay(args.replay) if t == "wire" else
                       Runner(t, args.seed, args.timeout).replay(args.replay) for t in group}
        else:
            if "wire" in group:
                ap.error("wire runs on its own (not with --interleave)")
            results = {t: Stats() for t in group}
            shown = dict.fromkeys(group, 0)
            shown_late = dict.fromkeys(group, 0)
            for w, out in world_results(group, args.seed, args.queries, args.per_world,
                                        args.jobs, args.timeout, args.first_world):
                for t, st in out.items():
                    if results[t].queries < args.queries:
                        results[t].merge(st)
                if args.progress:
                    secs = time.perf_counter() - t0
                    for t, st in results.items():
                        print(f"  ... world {w}: {t}: {st.queries} queries, "
                              f"{len(st.mismatches)} mismatches ({secs:.0f} s, "
                              f"{st.queries / secs:.1f}/s)", flush=True)
                        for m in st.mismatches[shown[t]:]:
                            print("  " + str(m).replace("\n", "\n  "), flush=True)
                        shown[t] = len(st.mismatches)
                        for m in st.timeouts[shown_late[t]:]:
                            print("  timeout " + str(m).replace("\n", "\n  "), flush=True)
                        shown_late[t] = len(st.timeouts)
                if all(st.queries >= args.queries or len(st.mismatches) >= args.max_mismatches
                       for st in results.values()):
                    break
        secs = time.perf_counter() - t0
        for t, st in results.items():
            if args.verbose:
                for k, v in st.outcomes.most_common():
                    print(f"    {v:7d} {k}")
                for k, v in st.unsupported.most_common(10):
                    print(f"    {v:7d} 0A000 {k}")
            if not args.progress or args.replay is not None:
                for m in st.mismatches[:20]:
                    print("  " + str(m).replace("\n", "\n  "))
            if not args.progress:
                for m in st.timeouts[:20]:
                    print("  timeout " + str(m).replace("\n", "\n  "))
            failed |= bool(st.mismatches)
        for t, st in results.items():   # the last lines: `N queries, M mismatches`
            late = f", {len(st.timeouts)} timeouts" if st.timeouts else ""
            print(f"{t}: {st.queries} queries, {len(st.mismatches)} mismatches{late} "
                  f"({secs:.1f} s, {st.queries / max(secs, 1e-9):.1f}/s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
