"""Date and time tools for the agent: current time, parsing, arithmetic.

Models are bad at calendars (month lengths, weekdays, time zones), so they get
exact tools. Inputs are read the French way when ambiguous ("12/03/2025" is
12 March) and French month names are understood. Timestamps are refused: the
model must pass readable dates so that the trace stays auditable.

``now`` reads the module-level ``_clock`` so that tests can replace it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from dateutil import parser as dateutil_parser
from dateutil.relativedelta import relativedelta

from engine.errors import RetryException

DEFAULT_TIMEZONE = "Europe/Paris"
TIMEZONE_EXAMPLES = "Europe/Paris, UTC, America/New_York, Asia/Tokyo, +02:00"
ISO_HINT = "retry with ISO 8601 `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS`"

DateValue = date | datetime


def _utc_now() -> datetime:
    return datetime.now(UTC)


# Replaced in tests; always called at use time so a patch takes effect.
_clock: Callable[[], datetime] = _utc_now


def _current_time() -> datetime:
    """The clock's time, made aware (a naive clock is read as UTC)."""
    current = _clock()
    return current if current.tzinfo else current.replace(tzinfo=UTC)


# --- time zones --------------------------------------------------------------------

_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?", re.IGNORECASE)


@lru_cache(maxsize=1)
def _zone_index() -> dict[str, str]:
    """Lower-case lookups: "europe/paris", "paris" and "new york" all find a key."""
    index: dict[str, str] = {}
    city_keys: dict[str, list[str]] = {}
    for key in available_timezones():
        index[key.lower()] = key
        city = key.rsplit("/", 1)[-1].lower()
        city_keys.setdefault(city, []).append(key)
    for city, keys in city_keys.items():
        # A city shared by several zones would be a guess: only unique ones are aliases.
        if len(keys) == 1:
            index.setdefault(city, keys[0])
    return index


def resolve_timezone(name: str) -> tzinfo:
    """Map a zone name, a city or a UTC offset to a ``tzinfo``."""
    text = str(name).strip()
    if text.upper() in {"UTC", "GMT", "Z"}:
        return UTC
    offset = _OFFSET.fullmatch(text)
    if offset:
        sign, hours, minutes = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes or 0))
        if delta < timedelta(hours=24):
            return timezone(-delta if sign == "-" else delta)
    key = _zone_index().get(text.lower().replace(" ", "_"))
    if key is None:
        raise RetryException(
            f"Unknown timezone {text!r}. Use an IANA name such as {TIMEZONE_EXAMPLES}. "
            'Example: {"timezone": "Europe/Paris"}'
        )
    return ZoneInfo(key)


# --- parsing -------------------------------------------------------------------------

_NUMERIC = re.compile(r"[+-]?\d+(?:\.\d+)?")
_TRAILING_NOTE = re.compile(r"\s*\([^()]*\)\s*$")
_TIME_TAIL = r"(?:[ T,]+(?P<rest>.+))?"
_DAY_FIRST = re.compile(
    r"(?P<day>\d{1,2})[/.-](?P<month>\d{1,2})[/.-](?P<year>\d{4}|\d{2})" + _TIME_TAIL
)
_YEAR_FIRST = re.compile(r"(?P<year>\d{4})[/.](?P<month>\d{1,2})[/.](?P<day>\d{1,2})" + _TIME_TAIL)
_FRENCH_MONTHS = {
    "janvier": "january",
    "janv": "january",
    "fevrier": "february",
    "fevr": "february",
    "fev": "february",
    "mars": "march",
    "avril": "april",
    "avr": "april",
    "mai": "may",
    "juin": "june",
    "juillet": "july",
    "juil": "july",
    "aout": "august",
    "septembre": "september",
    "sept": "september",
    "octobre": "october",
    "novembre": "november",
    "decembre": "december",
}
_FRENCH_MONTH = re.compile(r"\b(" + "|".join(_FRENCH_MONTHS) + r")\b\.?")
_FRENCH_FILLERS = re.compile(
    r"\b(?:lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|le|a|vers|de)\b"
)
_FRENCH_HOUR = re.compile(r"\b(\d{1,2})\s*h\s*(\d{2})?\b")
_RELATIVE_DAYS = {
    "today": 0,
    "aujourd'hui": 0,
    "aujourd’hui": 0,
    "tomorrow": 1,
    "demain": 1,
    "yesterday": -1,
    "hier": -1,
}


