"""WebShop's reward against cases worked by hand from the paper's formula

    r = r_type * (|attributes met| + |options met| + [price <= bound]) / (|U_att| + |U_opt| + 1)

(Yao et al. 2022, section 3.1), and its fuzzy parts (thefuzz token-set ratio > 85, colours
reduced to their first colour name)."""

from __future__ import annotations

import pytest
from a2rl_tasks.webshop.reward import (
    attribute_matches,
    normalize_color,
    option_matches,
    purchase_reward,
    title_nouns,
    type_reward,
)

SOFA_PATH = "Home & Kitchen › Furniture › Living Room Furniture › Sofas & Couches"
GOAL = {"query": "sofas and couches", "product_category": SOFA_PATH,
        "name": "Nolany Linen Sofa Couch Bench", "attributes": ["wood frame", "living room"],
        "goal_options": ["grey"], "price_upper": 490.0}


def product(**changes) -> dict:
    base = {"query": "sofas and couches", "product_category": SOFA_PATH,
            "name": "Nolany Linen Sofa Couch Bench", "Title": "Nolany Linen Sofa Couch Bench",
            "Attributes": ["wood frame", "living room"], "BulletPoints": ["Deep seat"],
            "Description": "A sofa."}
    base.update(changes)
    base["Title"] = changes.get("Title", base["name"])
    return base


def test_full_match_is_one():
    reward, info = purchase_reward(product(), GOAL, 429.99, {"color": "grey"})
    assert reward == 1.0  # (2 + 1 + 1) / (2 + 1 + 1)
    assert info["r_type"] == 1.0 and info["r_att"] == 1.0 and info["r_option"] == 1.0
    assert info["r_price"] is True and info["w_att"] == pytest.approx(0.5)


def test_wrong_option_loses_its_share():
    reward, info = purchase_reward(product(), GOAL, 429.99, {"color": "beige"})
    assert reward == pytest.approx(3 / 4)  # (2 + 0 + 1) / 4
    assert info["r_option"] == 0.0
    assert purchase_reward(product(), GOAL, 429.99, {})[0] == pytest.approx(3 / 4)


def test_price_over_the_bound_loses_its_share():
    reward, info = purchase_reward(product(), GOAL, 499.0, {"color": "grey"})
    assert reward == pytest.approx(3 / 4)  # (2 + 1 + 0) / 4
    assert info["r_price"] is False
    assert purchase_reward(product(), GOAL, 490.0, {"color": "grey"})[0] == 1.0  # <= bound


def test_missing_attribute_and_attribute_found_in_the_texts():
    lacking = product(Attributes=["living room"])
    assert purchase_reward(lacking, GOAL, 10.0, {"color": "grey"})[0] == pytest.approx(3 / 4)
    in_text = product(Attributes=["deep seat"], Description="Solid wood frame, living room size")
    assert attribute_matches(in_text, GOAL["attributes"]) == 2
    fuzzy = product(Attributes=["wood frames", "livingroom"])  # token-set ratio 90 and 95
    assert attribute_matches(fuzzy, GOAL["attributes"]) == 2


def test_wrong_product_type():
    # another query and category, one of the goal title's five nouns: r_type 0.5
    towels = product(query="kitchen towels", name="Linen Kitchen Towels",
                     product_category="Home & Kitchen › Kitchen & Dining › Towels",
                     Attributes=[], BulletPoints=[], Description="")
    kind = type_reward(towels, GOAL)
    assert (kind["query_match"], kind["category_match"]) == (False, False)
    assert kind["title_score"] == pytest.approx(1 / 5) and kind["r_type"] == 0.5
    assert purchase_reward(towels, GOAL, 20.0, {})[0] == pytest.approx(0.5 * 1 / 4)
    # no noun in common: r_type 0, whatever else matches
    tweezers = product(query="tweezers", name="Stainless Steel Tweezers",
                       product_category="Beauty › Tools › Tweezers")
    assert type_reward(tweezers, GOAL)["r_type"] == 0.0
    assert purchase_reward(tweezers, GOAL, 20.0, {"color": "grey"})[0] == 0.0
    # the same query alone keeps r_type 1 when the title shares enough nouns
    cousin = product(name="Linen Sofa Futon", product_category="Furniture › Futons")
    assert type_reward(cousin, GOAL)["r_type"] == 1.0


def test_category_match_needs_two_shared_levels():
    goal = {**GOAL, "product_category": "a › b › c"}
    for path, expected in (("b › c › a", True), ("a › d › b", True), ("a › a › d", False),
                           ("d › e › f", False)):
        assert type_reward(product(product_category=path), goal)["category_match"] is expected


