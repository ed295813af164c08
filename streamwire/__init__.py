"""The project's command line: the ``streamwire`` command (``__main__``) and the generic helpers
every tool's command line shares (``cli``). It sits above ``reference``, ``conformance`` and
``benchmarks`` so that the runtime never imports the conformance package."""
