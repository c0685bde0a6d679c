"""WebShop's reward for a purchase (Yao et al. 2022, section 3.1; the reference code's
``web_agent_site/engine/goal.py``), re-implemented from the paper's formula:

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price])
                 / (|U_att| + |U_opt| + 1)

- attributes: a goal attribute matches when a product attribute fuzzy-matches it
  (``thefuzz.fuzz.token_set_ratio`` > 85), or else when it appears in the product's title,
  features (bullet points) or description;
- options: each goal option matches when one of the chosen option values fuzzy-matches it
  (> 85) after both are reduced to their first known colour name (``normalize_color``); a
  synthetic goal's options (a dict) are its (name, value) pairs, as the reference code passes
  them (``wanted_options``);
- price: the price paid is at most the goal's upper bound;
- r_type: 1, or 0.5 when neither the search query, nor two levels of the product category,
  nor more than 20 % of the goal title's nouns match; 0.1 when under 10 % of the nouns match;
  0 when none does. The share is the distinct nouns both titles have over the goal title's
  nouns counted with their repeats, as in the reference code.

Title nouns are what spaCy's ``en_core_web_sm`` tags NOUN or PROPN, as in the reference code,
when that model is installed; the set-up does not install it (Explosion does not publish it on
PyPI), so by default the nouns are approximated by the title's content words (alphabetic words
that are no English stop word), which keeps adjectives, verbs and some prepositions and splits
words differently. ``title_tagger`` says which is in use and ``title_tagger_deviation`` what
the results must say about it. Only the standard library, ``thefuzz`` and (optionally) spaCy
are needed: this file is copied into the agent's data folder with the environment.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from thefuzz import fuzz

FUZZY_MATCH = 85  # a fuzzy match needs a token-set ratio above this (0-100)

# WebShop's colour names, in its order (alphabetical): an option value is reduced to the first
# of these it contains, so "navy blue" and "light blue" both become "blue"
COLOURS = tuple("""
alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown
burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee
cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso fuchsia gold
granite grape graphite grass gray green grey heather indigo ivory ivy khaki lavender lemon
leopard light lilac lime magenta maroon mauve merlot midnight mint mocha multicolor mushroom
mustard natural navy nude olive orange peach pewter pink plum purple rainbow red rose royal rust
sand sapphire seashell silver skull slate steel stone stonewash sunflower tan taupe teal tiger
turquoise violet walnut wheat white wine yellow""".split())

# stand-in stop words for the noun approximation (closed-class English words)
_STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves per via w x""".split())


def normalize_color(value: str) -> str:
    """The first WebShop colour name contained in ``value``, else ``value`` unchanged."""
    return next((c for c in COLOURS if c in value), value)


def fuzzy_match(a: str, b: str) -> bool:
    """WebShop's fuzzy equality: token-set ratio above 85 (thefuzz lower-cases, drops
    punctuation and rounds the ratio to an integer first)."""
    return fuzz.token_set_ratio(a, b) > FUZZY_MATCH


@lru_cache(maxsize=1)
def _spacy_tagger():
    import importlib.util

    if importlib.util.find_spec("en_core_web_sm") is None:  # spaCy's import alone takes seconds
        return None
    import spacy

    return spacy.load("en_core_web_sm", disable=["parser", "ner", "lemmatizer"])


def title_tagger() -> str:
    """Which noun finder ``title_nouns`` uses: ``spacy:en_core_web_sm`` (the reference code's)
    or ``content-words`` (the offline approximation)."""
    return "spacy:en_core_web_sm" if _spacy_tagger() is not None else "content-words"


def title_tagger_deviation() -> str | None:
    """How the title nouns in use depart from the reference code's, for every result and
    manifest to say (None with spaCy's model); tasks/webshop/README.md gives the measured size."""
    if _spacy_tagger() is not None:
        return None
    return ("title nouns are content words (no stop word), not spaCy en_core_web_sm's NOUN/"
            "PROPN tags: r_type can differ (where measured, only for products of another type "
            "than the goal's)")


def content_words(title: str) -> tuple[str, ...]:
    """The offline stand-in for a title's nouns: its lower-cased alphabetic words that are no
    English stop word, in order, repeats kept."""
    words = re.findall(r"[a-z][a-z'-]*", title.lower())
    return tuple(w for w in words if w not in _STOP_WORDS and len(w) > 1)


