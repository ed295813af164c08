"""Conformance for the cluster provider: trace vectors, their generator, the live suite, the
backend harness and the linearizability checker."""
