"""The offline WebShop catalog: procedurally generated products and human-style instructions,
written in WebShop's own file formats (``products.py``), so that the offline default and the
real catalog go through one loader, one goal builder and one environment.

WebShop's five categories (beauty, electronics, fashion, food, garden), each with product
types that have a search query, a category path, a title noun, an attribute vocabulary, option
groups and a price range. The catalog is made of *families*: a target product (a brand, 3-4
attributes, 1-2 option groups with some of their values, a price) with one instruction
(2-3 of its attributes, a value of each of its option groups, in one of several human-like
phrasings),
and ``near_misses`` products of the same type that fail that instruction in one way each:

- ``attribute``: one of the wanted attributes is missing (from its attributes and its texts);
- ``option``: a wanted option value is not offered (only when the goal has options);
- ``price``: everything matches but it costs at least 45 dollars more (WebShop's price bound is
  at most the fourth multiple of 10 above the target's price, so it is always over the bound).

A near miss ranks with its target in search, so search alone does not win. Every near miss
is checked with the reward itself: the best purchase of it scores under 1. Families are split
into train and test targets by a seeded shuffle; the goals themselves are drawn by the loader
(``products.human_goals``, WebShop's way), so train and test goals have disjoint target
products and come from disjoint seeds. A twin split's goals (``WebShopTask.twin_split``) are
``fresh`` families of this generator, drawn at grading time and added to the catalog.
"""

from __future__ import annotations

import itertools
import random
import re
import string
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from a2rl.task import text_key

from .products import instruction_without_price
from .reward import fuzzy_match, normalize_color, purchase_reward


@dataclass(frozen=True)
class ProductType:
    category: str
    path: str  # WebShop's product_category: levels joined by " › "
    query: str  # the search query WebShop scraped the product with
    noun: str  # what the product is called in titles and instructions
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]


def _t(category, path, query, noun, attributes, options, price) -> ProductType:
    return ProductType(category, " › ".join(path.split("/")), query, noun,
                       tuple(attributes.split(", ")),
                       {k: tuple(v.split(", ")) for k, v in options.items()}, price)


