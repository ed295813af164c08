"""``python -m tests.mutants [--catalogue spec|runtime] [NAME ...]``: run the catalogues (or the named
mutants) and print each catalogue's score."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tests.mutants.catalogue import ALL_MUTANTS, CATALOGUES
from tests.mutants.harness import Outcome, chosen, run_all

REQUIRED_SCORE = 0.95


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutants to run (default: the whole catalogue)")
    parser.add_argument("--catalogue", choices=sorted(CATALOGUES), action="append",
                        help="run this catalogue (repeatable; default: every one: spec, runtime)")
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2, help="parallel runs (2 cores)")
    parser.add_argument("--json", type=Path, default=Path("build/mutants.json"), help="report file")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not first run the selections on the unmutated tree (only when known green)")
    args = parser.parse_args()
    catalogues = args.catalogue or sorted(CATALOGUES, reverse=True)
    pool = [m for name in catalogues for m in CATALOGUES[name]]
    mutants = list(chosen(ALL_MUTANTS, args.names)) if args.names else pool
    catalogue_of = {m.name: name for name, items in CATALOGUES.items() for m in items}
    if args.list:
        for m in mutants:
            print(f"{m.name:40} {m.file:32} {m.description}")
        return 0

    def show(outcome: Outcome) -> None:
        verdict = f"killed by {outcome.killed_by}" if outcome.killed else "SURVIVED"
        print(f"{outcome.mutant:40} {outcome.seconds:7.1f}s  {verdict}", flush=True)

    outcomes = run_all(mutants, workers=args.workers, baseline=not args.skip_baseline, progress=show)
    by_name = {m.name: m for m in mutants}
    scores: dict[str, dict[str, object]] = {}
    below: list[str] = []
    print()
    for name in dict.fromkeys(catalogue_of[o.mutant] for o in outcomes):
        mine = [o for o in outcomes if catalogue_of[o.mutant] == name]
        killed = sum(o.killed for o in mine)
        survivors = [o.mutant for o in mine if not o.killed]
        scores[name] = {"killed": killed, "total": len(mine), "score": killed / len(mine), "survivors": survivors}
        if killed / len(mine) < REQUIRED_SCORE:
            below.append(name)
        print(f"{name} mutation score: {killed} of {len(mine)} killed ({killed / len(mine):.1%}); "
              f"survivors: {', '.join(survivors) or 'none'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "catalogues": scores,
        "mutants": [{"name": o.mutant, "catalogue": catalogue_of[o.mutant], "file": by_name[o.mutant].file,
                     "description": by_name[o.mutant].description, "killed": o.killed,
                     "killed_by": o.killed_by, "seconds": o.seconds} for o in outcomes],
    }, indent=2) + "\n")
    print(f"report written to {args.json}")
    return 1 if below else 0


if __name__ == "__main__":
    raise SystemExit(main())