def test_goal_without_attributes():
    goal = {**GOAL, "attributes": []}
    reward, info = purchase_reward(product(Attributes=[]), goal, 100.0, {"color": "grey"})
    assert reward == 1.0 and info["r_att"] is None  # (0 + 1 + 1) / (0 + 1 + 1)
    assert purchase_reward(product(), goal, 100.0, {"color": "navy"})[0] == pytest.approx(1 / 2)
    no_options = {**goal, "goal_options": []}
    assert purchase_reward(product(), no_options, 100.0, {})[0] == 1.0  # price alone: 1 / 1
    assert purchase_reward(product(), no_options, 900.0, {})[0] == 0.0


def test_options_are_fuzzy_and_colours_normalized():
    assert normalize_color("navy blue") == normalize_color("light blue") == "blue"
    assert normalize_color("rose gold") == "gold"  # the first colour name in WebShop's order
    assert normalize_color("16 fl oz") == "16 fl oz"
    assert option_matches(["pack of 12", "grey", "xl"], ["grey", "xl", "pack of 12"]) == 3
    assert option_matches(["pack of 12", "blue", "xl"], ["grey", "xl", "pack of 12"]) == 2
    assert option_matches(["powder snow"], ["cool powder snow"]) == 1  # a token subset
    assert option_matches(["light blue"], ["navy blue"]) == 1  # both "blue" (WebShop's quirk)
    assert option_matches(["medium"], ["large"]) == 0
    assert option_matches(["goal 1"], []) == 0


def test_dict_goal_options_count_each_name_value_pair():
    goal = {**GOAL, "goal_options": {"color": "grey", "size": "large"}}
    reward = purchase_reward(product(), goal, 10.0, {"color": "grey", "size": "large"})[0]
    assert reward == 1.0


def test_dict_goal_options_are_matched_as_name_value_pairs():
    """A synthetic goal's options (a dict) are matched as the reference code passes them, as
    (name, value) pairs: the name's words join the value's in the fuzzy match, and a pair is
    reduced to a colour only when its name or value is exactly one."""
    assert option_matches(["12 pack"], ["12"]) == 1  # the value alone: a token subset
    assert option_matches(["12 pack"], {"size": "12"}) == 0  # "size 12" against "12 pack"
    assert option_matches(["navy blue"], {"color": "navy blue"}) == 1  # "blue" in its words
    assert option_matches(["seashell"], ["seashell"]) == 1  # both reduced to "ash"
    assert option_matches(["seashell"], {"color": "seashell"}) == 0  # "ash" against "seashell"
    goal = {**GOAL, "goal_options": {"size": "12"}}
    reward = purchase_reward(product(), goal, 10.0, {"size": "12 pack"})[0]
    assert reward == pytest.approx(3 / 4)  # (2 + 0 + 1) / (2 + 1 + 1)


def test_title_nouns_skip_closed_class_words():
    nouns = title_nouns("The Sofa for a Living Room, with 3 Seats")
    assert {"sofa", "living", "room", "seats"} <= set(nouns)
    assert not {"the", "for", "a", "with", "3"} & set(nouns)


def test_a_goal_title_that_repeats_a_noun_counts_every_repeat():
    """The title score divides the shared nouns (each once) by the goal title's noun list,
    repeats included: 1 of 5 is not over 0.2, though 1 of the 3 distinct nouns would be."""
    goal = {**GOAL, "name": "Towel Bath Towel Hand Towel"}
    mat = product(query="bath mats", name="Bath Mat", product_category="Bath › Mats")
    assert title_nouns(goal["name"]) == ("towel", "bath", "towel", "hand", "towel")
    kind = type_reward(mat, goal)
    assert kind["title_score"] == pytest.approx(1 / 5) and kind["r_type"] == 0.5
    # the same shared noun in a product title twice still counts once
    assert type_reward(product(name="Bath Bath Mat", query="x", product_category="x"),
                       goal)["title_score"] == pytest.approx(1 / 5)


def test_a_repeated_noun_can_push_the_title_score_under_a_tenth():
    goal = {**GOAL, "name": "Sofa Sofa Sofa Linen Couch Bench Frame Cushion Pillow Leg Arm"}
    other = product(query="x", name="Linen Curtain", product_category="x")
    kind = type_reward(other, goal)  # 1 of 11 nouns (1 of 9 distinct would be over 0.1)
    assert kind["title_score"] == pytest.approx(1 / 11) and kind["r_type"] == 0.1
