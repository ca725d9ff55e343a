from tests.sandbox.harness import backend, sandbox

__all__ = ["backend", "sandbox"]