@lru_cache(maxsize=100_000)
def title_nouns(title: str) -> tuple[str, ...]:
    """The lower-cased nouns and proper nouns of a product title (see the module docstring),
    in title order with repeats kept: the reference code divides by their count."""
    nlp = _spacy_tagger()
    if nlp is None:
        return content_words(title)
    return tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("NOUN", "PROPN"))


def title_score(product_name: str, goal_name: str) -> float:
    """The share of the goal title's nouns that the product title has: distinct shared nouns
    over the goal's noun count, repeats included (the reference code's set intersection over
    its noun list, so a goal title that repeats a noun needs more shared nouns); 0.2 when the
    goal title has no noun."""
    wanted = title_nouns(goal_name)
    if not wanted:
        return 0.2
    return len(set(title_nouns(product_name)) & set(wanted)) / len(wanted)


def _category_levels(path: str) -> set[str]:
    return {level.strip() for level in path.split("›")}


def type_reward(product: dict[str, Any], goal: dict[str, Any]) -> dict[str, Any]:
    """r_type and what decided it: the product's search query, category path and title against
    the goal product's."""
    query_match = product["query"] == goal["query"]
    category_match = len(_category_levels(product["product_category"])
                         & _category_levels(goal["product_category"])) >= 2
    score = title_score(product["name"], goal["name"])
    r_type = 1.0 if (query_match or category_match or score > 0.2) else 0.5
    if score < 0.1:
        r_type = 0.1
    if score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": score}


def attribute_matches(product: dict[str, Any], goal_attributes: list[str]) -> int:
    """How many goal attributes the product has (a fuzzy-matching attribute, or the attribute's
    text in its title, features or description)."""
    texts = (product["Title"].lower(), " ".join(product["BulletPoints"]).lower(),
             product["Description"].lower())
    return sum(
        any(fuzzy_match(have, wanted) for have in product["Attributes"])
        or any(wanted in text for text in texts)
        for wanted in goal_attributes)


def _pair_option(name: str, value: str) -> str:
    """A synthetic goal's option as the reference code compares it: it passes the (name,
    value) pair itself, so its colour normalisation asks whether a colour name *is* the name
    or the value (tuple membership, not a substring), and thefuzz reads the pair's text, the
    name's words together with the value's."""
    return next((c for c in COLOURS if c in (name, value)), str((name, value)))


def wanted_options(goal_options: list[str] | dict[str, str]) -> list[str]:
    """A goal's options as the reward matches them: a list's values (human goals) reduced to
    their first colour name; a dict's (name, value) pairs (synthetic goals, ``_pair_option``)."""
    if isinstance(goal_options, dict):
        return [_pair_option(name, value) for name, value in goal_options.items()]
    return [normalize_color(value) for value in goal_options]


def option_matches(chosen: list[str], goal_options: list[str] | dict[str, str]) -> int:
    """How many goal options one of the chosen option values matches (``wanted_options``;
    the chosen values reduced to their first colour name)."""
    chosen = [normalize_color(o) for o in chosen]
    return sum(any(fuzzy_match(c, wanted) for c in chosen)
               for wanted in wanted_options(goal_options))


def goal_option_values(goal: dict[str, Any]) -> list[str]:
    """A goal's option values, the ones to pick (human goals store a list; a dict of
    name -> value, the synthetic goals' form, gives its values)."""
    options = goal.get("goal_options") or []
    return list(options.values()) if isinstance(options, dict) else list(options)


def purchase_reward(product: dict[str, Any], goal: dict[str, Any], price: float,
                    options: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """The reward of buying ``product`` at ``price`` with ``options`` (option name -> chosen
    value) for ``goal``, and its parts."""
    goal_options = goal.get("goal_options") or []
    attributes = list(goal["attributes"])
    kind = type_reward(product, goal)
    n_att = attribute_matches(product, attributes)
    n_opt = option_matches(list(options.values()), goal_options)
    price_ok = price <= goal["price_upper"]
    total = len(attributes) + len(goal_options) + 1
    reward = kind["r_type"] * (n_att + n_opt + int(price_ok)) / total
    info = {**kind, "r_att": n_att / len(attributes) if attributes else None,
            "r_option": n_opt / len(goal_options) if goal_options else None,
            "r_price": price_ok, "w_att": len(attributes) / total,
            "w_option": len(goal_options) / total, "w_price": 1 / total}
    return reward, info