COLOURS = "black, white, grey, navy, red, green, beige, pink, brown, purple"
SIZES = "small, medium, large, xl, xxl"
SHOE_SIZES = "6, 7, 8, 9, 10, 11, 12"
TYPES = [
    _t("beauty", "Beauty & Personal Care/Hair Care/Shampoo & Conditioner/Shampoos", "shampoo",
       "shampoo", "sulfate free, tea tree, argan oil, dry hair, color safe, cruelty free, "
       "paraben free", {"size": "8 fl oz, 12 fl oz, 16.9 fl oz, 33.8 fl oz",
                        "scent": "lavender, coconut, citrus, unscented, rosemary"}, (6, 38)),
    _t("beauty", "Beauty & Personal Care/Personal Care/Deodorants & Antiperspirants/Deodorants",
       "deodorant", "deodorant stick", "aluminum free, sensitive skin, long lasting, baking "
       "soda free, vegan formula", {"scent": "lavender, coconut, citrus, unscented, vanilla",
                                    "size": "2.6 ounce, pack of 2, pack of 3"}, (5, 24)),
    _t("beauty", "Beauty & Personal Care/Makeup/Lips/Lipstick", "lipstick", "lipstick",
       "matte finish, long wear, hydrating formula, vitamin e, cruelty free",
       {"color": "red, pink, nude, plum, coral, berry"}, (4, 28)),
    _t("beauty", "Beauty & Personal Care/Skin Care/Face/Creams & Moisturizers", "face cream",
       "face moisturizer", "hyaluronic acid, fine lines, oil free, spf 30, fragrance free, "
       "dermatologist tested", {"size": "1.7 ounce, 2.5 ounce, 4 ounce"}, (9, 60)),
    _t("beauty", "Beauty & Personal Care/Hair Care/Hair Extensions", "hair extensions",
       "hair extension", "clip in, natural looking, heat resistant, human hair, easy apply",
       {"color": "black, brown, blonde, auburn, grey", "length": "14 inch, 18 inch, 22 inch"},
       (15, 90)),
    _t("electronics", "Electronics/Headphones/Over-Ear Headphones", "headphones",
       "over ear headphones", "noise cancelling, wireless bluetooth, hands free, fast "
       "charging, foldable design, built in microphone", {"color": COLOURS}, (19, 140)),
    _t("electronics", "Electronics/Cell Phones & Accessories/Cases", "phone case", "phone case",
       "shock absorbing, slim fit, wireless charging, kickstand, tempered glass",
       {"color": COLOURS, "model": "iphone 13, iphone 14, galaxy s22, pixel 7"}, (7, 35)),
    _t("electronics", "Electronics/Accessories & Supplies/Cables/HDMI Cables", "hdmi cable",
       "hdmi cable", "high speed, gold plated, braided nylon, ultra hd, ethernet port",
       {"size": "3 feet, 6 feet, 10 feet, 15 feet"}, (6, 30)),
    _t("electronics", "Electronics/Portable Power/Power Banks", "power bank", "power bank",
       "fast charging, usb c, led display, compact size, dual output",
       {"color": "black, white, blue, pink", "capacity": "10000mah, 20000mah, 26800mah"},
       (15, 70)),
    _t("electronics", "Electronics/Television & Video/TV Mounts", "tv wall mount",
       "tv wall mount", "full motion, heavy duty, easy install, tilt swivel, cable management",
       {"size": "32-55 in, 42-70 in, 55-85 in"}, (20, 120)),
    _t("fashion", "Clothing, Shoes & Jewelry/Men/Shoes/Athletic/Running", "running shoes",
       "running shoes", "rubber sole, arch support, non slip, memory foam, lace up, "
       "breathable mesh", {"size": SHOE_SIZES, "color": COLOURS}, (25, 130)),
    _t("fashion", "Clothing, Shoes & Jewelry/Women/Clothing/Tops, Tees & Blouses/T-Shirts",
       "t-shirt", "t-shirt", "short sleeve, machine wash, cotton spandex, relaxed fit, "
       "crew neck, tagless label", {"size": SIZES, "color": COLOURS}, (8, 35)),
    _t("fashion", "Clothing, Shoes & Jewelry/Women/Clothing/Leggings", "leggings", "leggings",
       "high waist, tummy control, squat proof, hidden pocket, butt lift",
       {"size": SIZES, "color": COLOURS}, (12, 45)),
    _t("fashion", "Clothing, Shoes & Jewelry/Men/Accessories/Wallets", "wallet", "wallet",
       "genuine leather, rfid blocking, slim profile, coin pocket, gift box",
       {"color": "black, brown, navy, tan"}, (10, 60)),
    _t("fashion", "Clothing, Shoes & Jewelry/Women/Jewelry/Necklaces", "necklace", "necklace",
       "sterling silver, hypoallergenic, adjustable chain, gift wrapping, heart pendant",
       {"size": "16 inch, 18 inch, 20 inch"}, (15, 90)),
    _t("food", "Grocery & Gourmet Food/Beverages/Coffee/Ground Coffee", "ground coffee",
       "ground coffee", "usda organic, fair trade, low acid, single origin, non gmo",
       {"flavor name": "dark roast, medium roast, hazelnut, french vanilla, decaf",
        "size": "12 ounce, 2 pound, pack of 4"}, (8, 45)),
    _t("food", "Grocery & Gourmet Food/Snacks/Protein Bars", "protein bars", "protein bars",
       "gluten free, low sugar, keto friendly, plant based, high protein",
       {"flavor name": "chocolate chip, peanut butter, cookie dough, almond, berry",
        "size": "12 count, 24 count"}, (12, 50)),
    _t("food", "Grocery & Gourmet Food/Beverages/Tea/Green Tea", "green tea", "green tea bags",
       "caffeine free, usda organic, non gmo, kosher certified, antioxidant rich",
       {"flavor name": "jasmine, matcha, ginger, lemon, honey", "size": "20 count, 100 count"},
       (5, 30)),
    _t("food", "Grocery & Gourmet Food/Snack Foods/Nuts & Seeds/Almonds", "almonds",
       "roasted almonds", "sea salt, gluten free, resealable bag, non gmo, no preservatives",
       {"size": "16 ounce, 32 ounce, 3 pound"}, (7, 40)),
    _t("food", "Grocery & Gourmet Food/Pantry Staples/Sauces/Hot Sauce", "hot sauce",
       "hot sauce", "sugar free, small batch, extra hot, vegan friendly, glass bottle",
       {"flavor name": "habanero, chipotle, jalapeno, ghost pepper", "size": "5 ounce, 12 "
        "ounce, pack of 3"}, (4, 26)),
    _t("garden", "Home & Kitchen/Furniture/Living Room Furniture/Sofas & Couches",
       "sofas and couches", "sofa couch", "living room, solid wood, easy assembly, "
       "removable cushions, mid century", {"color": COLOURS}, (180, 890)),
    _t("garden", "Home & Kitchen/Home Décor/Window Treatments/Curtains & Drapes", "curtains",
       "blackout curtains", "thermal insulated, machine washable, living room, noise "
       "reducing, grommet top", {"color": COLOURS, "size": "52x63 in, 52x84 in, 52x95 in"},
       (14, 60)),
    _t("garden", "Home & Kitchen/Bedding/Sheets & Pillowcases/Sheet & Pillowcase Sets",
       "bed sheets", "bed sheet set", "deep pocket, wrinkle free, egyptian cotton, cooling "
       "fabric, hotel quality", {"color": COLOURS, "size": "twin, full, queen, king"}, (20, 95)),
    _t("garden", "Tools & Home Improvement/Lighting & Ceiling Fans/Lamps/Desk Lamps",
       "desk lamp", "led desk lamp", "dimmable light, usb charging, eye caring, touch control, "
       "flexible arm", {"color": "black, white, silver, gold"}, (16, 70)),
    _t("garden", "Home & Kitchen/Kitchen & Dining/Storage & Organization/Food Storage",
       "food storage containers", "food storage containers", "bpa free, airtight lids, "
       "dishwasher safe, microwave safe, stackable design",
       {"size": "5 pack, 10 pack, 24 pack"}, (12, 48)),
]

