"""What a driver's LLM costs (``driver.prices``, conf/driver/*.yaml): USD per million input,
cached-input and output tokens, with the date they were read and the provider page they were
read from, so that a reported cost can be checked against its source. A scripted or local server
that charges nothing says so (``free: true``) instead of leaving the prices out.

The recording proxy (a2rl.llm.proxy) and the API judges price every call from ``rates()``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import NamedTuple, Optional

from a2rl.config.checks import require

RATES = ("input_per_mtok", "cached_input_per_mtok", "output_per_mtok")
WHERE_FROM = ("as_of", "source")


class Rates(NamedTuple):
    """USD per million tokens, as the proxy charges them."""

    input: float
    cached_input: float
    output: float


@dataclass
class PricesConfig:
    """A driver's prices per million tokens and where they were read (all five), or
    ``free: true`` for a server that charges nothing (replay, a local vLLM)."""

    free: bool = False
    """The server charges nothing (a scripted replay server, a local model server): every call costs
    0 and no price, date or source is given."""
    input_per_mtok: Optional[float] = None
    """USD per million input tokens (not read from a prompt cache)."""
    cached_input_per_mtok: Optional[float] = None
    """USD per million input tokens read from a prompt cache; a provider without a cache discount
    gives its input price."""
    output_per_mtok: Optional[float] = None
    """USD per million output tokens."""
    as_of: Optional[str] = None
    """The date (YYYY-MM-DD) the prices were read from ``source``."""
    source: Optional[str] = None
    """The provider's pricing page the prices were read from (an https URL)."""

    def __post_init__(self) -> None:
        for key in RATES:
            value = getattr(self, key)
            require(value is None or value >= 0, f"prices.{key}={value}; expected >= 0")
        require(self.as_of is None or _is_date(self.as_of),
                f"prices.as_of={self.as_of!r}; expected a date YYYY-MM-DD")
        require(self.source is None or str(self.source).startswith("https://"),
                f"prices.source={self.source!r}; expected the provider's https:// page")

    def check_for(self, driver: str) -> None:
        """The prices a priced driver needs are all there, or ``free`` and none of them; the
        error names the driver and every missing (or contradicting) field."""
        given = [key for key in (*RATES, *WHERE_FROM) if getattr(self, key) is not None]
        if self.free:
            require(not given, f"driver {driver!r}: prices.free is true, so it takes no "
                               f"{', '.join(given)}; set free: false to price its calls")
            return
        missing = [key for key in (*RATES, *WHERE_FROM) if getattr(self, key) is None]
        require(not missing, f"driver {driver!r}: prices lacks {', '.join(missing)}; give "
                             f"{', '.join(RATES)} (USD per million tokens), as_of (the date "
                             f"read) and source (the provider's pricing page), or free: true "
                             f"for a server that charges nothing")

    def rates(self) -> Rates:
        """What a call costs per million tokens (0 when free)."""
        if self.free:
            return Rates(0.0, 0.0, 0.0)
        return Rates(*(float(getattr(self, key) or 0.0) for key in RATES))


def _is_date(value: object) -> bool:
    try:
        datetime.date.fromisoformat(str(value))
    except ValueError:
        return False
    return True
