"""Multi-hop questions over the offline knowledge world (``world.py``).

Questions are phrased like DeepSearchQA's and need 2-4 hops through the pages; answers are sets
(a "Single Answer" is a set of one). Every question carries its expert plan: the pages to open,
in order, with a query that finds each, and the names that must be read on each page.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from a2rl.task import text_key

from .world import Entity, World


@dataclass
class Target:
    """One page of an expert plan: a query whose results show it, the names the expert must
    read there (it pages on until all of them have been shown), and whether the question
    itself gives the query away (else it comes from an earlier page)."""

    page: str
    query: str
    needs: list[str]
    known: bool = False


@dataclass
class Question:
    id: str
    question: str
    answers: list[str]
    answer_type: str  # "Single Answer" | "Set Answer"
    template: str
    hops: int
    answer_kind: str
    plan: list[Target]
    entities: list[str]  # persons, organisations and products the question asks about

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Question:
        fields_ = dict(row)
        fields_["plan"] = [Target(**t) for t in row["plan"]]
        return cls(**{k: fields_[k] for k in cls.__dataclass_fields__})


def _single(qid, text, answer, template, hops, kind, plan, entities) -> Question:
    return Question(qid, text, [answer], "Single Answer", template, hops, kind, plan, entities)


def _set(qid, text, answers, template, hops, kind, plan, entities) -> Question:
    return Question(qid, text, sorted(answers), "Set Answer", template, hops, kind, plan,
                    entities)


class QuestionMaker:
    """Draws questions of six templates from a world; each returns None when the drawn
    entities do not make a well-posed question (e.g. an empty answer set)."""

    TEMPLATES = ("leader_birthplace", "maker_country", "founder_country", "orgs_led_by_natives",
                 "category_products_by_city", "alumni_born_in")

    def __init__(self, world: World, rng: random.Random):
        self.w, self.rng = world, rng

    def draw(self, qid: str, template: str) -> Question | None:
        return getattr(self, template)(qid)

    # a page target: the entity's own page, found by its name
    def _page(self, e: Entity, *needs: str, known: bool = False) -> Target:
        return Target(e.id, e.name, list(needs), known)

    def leader_birthplace(self, qid: str) -> Question | None:
        org = self.rng.choice(self.w.of_kind("organisation"))
        leader = self.w.entities[org.attrs["leader"]]
        city = self.w.name(leader.attrs["birthplace"])
        role = "chief executive" if org.attrs["type"] == "company" else "head"
        text = f"In which city was the current {role} of {org.name} born?"
        plan = [self._page(org, leader.name, known=True), self._page(leader, city)]
        return _single(qid, text, city, "leader_birthplace", 2, "city", plan,
                       [org.id, leader.id])

    def maker_country(self, qid: str) -> Question | None:
        product = self.rng.choice(self.w.of_kind("product"))
        maker = self.w.entities[product.attrs["maker"]]
        city = self.w.entities[maker.attrs["city"]]
        country = self.w.name(city.attrs["country"])
        text = (f"The {product.name} was released by a company. In which country does that "
                f"company have its headquarters?")
        plan = [self._page(product, maker.name, known=True), self._page(maker, country)]
        return _single(qid, text, country, "maker_country", 3, "country", plan,
                       [product.id, maker.id])

    def founder_country(self, qid: str) -> Question | None:
        product = self.rng.choice(self.w.of_kind("product"))
        maker = self.w.entities[product.attrs["maker"]]
        if len(maker.attrs["founders"]) != 1:
            return None
        founder = self.w.entities[maker.attrs["founders"][0]]
        city = self.w.entities[founder.attrs["birthplace"]]
        country = self.w.name(city.attrs["country"])
        text = (f"The company that makes the {product.name} was founded by a single person. "
                f"In which country was that founder born?")
        plan = [self._page(product, maker.name, known=True), self._page(maker, founder.name),
                self._page(founder, city.name), self._page(city, country)]
        return _single(qid, text, country, "founder_country", 4, "country", plan,
                       [product.id, maker.id, founder.id])

    def orgs_led_by_natives(self, qid: str) -> Question | None:
        city, home = self.rng.sample(self.w.of_kind("city"), 2)
        based = self.w.where("organisation", city=city.id)
        if len(based) < 2:
            return None
        after = self.rng.choice(sorted({o.attrs["founded"] for o in based})) - 1
        answers = [o for o in based if o.attrs["founded"] > after
                   and self.w.entities[o.attrs["leader"]].attrs["birthplace"] == home.id]
        if not 1 <= len(answers) <= 4:
            return None
        text = (f"Which organisations based in {city.name} and founded after {after} are led "
                f"by someone who was born in {home.name}?")
        leaders = [self.w.name(o.attrs["leader"]) for o in answers]
        plan = [Target(f"list/based/{city.id}", f"organisations based in {city.name}",
                       [o.name for o in answers], True),
                Target(f"list/born/{home.id}", f"people born in {home.name}", leaders, True)]
        return _set(qid, text, [o.name for o in answers], "orgs_led_by_natives", 3,
                    "organisation", plan,
                    [o.id for o in answers] + [o.attrs["leader"] for o in answers])

    def category_products_by_city(self, qid: str) -> Question | None:
        category = self.rng.choice(sorted({p.attrs["category"]
                                           for p in self.w.of_kind("product")}))
        city = self.rng.choice(self.w.of_kind("city"))
        made = [p for p in self.w.where("product", category=category)
                if self.w.entities[p.attrs["maker"]].attrs["city"] == city.id]
        if not made:
            return None
        before = self.rng.choice(sorted({p.attrs["released"] for p in made})) + 1
        answers = [p for p in made if p.attrs["released"] < before]
        if not 1 <= len(answers) <= 4:
            return None
        text = (f"Which {category} products released before {before} were made by "
                f"organisations based in {city.name}?")
        makers = sorted({self.w.name(p.attrs["maker"]) for p in answers})
        plan = [Target(f"category/{category}", f"{category} products",
                       [p.name for p in answers], True),
                Target(f"list/based/{city.id}", f"organisations based in {city.name}", makers,
                       True)]
        return _set(qid, text, [p.name for p in answers], "category_products_by_city", 3,
                    "product", plan,
                    [p.id for p in answers] + sorted({p.attrs["maker"] for p in answers}))

    def alumni_born_in(self, qid: str) -> Question | None:
        university = self.rng.choice(self.w.where("organisation", type="university"))
        city = self.rng.choice(self.w.of_kind("city"))
        answers = [p for p in self.w.where("person", birthplace=city.id)
                   if p.attrs["studied"] == university.id]
        if not 1 <= len(answers) <= 4:
            return None
        text = f"Which people born in {city.name} studied at {university.name}?"
        names = [p.name for p in answers]
        plan = [Target(f"list/born/{city.id}", f"people born in {city.name}", names, True),
                self._page(university, *names, known=True)]
        return _set(qid, text, names, "alumni_born_in", 2, "person", plan,
                    [p.id for p in answers] + [university.id])


def make_questions(world: World, n: int, seed: int, prefix: str,
                   avoid: Collection[str] = frozenset(), max_tries: int = 200,
                   taken: Collection[str] = frozenset()) -> list[Question]:
    """``n`` distinct questions drawn from ``seed`` whose entities are not in ``avoid`` and
    whose texts' keys (``text_key``) are not in ``taken``. The templates take turns (about
    n / 6 questions each); a template that yields nothing new in ``max_tries`` draws in a row
    is used up and the others go on."""
    rng = random.Random(f"questions|{seed}")
    maker = QuestionMaker(world, rng)
    out: list[Question] = []
    seen: set[str] = set(taken)
    live = list(maker.TEMPLATES)
    failures = dict.fromkeys(live, 0)
    turn = 0
    while len(out) < n and live:
        template = live[turn % len(live)]
        q = maker.draw(f"{prefix}-{len(out):04d}", template)
        if q is None or text_key(q.question) in seen or any(e in avoid for e in q.entities):
            failures[template] += 1
            if failures[template] >= max_tries:
                live.remove(template)
            continue
        failures[template] = 0
        seen.add(text_key(q.question))
        out.append(q)
        turn += 1
    if len(out) < n:
        raise RuntimeError(f"only {len(out)} of {n} {prefix} questions could be drawn from seed "
                           f"{seed} (avoiding {len(avoid)} entities); use a larger world or "
                           f"fewer questions")
    return out


def world_questions(p) -> tuple[World, list[Question], list[Question]]:
    """The world of ``p`` (DeepSearchParams), its sealed test questions and the train ones,
    which ask about none of the test questions' entities."""
    world = World.build(p.world_seed, p.world)
    test = make_questions(world, p.test_questions, p.test_seed, "test")
    asked = {e for q in test for e in q.entities}
    return world, test, make_questions(world, p.train_questions, p.train_seed, "train",
                                       avoid=asked)
