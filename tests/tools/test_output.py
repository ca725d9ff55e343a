"""Command output bounds: what the model sees, and the rate-limited live share."""

from __future__ import annotations

from burrow.tools.output import LiveOutput, OutputBuffer, ReadPace, Stream


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def recorder() -> tuple[list[tuple[Stream, str]], LiveOutput, Clock]:
    shown: list[tuple[Stream, str]] = []

    async def sink(stream: Stream, text: str) -> None:
        shown.append((stream, text))

    clock = Clock()
    return shown, LiveOutput(sink, rate=1000, burst=8000, limit=20_000, clock=clock), clock


async def test_live_output_passes_a_burst_then_the_rate_and_marks_what_it_held_back() -> None:
    shown, live, clock = recorder()
    await live.add("stdout", "a" * 5000)
    await live.add("stdout", "b" * 5000)  # 3,000 fit in the burst
    assert "".join(t for _, t in shown) == "a" * 5000 + "b" * 3000
    clock.now = 1.0  # 1,000 bytes of room: less than a useful piece after a gap
    await live.add("stdout", "c" * 5000)
    assert len(shown) == 2
    clock.now = 10.0  # room again: a marker for the 7,000 held back, then the new output
    await live.add("stderr", "d" * 100)
    assert shown[2][0] == "stderr" and "7,000 characters not shown live" in shown[2][1]
    assert shown[3] == ("stderr", "d" * 100)
    await live.finish()
    assert len(shown) == 4  # nothing held back since


async def test_live_output_stops_at_its_per_call_limit_whatever_the_duration() -> None:
    shown, live, clock = recorder()
    for second in range(1000):
        clock.now = float(second)
        await live.add("stdout", "é" * 4000)  # 8,000 bytes a second
    await live.finish()
    total = sum(len(t.encode()) for _, t in shown)
    assert live.sent_bytes == total and total <= 20_000 + 200
    assert "not shown live" in shown[-1][1]
    held = sum(len(t) for _, t in shown if "not shown live" not in t)
    assert held + live.total_elided_chars == 4000 * 1000


async def test_live_output_never_splits_a_character() -> None:
    shown, live, _ = recorder()
    await live.add("stdout", "€" * 5000)  # 3 bytes each: 8,000 bytes is 2,666 and a part
    assert shown == [("stdout", "€" * 2666)]


def test_the_model_gets_head_note_and_tail_of_a_long_output() -> None:
    buffer = OutputBuffer(head=10, tail=5)
    for _ in range(1000):
        buffer.add("0123456789\n")
    text = buffer.for_model(".burrow/outputs/c.log")
    assert text.startswith("0123456789\n\n[... 10,985 characters (999 lines) omitted")
    assert ".burrow/outputs/c.log" in text and text.endswith("6789\n")
    assert buffer.truncated and buffer.full_text() == "0123456789\n" * 1000


def test_reading_a_flood_is_paced_after_the_free_allowance() -> None:
    clock = Clock()
    pace = ReadPace(free=1000, rate=100, clock=clock)
    assert pace.delay(600) == 0 and pace.delay(400) == 0  # within the allowance
    assert pace.delay(50) == 0.5  # 50 bytes over at 100 bytes/s
    clock.now = 10.0  # 1,000 more bytes allowed since
    assert pace.delay(900) == 0 and pace.delay(100) == 0.5
