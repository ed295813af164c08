"""The project's main job: a real-time CDC pipeline over all three protocols (``python -m reference.pipeline``).

Source tasks generate a change stream, the streaming shuffle routes each change to the sink task
owning its key, sink tasks land their share in a Delta table through the data-sync protocol, and
the cluster provider tells everyone where the sync server is and who is alive.  See docs/pipeline.md.
"""
