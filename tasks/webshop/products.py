"""WebShop's data in its own JSON formats, loaded the way its reference code loads them
(``web_agent_site/engine/engine.py: load_products``, ``goal.py: get_human_goals``):

- the product file (``items_shuffle_1000.json`` / ``items_shuffle.json``): a JSON list of
  scraped products with ``asin``, ``name``, ``full_description``, ``small_description`` (a
  string or a list of bullet points), ``pricing`` (``"$12.99"`` or a ``"$10.99 - $19.99"``
  range, may be empty), ``images``, ``category``, ``query``, ``product_category`` (levels joined
  by `` › ``) and ``customization_options`` (option name -> list of ``{"value", "image"}``);
- the attribute file (``items_ins_v2_1000.json``): ASIN -> ``{"attributes": [...]}``;
- the human instruction file (``items_human_ins.json``): ASIN -> list of ``{"instruction",
  "instruction_attributes", "instruction_options"}``.

A loaded product has WebShop's derived fields (``Title``, ``Description``, ``BulletPoints``,
``Attributes``, ``options``, ``pricing``, ``Price``) and one fixed ``price``: the single price,
or a seeded uniform draw inside a price range, as WebShop draws it once per session server.
A goal is WebShop's goal record (``asin``, ``category``, ``query``, ``name``,
``product_category``, ``instruction_text``, ``attributes``, ``price_upper``, ``goal_options``,
``weight``). Standard library only: this file is copied into the agent's data folder.
"""

from __future__ import annotations

import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

PRICE_STEPS = [10.0 * i for i in range(1, 100)]  # WebShop's candidate price bounds
NO_PRICE_BOUND = 1_000_000.0  # WebShop's bound when no step lies above the price
DEFAULT_PRICE = 100.0  # WebShop's price of a product without pricing
PRODUCT_FIELDS = ("asin", "name", "full_description", "small_description", "category", "query",
                  "product_category", "customization_options")


class DataFormatError(ValueError):
    """A WebShop data file is not in WebShop's format; the message names the file and entry."""


def _parse_pricing(pricing: Any) -> list[float]:
    if not pricing:
        return [DEFAULT_PRICE]
    if isinstance(pricing, list):  # already parsed (a catalog written by this module)
        return [float(p) for p in pricing[:2]]
    values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(pricing).split("$")[1:]
              if re.sub(r"[^\d.]", "", part)]
    return values[:2] or [DEFAULT_PRICE]


def _price_tag(pricing: list[float]) -> str:
    return f"${pricing[0]}" if len(pricing) == 1 else f"${pricing[0]} to ${pricing[1]}"


def _options(raw: dict[str, Any] | None) -> dict[str, list[str]]:
    """Option name (lower-cased) -> values, cleaned as WebShop cleans them."""
    options = {}
    for name, contents in (raw or {}).items():
        if contents is None:
            continue
        options[name.lower()] = [str(c["value"]).strip().replace("/", " | ").lower()
                                 for c in contents]
    return options


def convert_product(raw: dict[str, Any], attributes: dict[str, Any],
                    rng: random.Random) -> dict[str, Any]:
    """One product of WebShop's product file as WebShop's session server sees it."""
    missing = [f for f in PRODUCT_FIELDS if f not in raw]
    if missing:
        raise DataFormatError(f"product {raw.get('asin', '?')!r} lacks {missing}")
    bullets = raw["small_description"]
    pricing = _parse_pricing(raw.get("pricing"))
    asin = raw["asin"]
    return {
        "asin": asin, "name": raw["name"], "category": raw["category"],
        "query": str(raw["query"]).lower().strip(),
        "product_category": raw["product_category"],
        "Title": raw["name"], "Description": raw["full_description"] or "",
        "BulletPoints": list(bullets) if isinstance(bullets, list) else [bullets or ""],
        "pricing": pricing, "Price": _price_tag(pricing),
        "price": pricing[0] if len(pricing) == 1 else rng.uniform(*pricing),
        "options": _options(raw["customization_options"]),
        "Attributes": list(attributes.get(asin, {}).get("attributes") or ["DUMMY_ATTR"]),
        "Rating": "N.A.", "Reviews": [],
    }


def read_json(path: Path, what: str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"WebShop {what} not found: {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{path}: not JSON ({err})") from err


def load_products(product_file: Path, attribute_file: Path, num_products: int | None = None,
                  seed: int = 0) -> list[dict[str, Any]]:
    """WebShop's products (the first ``num_products``), as ``load_products`` keeps them: ASINs
    of at most 10 characters, each once; prices drawn with ``seed``."""
    raw = read_json(product_file, "product file")
    if not isinstance(raw, list):
        raise DataFormatError(f"{product_file}: expected a JSON list of products, "
                              f"got {type(raw).__name__}")
    attributes = read_json(attribute_file, "attribute file")
    if not isinstance(attributes, dict):
        raise DataFormatError(f"{attribute_file}: expected a JSON object ASIN -> attributes")
    rng, seen, products = random.Random(seed), set(), []
    for i, item in enumerate(raw[:num_products] if num_products else raw):
        if not isinstance(item, dict) or "asin" not in item:
            raise DataFormatError(f"{product_file}: entry {i} is not a product with an asin")
        asin = item["asin"]
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(convert_product(item, attributes, rng))
    if not products:
        raise DataFormatError(f"{product_file}: no products")
    return products


def price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    """WebShop's price upper bound for a goal whose product costs ``price``: the larger of two
    of the (up to) four multiples of 10 just above it, and the instruction's price clause."""
    above = [p for p in PRICE_STEPS if p > price][:4]
    if len(above) < 2:
        return NO_PRICE_BOUND, ""
    upper = max(rng.sample(above, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def human_goals(products: list[dict[str, Any]], instructions: dict[str, list[dict[str, Any]]],
                seed: int) -> list[dict[str, Any]]:
    """WebShop's human goals: one per human instruction with at least one attribute, in
    product order, with a price bound drawn with ``seed``."""
    rng, goals = random.Random(seed), []
    for product in products:
        for k, ins in enumerate(instructions.get(product["asin"], [])):
            try:
                attributes, text = ins["instruction_attributes"], ins["instruction"]
            except (KeyError, TypeError) as err:
                raise DataFormatError(f"instruction {k} of {product['asin']} lacks {err}") from err
            if not attributes:
                continue
            upper, clause = price_bound(product["price"], rng)
            goals.append({
                "asin": product["asin"], "category": product["category"],
                "query": product["query"], "name": product["name"],
                "product_category": product["product_category"],
                "instruction_text": text.strip(".") + clause, "attributes": list(attributes),
                "price_upper": upper, "goal_options": list(ins.get("instruction_options") or []),
                "weight": 1})
    return goals


def instruction_without_price(text: str) -> str:
    """The instruction before its price clause (the key of WebShop's goal -> query map)."""
    return text.split(", and price lower than")[0]
