"""Implementations the conformance suites can be pointed at."""
