"""The SecretSandbox handle over a real bwrap sandbox: commands and terminals get the
environment; what they print and what tools read comes back masked, chunk by chunk."""

from __future__ import annotations

from burrow.sandbox.backend import ExecChunk, ExecRequest
from burrow.sandbox.local import LocalSandbox
from burrow.sandbox.masking import SecretMask
from burrow.sandbox.secret_env import Exposure, SecretSandbox
from tests.sandbox.harness import read_pty_until, run

VALUE = "tok-Sandbox-Handle-5150"
DRIP = 'for i in $(seq 0 $((${#TOKEN}-1))); do printf %s "${TOKEN:$i:1}"; sleep 0.02; done'


def handle(sandbox: LocalSandbox, env: dict[str, str], values: list[str]) -> SecretSandbox:
    exposure = Exposure(env, SecretMask(values))

    async def lookup() -> Exposure:
        return exposure

    return SecretSandbox(sandbox, lookup, lambda: exposure.mask)


async def test_a_command_gets_the_env_and_its_dripped_output_is_masked(
    sandbox: LocalSandbox,
) -> None:
    secret = handle(sandbox, {"TOKEN": VALUE}, [VALUE])
    chunks: list[bytes] = []
    async for event in secret.exec(ExecRequest(argv=["bash", "-c", f"{DRIP}; echo; {DRIP} >&2"])):
        if isinstance(event, ExecChunk):
            chunks.append(event.data)
    assert len(chunks) >= 2 and not any(b"Sandbox" in c for c in chunks)
    assert b"".join(chunks).count(b"****") == 2
    # The request's own env wins over a secret of the same name.
    done = await run(secret, "bash", "-c", 'echo "$TOKEN"', env={"TOKEN": "from-request"})
    assert done.stdout == b"from-request\n"
    # The bare sandbox never had it: the handle gives it per command.
    bare = await run(sandbox, "bash", "-c", 'echo "${TOKEN:-unset}"')
    assert bare.stdout == b"unset\n"


async def test_files_read_through_the_handle_are_masked(sandbox: LocalSandbox) -> None:
    secret = handle(sandbox, {"TOKEN": VALUE}, [VALUE])
    await run(secret, "bash", "-c", 'printf "key=%s\\n" "$TOKEN" > kept.txt')
    assert await secret.read_file("kept.txt") == b"key=****\n"
    assert await sandbox.read_file("kept.txt") == f"key={VALUE}\n".encode()  # the file is real


async def test_a_terminal_gets_the_env_and_masks_what_it_shows(sandbox: LocalSandbox) -> None:
    secret = handle(sandbox, {"TOKEN": VALUE}, [VALUE])
    session = await secret.open_pty(80, 24)
    try:
        await session.write(f'{DRIP}; echo; echo "n=${{#TOKEN}}"; echo EN""D\n'.encode())
        shown = await read_pty_until(session, b"END\r\n")
    finally:
        session.close()
    assert VALUE.encode() not in shown
    assert b"****" in shown and f"n={len(VALUE)}".encode() in shown