_SYLLABLES = ("ka", "lo", "mi", "ver", "tan", "ro", "zel", "qui", "bry", "fen", "lu", "dor",
              "vo", "nix", "pa", "sol", "ya", "bel", "cor", "thi")
_DESCRIPTORS = ("", "Classic", "Premium", "Original", "Everyday", "Signature", "Essential")
PHRASINGS = ("i'm looking for a {noun} that is {attributes}{options}",
             "i need a {attributes} {noun}{options}",
             "i want to buy a {noun} which is {attributes}{options}",
             "find me a {attributes} {noun}{options}",
             "i am looking for {attributes} {noun}{options}")


def _brand(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).title()


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice(string.ascii_uppercase + string.digits)
                              for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _price(rng: random.Random, lo: float, hi: float) -> float:
    return round(rng.uniform(lo, hi)) + 0.99


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _raw_product(asin: str, kind: ProductType, brand: str, descriptor: str,
                 attributes: list[str], options: dict[str, list[str]], price: float,
                 ) -> dict[str, Any]:
    """A product in WebShop's product-file format (``products.py``)."""
    # every attribute is in the title, so the results page tells a near miss from its target
    title_words = [brand] + [a.title() for a in attributes] + [kind.noun.title()]
    name = " ".join(w for w in title_words + [descriptor] if w)
    bullets = [f"{a.capitalize()}: one of the reasons to choose this {kind.noun}."
               for a in attributes]
    description = (f"The {brand} {kind.noun} is {_join(attributes)}. "
                   f"Sold by {brand}; ships in plain packaging.")
    return {
        "asin": asin, "name": name, "full_description": description,
        "small_description": bullets, "pricing": f"${price:.2f}",
        "images": [f"https://example.invalid/images/{asin}.jpg"],
        "category": kind.category, "query": kind.query, "product_category": kind.path,
        "customization_options": {g: [{"value": v, "image": None} for v in vs]
                                  for g, vs in options.items()},
        "average_rating": "N.A.", "brand": brand,
    }


