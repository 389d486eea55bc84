"""Numbers for people: counts, FLOPs, bytes and durations in units, as every table, message and
progress line of the project writes them.

Bytes are in binary units (KiB, MiB, GiB: memory, files and downloads alike).
"""

from __future__ import annotations

GiB = 1024**3


def as_whole(x: float) -> int | float:
    """``x`` as an ``int`` when it is a whole number (so JSON and the tables write ``2``, not ``2.0``)."""
    return int(x) if float(x).is_integer() else x


def human_count(n: float) -> str:
    """124439808 → '124.4M', 6.74e9 → '6.74B'."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            v = n / div
            return f"{v:.3g}{unit}" if v < 100 else f"{v:.4g}{unit}"
    return f"{n:g}"


def human_flops(n: float) -> str:
    """FLOPs in SI units: 1.35e10 → '13.5 GFLOP'."""
    for div, unit in (
        (1e24, "Y"),
        (1e21, "Z"),
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "K"),
    ):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}FLOP"
    return f"{n:g} FLOP"


def human_bytes(n: float) -> str:
    """Binary units: 2**31 → '2.00 GiB'."""
    for div, unit in ((1024**5, "PiB"), (1024**4, "TiB"), (GiB, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:g} B"


def human_duration(seconds: float) -> str:
    """45 → '45 s', 5400 → '1.5 h', 6.5e8 → '20.6 years'."""
    for div, unit in ((365.25 * 86400, "years"), (86400, "days"), (3600, "h"), (60, "min")):
        if abs(seconds) >= div:
            return f"{seconds / div:,.3g} {unit}" if seconds / div < 1000 else f"{seconds / div:,.0f} {unit}"
    return f"{seconds:.3g} s"


__all__ = ["GiB", "as_whole", "human_bytes", "human_count", "human_duration", "human_flops"]
