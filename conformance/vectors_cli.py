"""``python -m conformance vectors``: check golden vectors against a target.

Fails (exit 1) on any failing vector and (exit 3) when no vector ran at all (every one missing or
unsupported by the target's declared capabilities).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import Counter
from typing import Callable, Iterator

from conformance.framework import VectorResult

VECTOR_SUITES = ("shuffle", "sync", "cluster", "pgoutput", "delta")
EXIT_OK, EXIT_FAILED, EXIT_NO_VECTOR = 0, 1, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, choices=VECTOR_SUITES)
    parser.add_argument("--target", default="reference", help="implementation to check (default: reference)")


def main(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"conformance.{args.suite}.vector_suite")
    check: Callable[[str], Iterator[VectorResult]] = module.check_vectors
    counts: dict[str, Counter[str]] = {"passed": Counter(), "failed": Counter(), "unsupported": Counter()}
    for result in check(args.target):
        kind = "unsupported" if result.unsupported else "passed" if result.passed else "failed"
        counts[kind][result.group] += 1
        if kind == "failed":
            print(f"FAIL {result.group} {result.name}: {result.detail}", flush=True)
    groups = sorted(set().union(*counts.values()))
    print(f"\n== {args.suite} vectors against {args.target} ==")
    for group in groups:
        line = f"{group:<40} {counts['passed'][group]:>5} passed {counts['failed'][group]:>5} failed"
        if counts["unsupported"][group]:
            line += f" {counts['unsupported'][group]:>5} unsupported"
        print(line)
    total = {kind: sum(c.values()) for kind, c in counts.items()}
    print(f"vectors: {total['passed']} passed, {total['failed']} failed, {total['unsupported']} unsupported")
    if total["passed"] + total["failed"] == 0:
        print("error: no vector ran", file=sys.stderr)
        return EXIT_NO_VECTOR
    return EXIT_FAILED if total["failed"] else EXIT_OK