def _instruction(kind: ProductType, attributes: list[str], options: dict[str, str],
                 rng: random.Random) -> str:
    option_text = ""
    if options:
        option_text = rng.choice([" in " + _join(list(options.values())),
                                  " with " + ", and ".join(f"{g}: {v}"
                                                           for g, v in options.items())])
    text = rng.choice(PHRASINGS).format(noun=kind.noun, attributes=_join(attributes),
                                        options=option_text)
    return re.sub(r"\ba (?=[aeiou])", "an ", text)


def _offered(values: tuple[str, ...], rng: random.Random, must: str | None = None,
             avoid: str | None = None) -> list[str]:
    """Some of a group's values (3 or more where the group has them), with ``must`` and
    without any value that would match ``avoid``."""
    pool = [v for v in values if avoid is None or not fuzzy_match(
        normalize_color(v), normalize_color(avoid))]
    picked = rng.sample(pool, min(len(pool), rng.randint(3, 5)))
    if must and must not in picked:
        picked[0] = must
    return [v for v in values if v in picked]  # in the vocabulary's order


def _view(raw: dict[str, Any], attributes: list[str]) -> dict[str, Any]:
    """What the reward reads of a raw product (without loading it)."""
    return {"name": raw["name"], "query": raw["query"],
            "product_category": raw["product_category"], "Title": raw["name"],
            "Description": raw["full_description"], "BulletPoints": raw["small_description"],
            "Attributes": attributes}


def best_reward(raw: dict[str, Any], attributes: list[str], goal: dict[str, Any]) -> float:
    """The highest reward any purchase of this product can earn for ``goal``: every
    combination of its option values, at its price."""
    view = _view(raw, attributes)
    groups = {g: [c["value"] for c in vs] for g, vs in raw["customization_options"].items()}
    price = float(raw["pricing"].lstrip("$"))
    combos = itertools.product(*groups.values()) if groups else [()]
    return max(purchase_reward(view, goal, price, dict(zip(groups, combo)))[0]
               for combo in combos)


def instruction_key(text: str) -> str:
    """What two instructions are compared by: the text without its price clause (a goal drawn
    for the same product wants the same things whatever its price bound)."""
    return text_key(instruction_without_price(text).strip("."))


def kinds(n_families: int) -> list[ProductType]:
    """The product type of each of a catalog's ``n_families`` families: the types in turn."""
    return [TYPES[k % len(TYPES)] for k in range(n_families)]


