"""Parsers of ``spark.trspark.*`` values: each takes the text Spark holds and returns the value, or raises
``ValueError`` (with the reason, when the allowed values of the key do not already say it).

:mod:`trspark.keys` names one of them per key and turns the ``ValueError`` into a
:class:`~trspark.keys.ConfigError` naming the key and what it allows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from trspark import java_uri

POOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
POOL_NAME_RULE = "letters, digits, _, - and . (not first)"


_JAVA_BLANKS = "".join(map(chr, range(0x21)))


def java_trim(raw: str) -> str:
    """``raw`` trimmed as the plugin's JVM trims it (``String.trim``: ASCII blanks and controls only),
    so that a value this check takes is the value the plugin reads."""
    return raw.strip(_JAVA_BLANKS)


def choice(*options: str) -> Callable[[str], str]:
    """A parser of one of ``options``, in any case and spacing; gives it in lower case."""

    def parse(raw: str) -> str:
        value = java_trim(raw).lower()
        if value not in options:
            raise ValueError
        return value

    return parse


def java_number(raw: str) -> str:
    """``raw`` unless the plugin's JVM would not read it as a number: Python takes ``1_0``, other
    scripts' digits (``１０``) and spaces (U+3000), Java does not."""
    text = java_trim(raw)
    if "_" in text or not text.isascii():
        raise ValueError
    return text


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    """A parser of a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); either bound may be None."""

    def parse(raw: str) -> float:
        return _within(float(java_number(raw)), lo, hi, lo_open=lo_open)

    return parse


def _within(value: float, lo: float | None, hi: float | None, *, lo_open: bool) -> float:
    """``value`` when it is finite and in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); else ValueError."""
    if not math.isfinite(value):
        raise ValueError
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise ValueError
    if hi is not None and value > hi:
        raise ValueError
    return value


#: Spark's time suffixes (as in ``spark.network.timeout=120s``) in seconds; a bare number is seconds.
TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_WITH_UNIT = re.compile(r"(.*?)(us|ms|min|s|m|h|d)")
SECONDS_EXAMPLE = "a number, or with a unit: 500ms, 30s, 2min, 1h"


def seconds(lo: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """A parser of a duration in seconds, ``>= lo`` (``> lo`` with ``lo_open``): ``30``, ``0.5``, ``30s``, ``2min``."""

    def parse(raw: str) -> float:
        text = java_number(raw).strip().lower()
        match = _WITH_UNIT.fullmatch(text)
        number, scale = (match.group(1), TIME_UNITS[match.group(2)]) if match else (text, 1.0)
        return _within(float(number) * scale, lo, None, lo_open=lo_open)

    return parse


def integer(lo: int, hi: int) -> Callable[[str], int]:
    """A parser of an integer in ``[lo, hi]``."""

    def parse(raw: str) -> int:
        value = int(java_number(raw))
        if not lo <= value <= hi:
            raise ValueError
        return value

    return parse


def boolean(raw: str) -> bool:
    """``true`` or ``false`` in any case, as Spark reads its own boolean settings."""
    value = raw.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise ValueError


def lifetime_spec(raw: str) -> str:
    """A lifetime spec :func:`cost_model.lifetimes.from_spec` reads (``stable``, ``exponential:mean=600``, ...)."""
    from cost_model.lifetimes import from_spec

    from_spec(raw)  # validates; raises ValueError with the reason
    return raw.strip()


def stripped(raw: str) -> str:
    """Any text, without the spaces around it."""
    return java_trim(raw)


def filesystem_url(raw: str) -> str:
    """A URL with a scheme and a path (``file:///mnt/b``, ``s3a://bucket/p``), or empty (= the default); as the plugin checks it."""
    text = java_trim(raw)
    if text:
        uri = java_uri.parse(text)
        if uri.scheme is None or uri.path is None:
            raise ValueError("a URL with a scheme and a path, e.g. file:///mnt/backups")
    return text


def pool_name(raw: str) -> str:
    """A pool name (:func:`is_pool_name`)."""
    text = java_trim(raw)
    if not is_pool_name(text):
        raise ValueError
    return text


def is_pool_name(name: str) -> bool:
    """Letters, digits, ``_``, ``-`` and ``.``, not first: a pool name is part of a key and of a folder name."""
    return bool(name) and set(name) <= POOL_NAME_CHARS and not name.startswith(".")


def bytes_per_second(raw: str) -> float:
    """Bytes/s >= 0 from ``"100m"``, ``"1.5g"``, ``"400000000"`` (k/m/g = 10^3/10^6/10^9 bytes/s); finite."""
    text = java_number(raw).strip().lower().removesuffix("b/s").removesuffix("/s")
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}.get(text[-1:], 1.0)
    value = float(text[:-1] if scale != 1.0 else text) * scale
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError
    return value


def parse_bandwidth(raw: str) -> float:
    """Bytes/s >= 1 from ``"100m"``, ``"1.5g"``, ``"400000000"`` (k/m/g = 10^3/10^6/10^9 bytes/s).

    Below a byte a second no network moves data, and a copy's time in the cost model would
    overflow to infinity.
    """
    value = bytes_per_second(raw)
    if not value >= 1.0:
        raise ValueError
    return value


def rate_or_zero(raw: str) -> float:
    """Like :func:`parse_bandwidth` but 0 (= unlimited, or not known) is allowed."""
    return bytes_per_second(raw)


def open_fraction(raw: str) -> float:
    """A number strictly between 0 and 1."""
    value = float(java_number(raw))
    if not 0.0 < value < 1.0:
        raise ValueError
    return value


def http_url(raw: str) -> str:
    """An ``http(s)://host[:port]`` base URL without a trailing slash, or empty (= the default).

    The port is checked as the executors read it, ``{executorId}`` as ``0``: a port out of range
    would otherwise fail every poll of every executor, with no notice ever seen.
    """
    text = java_trim(raw).rstrip("/")
    if text:
        uri = java_uri.parse(text.replace("{executorId}", "0"))
        if uri.scheme not in ("http", "https"):
            raise ValueError(f"the scheme is {uri.scheme!r} (lower case http or https)")
        if uri.host is None:
            raise ValueError("no host name, IPv4 or [IPv6] address (a host name has letters, digits and '-' only)")
        if uri.port > 65535:
            raise ValueError(f"port {uri.port} is above 65535")
    return text


#: Linux signals (executors run Linux JVMs) an executor can take as a notice, named as the JVM
#: names them. The rest kill or stop the JVM, or the JVM needs them itself; the list does not
#: depend on the driver's OS.
SIGNALS = ("ALRM", "CONT", "HUP", "INT", "IO", "PIPE", "POLL", "PROF", "PWR", "STKFLT", "TERM", "TSTP", "TTIN",
           "TTOU", "URG", "USR1", "USR2", "VTALRM", "WINCH", "XCPU", "XFSZ")


def signal_name(raw: str) -> str:
    """A POSIX signal name as the JVM spells it (``PWR`` for ``SIGPWR``), or ``none``."""
    text = java_trim(raw).upper().removeprefix("SIG")
    if text == "NONE":
        return "none"
    if text not in SIGNALS:
        raise ValueError
    return text
