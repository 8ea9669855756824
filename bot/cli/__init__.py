"""The ``labbot`` command line: ``serve`` and ``db upgrade`` run here; the rest are clients of ``/api/v1``."""