class CatalogMaker:
    """Writes the offline catalog; ``make(n_families)`` gives WebShop's three files' contents,
    the targets, each family's ASINs (target first) and a search query per instruction.
    ``taken_asins``: ASINs the made products must not have (a catalog they are added to)."""

    def __init__(self, seed: int, near_misses: int = 3, taken_asins: Iterable[str] = ()):
        self.rng = random.Random(seed)
        self.near_misses = near_misses
        self.asins: set[str] = set(taken_asins)

    def make(self, n_families: int) -> dict[str, Any]:
        return self.families(kinds(n_families))

    def fresh(self, n: int, n_families: int, taken: Collection[str]) -> dict[str, Any]:
        """``n`` more families in ``make``'s format, their types drawn as a split's targets
        are drawn from a catalog of ``n_families``, none whose instruction's key
        (``instruction_key``) is in ``taken``: a twin split's goals."""
        return self.families(self.rng.sample(kinds(n_families), n), taken)

    def families(self, types: list[ProductType], taken: Collection[str] = ()
                 ) -> dict[str, Any]:
        """A family of each of ``types``, in ``make``'s format."""
        products, attributes, instructions, targets, queries, families = [], {}, {}, [], {}, []
        for kind in types:
            family = self._family(kind, taken)
            for raw, attrs in family["products"]:
                products.append(raw)
                attributes[raw["asin"]] = {"attributes": attrs}
            target = family["products"][0][0]["asin"]
            families.append([raw["asin"] for raw, _ in family["products"]])
            instructions[target] = [family["instruction"]]
            targets.append(target)
            queries[instruction_without_price(family["instruction"]["instruction"])] = [
                family["query"]]
        order = list(range(len(products)))
        self.rng.shuffle(order)  # WebShop's product file is shuffled too (items_shuffle)
        return {"products": [products[i] for i in order], "attributes": attributes,
                "instructions": instructions, "targets": targets, "queries": queries,
                "families": families}

    def _family(self, kind: ProductType, taken: Collection[str] = ()) -> dict[str, Any]:
        for _ in range(50):
            family = self._try_family(kind)
            if family is not None and instruction_key(
                    family["instruction"]["instruction"]) not in taken:
                return family
        raise RuntimeError(f"no valid product family for {kind.query!r} in 50 tries: its "
                           "vocabulary makes near misses that still match, or instructions "
                           "already taken")

    def _try_family(self, kind: ProductType) -> dict[str, Any] | None:
        rng = self.rng
        attrs = rng.sample(kind.attributes, rng.randint(3, min(4, len(kind.attributes))))
        groups = rng.sample(sorted(kind.options), rng.randint(1, len(kind.options)))
        options = {g: _offered(kind.options[g], rng) for g in groups}
        price = _price(rng, *kind.price)
        brand, descriptor = _brand(rng), rng.choice(_DESCRIPTORS)
        target = _raw_product(_asin(rng, self.asins), kind, brand, descriptor, attrs,
                              options, price)
        # 2-3 attributes and a value of every option group, so that few products other than
        # the target meet the goal (1 attribute and no option let most of a type win)
        wanted = rng.sample(attrs, rng.randint(2, min(3, len(attrs))))
        chosen = {g: rng.choice(options[g]) for g in groups}
        goal = {"query": kind.query, "product_category": kind.path, "name": target["name"],
                "attributes": wanted, "goal_options": list(chosen.values()),
                "price_upper": price + 40.0}  # the loosest bound WebShop can draw
        if best_reward(target, attrs, goal) < 1.0:
            return None
        products = [(target, attrs)]
        for miss in self._miss_kinds(chosen):
            raw_attrs = list(attrs)
            miss_options = {g: list(vs) for g, vs in options.items()}
            miss_price = price
            if miss == "attribute":
                dropped = rng.choice(wanted)
                others = [a for a in kind.attributes if a not in attrs]
                raw_attrs = [a for a in attrs if a != dropped] + rng.sample(others, 1)
            elif miss == "option":
                group = rng.choice(sorted(chosen))
                miss_options[group] = _offered(kind.options[group], rng, avoid=chosen[group])
            else:
                miss_price = price + 45.0 + rng.randint(0, 30)
            if not all(miss_options.values()):
                return None
            raw = _raw_product(_asin(rng, self.asins), kind, _brand(rng),
                               rng.choice(_DESCRIPTORS), raw_attrs, miss_options, miss_price)
            if best_reward(raw, raw_attrs, {**goal, "price_upper": price + 40.0}) >= 1.0:
                return None
            products.append((raw, raw_attrs))
        text = _instruction(kind, wanted, chosen, rng)
        return {"products": products,
                "instruction": {"asin": target["asin"], "instruction": text,
                                "instruction_attributes": wanted,
                                "instruction_options": list(chosen.values())},
                "query": " ".join(wanted + [kind.noun])}

    def _miss_kinds(self, chosen: dict[str, str]) -> list[str]:
        kinds = ["attribute", "option", "price"] if chosen else ["attribute", "price"]
        return [kinds[i % len(kinds)] for i in range(self.near_misses)]
