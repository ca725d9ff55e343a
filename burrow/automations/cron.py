"""Five-field cron expressions (minute hour day-of-month month day-of-week), parsed and
stepped in the server's local timezone. A small parser instead of a dependency: numbers,
`*`, ranges `a-b`, steps `*/n` and `a-b/n`, lists `a,b`; day-of-week 0-7 (0 and 7 Sunday).
As in cron, when both day fields are restricted a day matching either one fires."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
          ("day of week", 0, 7))  # fmt: skip
MAX_LENGTH = 200
SEARCH_DAYS = 366 * 5  # Feb 29 on a Monday recurs within 28 years; 5 covers every other


class CronError(ValueError):
    """What is wrong with an expression, said so the author can fix it."""


@dataclass(frozen=True)
class Cron:
    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month was `*`
    any_weekday: bool

    def _day_matches(self, moment: datetime) -> bool:
        day_ok = moment.day in self.days
        weekday_ok = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    def next_after(self, moment: datetime) -> datetime | None:
        """The first minute strictly after `moment` that matches (same tzinfo), or None
        when none does within SEARCH_DAYS (an impossible date like Feb 30)."""
        candidate = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        end = candidate + timedelta(days=SEARCH_DAYS)
        while candidate < end:
            if candidate.month not in self.months or not self._day_matches(candidate):
                candidate = (candidate + timedelta(days=1)).replace(hour=0, minute=0)
                continue
            if candidate.hour not in self.hours:
                candidate = (candidate + timedelta(hours=1)).replace(minute=0)
                continue
            if candidate.minute in self.minutes:
                return candidate
            candidate += timedelta(minutes=1)
        return None


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{name}: the step in {part!r} must be a positive number")
            step = int(step_text)
        if base == "*":
            start, stop = low, high
        else:
            first, dash, last = base.partition("-")
            if not first.isdigit() or (dash and not last.isdigit()):
                raise CronError(f"{name}: {part!r} is not a number, range or */step")
            start = int(first)
            stop = int(last) if dash else (high if step_text else start)
            if not (low <= start <= high and low <= stop <= high):
                raise CronError(f"{name}: {part!r} is outside {low}-{high}")
            if start > stop:
                raise CronError(f"{name}: the range {part!r} runs backwards")
        values.update(range(start, stop + 1, step))
    return frozenset(values)


def parse(expression: str) -> Cron:
    if len(expression) > MAX_LENGTH:
        raise CronError(f"a cron expression has at most {MAX_LENGTH} characters")
    parts = expression.split()
    if len(parts) != len(FIELDS):
        raise CronError(
            "a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"this one has {len(parts)}"
        )
    sets = [_field(text, *spec) for text, spec in zip(parts, FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    cron = Cron(expression, sets[0], sets[1], sets[2], sets[3], weekdays,
                any_day=parts[2] == "*", any_weekday=parts[4] == "*")  # fmt: skip
    if cron.next_after(datetime(2000, 1, 1)) is None:
        raise CronError(f"{expression!r} never fires (no such date)")
    return cron
