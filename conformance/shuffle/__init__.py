"""Conformance for the streaming shuffle: wire and trace vectors, their generator, the live suite,
the scripted peer and the targets (``exec:``, ``tcp://``, Spark's JVM)."""
