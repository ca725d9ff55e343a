"""`burrow sandbox-host`: Burrow's local sandboxes behind the E2B sandbox API.

An application on top of `burrow.sandbox`, beside `burrow.api`: the stock `e2b` SDK creates,
lists and kills sandboxes through the control API (`control_api.py`) and runs commands, PTYs
and file operations through the in-sandbox "envd" API (`envd_http.py`, `process_service.py`,
`filesystem_service.py`); other ports are proxied into the sandbox (`port_proxy.py`).
`app.py` routes each request to one of them. Needs the `e2b` extra (the SDK's generated
protobuf and Connect modules encode the envd wire format).
"""