def _example(parameter: str) -> str:
    return f'Example: {{"{parameter}": "2025-03-12"}}'


def parse_date_value(value: object, parameter: str = "date") -> DateValue:
    """Read a human or ISO date; ``date`` when no time is given, else ``datetime``."""
    text = str(value).strip() if isinstance(value, str | int | float) else ""
    if not text:
        raise RetryException(
            f"`{parameter}` is empty or not text; {ISO_HINT}. {_example(parameter)}"
        )
    if _NUMERIC.fullmatch(text):
        raise RetryException(
            f"`{parameter}` expects a readable date, not a timestamp (got {text!r}); "
            f"{ISO_HINT}. {_example(parameter)}"
        )
    # Our own outputs end with "(Wednesday)": accept them back unchanged.
    text = _TRAILING_NOTE.sub("", text)
    parsed = _parse_iso(text) or _parse_relative(text) or _parse_numeric(text)
    if parsed is None:
        parsed = _parse_free_text(text, parameter)
    return parsed


def _parse_iso(text: str) -> DateValue | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _parse_relative(text: str) -> DateValue | None:
    offset = _RELATIVE_DAYS.get(text.lower())
    if offset is None:
        return None
    return _current_time().astimezone(resolve_timezone(DEFAULT_TIMEZONE)).date() + timedelta(
        days=offset
    )


def _parse_numeric(text: str) -> DateValue | None:
    """ "12/03/2025" is 12 March: numeric dates are read day first, as in France.

    Only a leading four-digit year ("2025/03/12") switches to year first.
    """
    match = _DAY_FIRST.fullmatch(text) or _YEAR_FIRST.fullmatch(text)
    if match is None:
        return None
    day, month, year = match.group("day"), match.group("month"), match.group("year")
    full_year = int(year) + 2000 if len(year) == 2 else int(year)
    try:
        day_value = date(full_year, int(month), int(day))
    except ValueError:
        raise RetryException(
            f"{text!r} is not a valid date (day {day}, month {month}); {ISO_HINT}."
        ) from None
    rest = match.group("rest")
    if rest is None:
        return day_value
    clock_time = _parse_free_text(rest, "date")
    if not isinstance(clock_time, datetime):
        return day_value
    return datetime.combine(day_value, clock_time.timetz())


def _normalise_french(text: str) -> str:
    """Translate French words dateutil does not know into English ones."""
    lowered = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(char for char in lowered if not unicodedata.combining(char))
    plain = re.sub(r"\b1er\b", "1", plain)
    plain = _FRENCH_HOUR.sub(lambda m: f" {m.group(1)}:{m.group(2) or '00'} ", plain)
    plain = _FRENCH_MONTH.sub(lambda m: f" {_FRENCH_MONTHS[m.group(1)]} ", plain)
    plain = _FRENCH_FILLERS.sub(" ", plain)
    return " ".join(plain.split())


def _parse_free_text(text: str, parameter: str) -> DateValue:
    # A missing year or day is taken from 1 January of the current year.
    default = datetime(_current_time().year, 1, 1)
    try:
        parsed = dateutil_parser.parse(_normalise_french(text), dayfirst=True, default=default)
    except (ValueError, OverflowError):
        raise RetryException(
            f"Could not read {text!r} as a date for `{parameter}`; {ISO_HINT} "
            f"(French forms like 12/03/2025 or 12 mars 2025 also work). {_example(parameter)}"
        ) from None
    if parsed.tzinfo is None and parsed.time() == datetime.min.time():
        return parsed.date()
    return parsed


# --- formatting and arithmetic -----------------------------------------------------------


def format_iso(value: DateValue) -> str:
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return value.isoformat()


def _with_weekday(value: DateValue) -> str:
    return f"{format_iso(value)} ({value.strftime('%A')})"


