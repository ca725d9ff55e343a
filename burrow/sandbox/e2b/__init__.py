"""The e2b backend: Burrow sandboxes on an E2B endpoint, through the e2b SDK (the `e2b`
extra). `backend.py` finds and pauses remote sandboxes, `sandbox.py` is one of them,
`process.py` runs commands and terminals there, `errors.py` maps the SDK's failures."""

from burrow.sandbox.e2b.backend import E2BBackend

__all__ = ["E2BBackend"]
