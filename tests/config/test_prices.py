"""Every driver's prices say what a million tokens cost and where and when that was read; a
driver that charges nothing says so. A missing field fails naming the driver and the field."""

from __future__ import annotations

import datetime
import re

import pytest
import yaml

from a2rl.config.compose import compose, conf_dir
from a2rl.config.prices import RATES, WHERE_FROM, PricesConfig
from a2rl.config.types import ConfigError, DriverConfig

DRIVERS = sorted(p.stem for p in (conf_dir() / "driver").glob("*.yaml"))
# providers whose calls are billed: their drivers must be priced, never free
BILLED = ("anthropic", "openai", "gemini")
PRICED = {"input_per_mtok": 2.5, "cached_input_per_mtok": 0.25, "output_per_mtok": 15.0,
          "as_of": "2026-11-30", "source": "https://platform.openai.com/docs/pricing"}


def test_there_are_drivers_to_check():
    assert {"replay", "none", "gpt_4o", "claude_opus_4_6"} <= set(DRIVERS)


@pytest.mark.parametrize("name", DRIVERS)
def test_every_driver_file_declares_its_prices(name):
    raw = yaml.safe_load((conf_dir() / "driver" / f"{name}.yaml").read_text())
    assert "prices" in raw, f"conf/driver/{name}.yaml has no prices: (nor free: true)"
    driver = compose([f"driver={name}"]).driver
    prices = driver.prices
    if prices.free:
        assert driver.provider not in BILLED, f"{name}: a billed provider cannot be free"
        assert prices.rates() == (0.0, 0.0, 0.0)
        return
    for key in RATES:
        assert getattr(prices, key) >= 0, (name, key)
    assert datetime.date.fromisoformat(prices.as_of) <= datetime.date.today()
    assert prices.source.startswith("https://")
    assert prices.rates() == (prices.input_per_mtok, prices.cached_input_per_mtok,
                              prices.output_per_mtok)


@pytest.mark.parametrize("missing", [*RATES, *WHERE_FROM])
def test_a_priced_driver_lacking_a_field_fails_naming_driver_and_field(missing):
    with pytest.raises(ConfigError) as err:
        compose(["driver=gpt_4o", f"driver.prices.{missing}=null"])
    assert "driver 'gpt_4o'" in str(err.value)
    assert f"lacks {missing}" in str(err.value)


def test_a_driver_without_prices_fails_rather_than_costing_nothing():
    with pytest.raises(ConfigError, match=r"driver 'hosted': prices lacks input_per_mtok, "
                                          r"cached_input_per_mtok, output_per_mtok, as_of, "
                                          r"source"):
        DriverConfig(name="hosted", provider="openai_compatible", model="m",
                     base_url="https://llm.example/v1")


def test_free_takes_no_prices():
    with pytest.raises(ConfigError, match="driver 'replay': prices.free is true, so it takes "
                                          "no input_per_mtok"):
        compose(["driver=replay", "++driver.prices.input_per_mtok=1.0"])


def test_a_hosted_openai_compatible_endpoint_is_priced_by_override():
    overrides = ["driver=openai_compatible", "driver.prices.free=false",
                 *(f"++driver.prices.{k}={v}" for k, v in PRICED.items())]
    prices = compose(overrides).driver.prices
    assert prices.rates() == (2.5, 0.25, 15.0)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("cached_input_per_mtok", -1.0, "prices.cached_input_per_mtok=-1.0; expected >= 0"),
    ("as_of", "30/11/2026", "prices.as_of='30/11/2026'; expected a date YYYY-MM-DD"),
    ("source", "openai.com/api/pricing", "expected the provider's https:// page"),
])
def test_bad_price_values_fail_naming_the_field(field, value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        PricesConfig(**{**PRICED, field: value})
