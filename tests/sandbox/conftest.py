from tests.sandbox.harness import any_sandbox, backend, limited_backend, sandbox
from tests.sandbox.remote import sandbox_host

__all__ = ["any_sandbox", "backend", "limited_backend", "sandbox", "sandbox_host"]
