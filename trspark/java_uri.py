"""What ``java.net.URI(String)`` makes of a URL, for the settings the plugin's JVM parses with it.

Written by hand because no Python library parses as the JDK does: ``urllib.parse`` takes spaces,
braces, bad ``%`` escapes and host names with ``_``, which ``java.net.URI`` refuses or reads as a
registry authority with no host. A value this module takes is one the plugin takes, so the check
before Spark starts and the plugin agree. It follows the JDK's RFC 2396 parser
(``java.net.URI.Parser``) in what decides acceptance and the parts the plugin reads: scheme, host,
port and path.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import NamedTuple

_ALPHANUM = "a-zA-Z0-9"
# The JDK takes any non-ASCII character that is no space or control (its "other" class) where these are taken.
_OTHER = "\u0080-\U0010ffff"
_UNRESERVED = _ALPHANUM + r"\-_.!~*'()" + _OTHER
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+\-.]*")
_USERINFO = re.compile(rf"(?:[{_UNRESERVED};:&=+$,]|%[0-9a-fA-F]{{2}})*")
_REG_NAME = re.compile(rf"(?:[{_UNRESERVED}$,;:@&=+]|%[0-9a-fA-F]{{2}})+")
_IPV4 = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")  # and each number <= 255 (_is_ipv4); leading zeros are taken
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?"
# A host name of several labels has a last label that starts with a letter (RFC 2396 toplabel).
_HOSTNAME = re.compile(rf"{_LABEL}|(?:{_LABEL}\.)+[a-zA-Z](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?\.?|{_LABEL}\.")
#: ASCII characters that appear nowhere in a URI unescaped (besides controls and space).
_NEVER = frozenset('"<>\\^`{|}')


class JavaUri(NamedTuple):
    """The parts of a URL the plugin reads; None where ``java.net.URI`` gives null (port: -1 when absent)."""

    scheme: str | None
    host: str | None
    port: int
    path: str | None


def parse(text: str) -> JavaUri:
    """``text`` parsed as ``new java.net.URI(text)`` parses it; ``ValueError`` (saying why) where that throws."""
    _check_characters(text)
    rest, has_fragment, _fragment = text.partition("#")
    scheme = None
    if (colon := _scheme_end(rest)) is not None:
        scheme = rest[:colon]
        if not _SCHEME.fullmatch(scheme):
            raise ValueError(f"{scheme!r} is not a scheme name")
        rest = rest[colon + 1:]
        if not rest.startswith("/"):
            if not rest:
                raise ValueError(f"nothing follows {scheme + ':'!r}")
            return JavaUri(scheme, None, -1, None)  # opaque, like mailto:x: no path
    host, port = None, -1
    if rest.startswith("//"):
        end = next((i for i, ch in enumerate(rest[2:], 2) if ch in "/?"), len(rest))
        authority, rest = rest[2:end], rest[end:]
        if not authority and not rest and not has_fragment:
            raise ValueError("the authority (host) is missing")
        host, port = _server(authority) if authority else (None, -1)
    path = rest.partition("?")[0]
    if "[" in path or "]" in path:
        raise ValueError("'[' and ']' are only allowed around an IPv6 host, in a query or a fragment")
    return JavaUri(scheme, host, port, path)


def _check_characters(text: str) -> None:
    if text.count("#") > 1:
        raise ValueError("'#' may appear once")
    # An IPv6 host's zone follows a '%' of its own ([fe80::1%eth0]); _is_ipv6 checks it.
    bracket = re.match(r"[^/?#]*//[^/?#\[]*(\[[^\]/?#]*\])", text)
    ipv6_host = bracket.span(1) if bracket else (-1, -1)
    for at, ch in enumerate(text):
        if ch in _NEVER or ch == " " or (ord(ch) < 0x80 and not ch.isprintable()) or \
                (ord(ch) >= 0x80 and unicodedata.category(ch) in ("Zs", "Zl", "Zp", "Cc")):
            escaped = "".join(f"%{byte:02X}" for byte in ch.encode())
            raise ValueError(f"{ch!r} at index {at} is not allowed in a URL (escape it as {escaped})")
        if ch == "%" and not re.fullmatch(r"[0-9a-fA-F]{2}", text[at + 1:at + 3]) and not ipv6_host[0] < at < ipv6_host[1]:
            raise ValueError(f"'%' at index {at} does not start an escape %XX")


def _scheme_end(text: str) -> int | None:
    """Where the scheme's ``:`` is: a ``:`` before any ``/``, ``?`` or ``#``."""
    match = re.match(r"[^/?#:]*:", text)
    if match is None:
        return None
    if match.end() == 1:
        raise ValueError("the scheme name is empty")
    return match.end() - 1


def _server(authority: str) -> tuple[str | None, int]:
    """``(host, port)`` of a server authority ``[userinfo@]host[:port]``; ``(None, -1)`` for a registry one."""
    userinfo, at, hostport = authority.rpartition("@")
    if at and not _USERINFO.fullmatch(userinfo):
        return _registry(authority)
    host, colon, port_text = hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    if not colon:
        host, port_text = hostport, ""
    if host.startswith("["):
        if not _is_ipv6(host):
            raise ValueError(f"{host!r} is not an IPv6 address")
    elif "[" in host or "]" in host:
        raise ValueError(f"{host!r}: '[' and ']' are only allowed around an IPv6 host")
    elif not (_is_ipv4(host) or _HOSTNAME.fullmatch(host)):
        return _registry(authority)
    if port_text and not (port_text.isascii() and port_text.isdigit()):
        return _registry(authority)
    port = int(port_text) if port_text else -1
    if port > 2**31 - 1:  # the JDK's Integer.parseInt fails: a registry authority
        return _registry(authority)
    return host, port


def _is_ipv6(host: str) -> bool:
    """``[address]`` or ``[address%zone]``, an IPv6 address as the JDK reads it (``ipaddress`` parses the same forms)."""
    inner = host[1:-1] if host.endswith("]") else ""
    address, _, zone = inner.partition("%")
    if not address.isascii() or ("%" in inner and not re.fullmatch(r"(?:[a-zA-Z0-9_.]|%[0-9a-fA-F]{2})+", zone)):
        return False
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def _is_ipv4(host: str) -> bool:
    return bool(_IPV4.fullmatch(host)) and all(int(part) <= 255 for part in host.split("."))


def _registry(authority: str) -> tuple[None, int]:
    if not _REG_NAME.fullmatch(authority):
        raise ValueError(f"{authority!r} is neither a host[:port] nor a registry name")
    return None, -1