def _as_int(value: object, parameter: str) -> int:
    """Models sometimes send "3" or 3.0: accept any whole number, refuse the rest."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,7}\s*", value):
        return int(value)
    raise RetryException(
        f"`{parameter}` must be a whole number (negative to go back), got {value!r}. "
        'Example: {"date": "2025-01-31", "months": 1}'
    )


def _comparable(value: DateValue, other: DateValue) -> datetime:
    """Promote dates to midnight and naive times to the other side's zone."""
    if not isinstance(value, datetime):
        value = datetime.combine(value, datetime.min.time())
    other_zone = other.tzinfo if isinstance(other, datetime) else None
    if value.tzinfo is None and other_zone is not None:
        value = value.replace(tzinfo=other_zone)
    return value


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _describe_duration(delta: timedelta) -> str:
    days = abs(delta).days
    seconds = abs(delta).seconds
    parts = [_plural(days, "day")]
    if days >= 7:
        parts.append(f"({_plural(days // 7, 'week')} and {_plural(days % 7, 'day')})")
    if seconds:
        hours, minutes = divmod(seconds // 60, 60)
        parts.append(f"{_plural(hours, 'hour')} {_plural(minutes, 'minute')}")
    return " ".join(parts)


# --- tools -------------------------------------------------------------------------------


def now(timezone: str = DEFAULT_TIMEZONE) -> str:
    """Give today's date and the current time (ISO 8601, with the weekday), in a time zone.

    Only for today and now ("today", "what time is it"); for another date, parse_date.
    `timezone` is an IANA name (default Europe/Paris), a city or an offset like +02:00.
    Example: {"timezone": "Europe/Paris"}
    """
    zone = resolve_timezone(timezone)
    current = _current_time().astimezone(zone).replace(microsecond=0)
    label = getattr(zone, "key", None) or current.tzname() or str(timezone)
    return f"{format_iso(current)} ({current.strftime('%A')}, {label})"


def date_add(date: str, days: int = 0, weeks: int = 0, months: int = 0, years: int = 0) -> str:
    """Add (or, with negative numbers, subtract) days, weeks, months, years to a date.

    Use the unit the question names ("45 jours" is days=45). Month arithmetic stays
    in the month: 2025-01-31 + 1 month = 2025-02-28. Returns the ISO date with its weekday.
    Example: {"date": "2025-01-20", "days": 45}
    Example: {"date": "2025-01-31", "months": 1}
    """
    start = parse_date_value(date, "date")
    step = relativedelta(
        years=_as_int(years, "years"),
        months=_as_int(months, "months"),
        weeks=_as_int(weeks, "weeks"),
        days=_as_int(days, "days"),
    )
    try:
        result: DateValue = start + step
    except (ValueError, OverflowError):
        raise RetryException(
            "The resulting date is out of range (years 1 to 9999); use smaller amounts. "
            'Example: {"date": "2025-01-31", "months": 1}'
        ) from None
    return _with_weekday(result)


def date_diff(start: str, end: str) -> str:
    """Count the days from `start` to `end` (negative if `end` is earlier), also as weeks + days.

    Example: {"start": "2025-01-01", "end": "2025-03-01"}
    """
    first = parse_date_value(start, "start")
    second = parse_date_value(end, "end")
    delta = _comparable(second, first) - _comparable(first, second)
    sign = "-" if delta < timedelta(0) else ""
    summary = f"{sign}{_describe_duration(delta)}"
    order = ", end is before start" if sign else ""
    return f"{summary} from {format_iso(first)} to {format_iso(second)}{order}"


def parse_date(text: str) -> str:
    """Normalise a written date to ISO 8601 with its weekday (the weekday of any date).

    The ISO form is YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SS with a time.

    Understands ISO, French day-first dates (12/03/2025 is 12 March), French or
    English month names ("12 mars 2025", "1er janvier 2025 à 10h30"),
    today / demain / hier. A missing year is the current year.
    Example: {"text": "12 mars 2025"}
    """
    return _with_weekday(parse_date_value(text, "text"))
