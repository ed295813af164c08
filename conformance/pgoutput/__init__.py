"""pgoutput (Postgres logical replication) golden vectors: the checker and the capture tool."""
