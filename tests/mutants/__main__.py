"""``python -m tests.mutants [NAME ...]``: run the catalogue (or the named mutants) and print the score."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tests.mutants.catalogue import CATALOGUE
from tests.mutants.harness import Outcome, chosen, run_all

REQUIRED_SCORE = 0.95


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutants to run (default: the whole catalogue)")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2, help="parallel runs (2 cores)")
    parser.add_argument("--json", type=Path, default=Path("build/mutants.json"), help="report file")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not first run the selections on the unmutated tree (only when known green)")
    args = parser.parse_args()
    mutants = list(chosen(CATALOGUE, args.names))
    if args.list:
        for m in mutants:
            print(f"{m.name:34} {m.file:28} {m.description}")
        return 0

    def show(outcome: Outcome) -> None:
        verdict = f"killed by {outcome.killed_by}" if outcome.killed else "SURVIVED"
        print(f"{outcome.mutant:34} {outcome.seconds:7.1f}s  {verdict}", flush=True)

    outcomes = run_all(mutants, workers=args.workers, baseline=not args.skip_baseline, progress=show)
    killed = sum(o.killed for o in outcomes)
    score = killed / len(outcomes)
    survivors = [o.mutant for o in outcomes if not o.killed]
    print(f"\nmutation score: {killed} of {len(outcomes)} killed ({score:.1%}); "
          f"survivors: {', '.join(survivors) or 'none'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    by_name = {m.name: m for m in mutants}
    args.json.write_text(json.dumps({
        "killed": killed, "total": len(outcomes), "score": score,
        "mutants": [{"name": o.mutant, "file": by_name[o.mutant].file,
                     "description": by_name[o.mutant].description, "killed": o.killed,
                     "killed_by": o.killed_by, "seconds": o.seconds} for o in outcomes],
    }, indent=2) + "\n")
    print(f"report written to {args.json}")
    return 0 if score >= REQUIRED_SCORE else 1


if __name__ == "__main__":
    raise SystemExit(main())
