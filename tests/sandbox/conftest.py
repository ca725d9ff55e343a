from tests.sandbox.harness import backend, limited_backend, sandbox

__all__ = ["backend", "limited_backend", "sandbox"]
