"""Conformance for data sync: message, schema, squash and trace vectors, the trace replayer and
the live suite against a Flight server."""
