"""``python -m conformance vectors``: check golden vectors against a target.

Fails (exit 1) on any failing vector and (exit 3) when no vector ran at all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import Counter
from typing import Callable, Iterator

from conformance.framework import VectorResult

VECTOR_SUITES = ("shuffle", "sync", "cluster")
EXIT_OK, EXIT_FAILED, EXIT_NO_VECTOR = 0, 1, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, choices=VECTOR_SUITES)
    parser.add_argument("--target", default="reference", help="implementation to check (default: reference)")


def main(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"conformance.vector_suites.{args.suite}")
    check: Callable[[str], Iterator[VectorResult]] = module.check_vectors
    passed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for result in check(args.target):
        (passed if result.passed else failed)[result.group] += 1
        if not result.passed:
            print(f"FAIL {result.group} {result.name}: {result.detail}", flush=True)
    groups = sorted(set(passed) | set(failed))
    print(f"\n== {args.suite} vectors against {args.target} ==")
    for group in groups:
        print(f"{group:<40} {passed[group]:>5} passed {failed[group]:>5} failed")
    total_passed, total_failed = sum(passed.values()), sum(failed.values())
    print(f"vectors: {total_passed} passed, {total_failed} failed")
    if total_passed + total_failed == 0:
        print("error: no vector ran", file=sys.stderr)
        return EXIT_NO_VECTOR
    return EXIT_FAILED if total_failed else EXIT_OK
