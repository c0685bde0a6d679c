"""The offline knowledge world: seeded fictional entities, their pages, and multi-hop questions.

The real DeepSearchQA questions need the open web. Offline, this module builds a small web of
its own from one seed: countries, cities, people, organisations (companies, universities,
institutes) and products, with typed attributes (founding and birth years, sectors, categories)
and relations (based in, born in, leads, founded, makes, designed, studied at). Each entity gets
a page; list pages ("People born in X", "Organisations based in X") and category pages
("Robotics products") join them, as on the web.

Questions are phrased like DeepSearchQA's and need 2-4 hops through the pages; answers are sets
(a "Single Answer" is a set of one). Every question carries its expert plan: the pages to open,
in order, with a query that finds each, and the names that must be read on each page.

Every entity name is built from its own root, so no entity's name is part of another's: a
matcher that finds a name inside an answer cannot mistake one entity for another.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

SYLLABLES = ["an", "ar", "bel", "bor", "cal", "dar", "del", "dor", "el", "en", "fal", "gar",
             "hal", "ir", "is", "kal", "kor", "lan", "lor", "mar", "mel", "mor", "nal", "nor",
             "or", "os", "pal", "per", "ral", "ren", "ros", "sal", "sen", "tal", "tor", "ul",
             "val", "ven", "vor", "zan"]
ENDINGS = ["a", "ia", "ok", "en", "is", "ar", "um", "o", "et", "ine", "ax", "ek"]
GIVEN_NAMES = ["Ada", "Bram", "Cora", "Dov", "Elin", "Fenn", "Greta", "Hugo", "Ines", "Joss",
               "Kira", "Lev", "Mira", "Nils", "Orla", "Pavel", "Rhea", "Sten", "Tova", "Ugo",
               "Vera", "Wim", "Yara", "Zeno", "Alma", "Bodil", "Cyril", "Dagny", "Emil", "Frida"]
SECTORS = {  # sector -> (company name suffixes, product categories)
    "robotics": (["Robotics", "Automation"], ["industrial robot", "service robot"]),
    "aviation": (["Aero", "Aviation"], ["light aircraft", "drone"]),
    "software": (["Software", "Systems"], ["database", "operating system"]),
    "shipping": (["Shipping", "Lines"], ["cargo vessel", "ferry"]),
    "pharmaceuticals": (["Pharma", "Therapeutics"], ["vaccine", "antibiotic"]),
    "textiles": (["Textiles", "Mills"], ["raincoat", "wool blanket"]),
    "food": (["Foods", "Dairy"], ["breakfast cereal", "cheese"]),
}
OCCUPATIONS = ["engineer", "chemist", "economist", "architect", "physicist", "designer",
               "historian", "lawyer", "biologist", "mathematician"]
CURRENT_YEAR = 2025


def article(noun: str) -> str:
    """"an engineer", "a chemist"."""
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


@dataclass
class WorldSize:
    """How many entities of each kind the world has."""

    countries: int = field(default=16, metadata={"help": "countries (answers of 2 templates)"})
    cities: int = field(default=48, metadata={"help": "cities, spread over the countries"})
    people: int = field(default=360, metadata={"help": "people (leaders, founders, alumni)"})
    companies: int = field(default=110, metadata={"help": "companies, 7 sectors"})
    universities: int = field(default=12, metadata={"help": "universities (alumni lists)"})
    institutes: int = field(default=14, metadata={"help": "institutes"})
    products: int = field(default=180, metadata={"help": "products, 14 categories"})

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 2:
                raise ValueError(f"task.params.world.{name}={getattr(self, name)}; expected "
                                 ">= 2")
        if self.people < self.companies + self.universities + self.institutes:
            raise ValueError("task.params.world.people must be at least the number of "
                             "organisations (each has its own leader)")


@dataclass
class Entity:
    id: str
    kind: str  # country | city | person | organisation | product
    name: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Page:
    id: str
    title: str
    text: str
    kind: str  # entity kind, or "list" / "category"


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


class NameMaker:
    """Unique roots ("Velmora", "Ostek"): one per entity, never reused."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def root(self) -> str:
        for _ in range(10_000):
            parts = [self.rng.choice(SYLLABLES) for _ in range(self.rng.choice((1, 2, 2)))]
            word = ("".join(parts) + self.rng.choice(ENDINGS)).capitalize()
            if word.lower() not in self.used and len(word) >= 4:
                self.used.add(word.lower())
                return word
        raise RuntimeError("the name space is exhausted; use a smaller world")


class World:
    """The entities and their pages. ``build(seed, size)`` is deterministic."""

    def __init__(self, entities: dict[str, Entity]):
        self.entities = entities
        self.pages: dict[str, Page] = {}
        self._render()

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def build(cls, seed: int, size: WorldSize | None = None) -> World:
        size = size or WorldSize()
        rng = random.Random(f"world|{seed}")
        names = NameMaker(rng)
        ents: dict[str, Entity] = {}

        def add(kind: str, name: str, **attrs: Any) -> Entity:
            entity = Entity(f"{kind}/{len([e for e in ents.values() if e.kind == kind])}",
                            kind, name, attrs)
            ents[entity.id] = entity
            return entity

        countries = [add("country", names.root()) for _ in range(size.countries)]
        cities = [add("city", names.root(), country=countries[i % len(countries)].id,
                      population=rng.randrange(20, 2000) * 1000)
                  for i in range(size.cities)]
        people = []
        for _ in range(size.people):
            people.append(add("person", f"{rng.choice(GIVEN_NAMES)} {names.root()}",
                              born=rng.randint(1935, 1995), birthplace=rng.choice(cities).id,
                              occupation=rng.choice(OCCUPATIONS)))
        leaders = rng.sample(people, size.companies + size.universities + size.institutes)
        orgs = []
        for i in range(size.universities):
            orgs.append(add("organisation", f"{names.root()} University", type="university",
                            founded=rng.randint(1700, 1960), city=rng.choice(cities).id,
                            leader=leaders.pop().id, founders=[]))
        universities = list(orgs)
        for i in range(size.institutes):
            orgs.append(add("organisation", f"{names.root()} Institute", type="institute",
                            founded=rng.randint(1900, 2010), city=rng.choice(cities).id,
                            leader=leaders.pop().id, founders=[]))
        for i in range(size.companies):
            sector = rng.choice(sorted(SECTORS))
            founded = rng.randint(1965, 2018)
            old_enough = [p for p in people if p.attrs["born"] <= founded - 22]
            founders = rng.sample(old_enough, rng.choice((1, 1, 2)))
            orgs.append(add("organisation", f"{names.root()} {rng.choice(SECTORS[sector][0])}",
                            type="company", sector=sector, founded=founded,
                            city=rng.choice(cities).id, leader=leaders.pop().id,
                            founders=[p.id for p in founders]))
        for person in people:
            person.attrs["studied"] = rng.choice(universities).id
        companies = [o for o in orgs if o.attrs["type"] == "company"]
        for _ in range(size.products):
            maker = rng.choice(companies)
            category = rng.choice(SECTORS[maker.attrs["sector"]][1])
            add("product", f"{names.root()} {rng.choice(('One', 'Pro', 'Max', 'Mini'))}"
                if rng.random() < 0.3 else f"{names.root()} {rng.randrange(2, 99) * 10}",
                category=category, maker=maker.id,
                released=rng.randint(max(maker.attrs["founded"] + 1, 1960), CURRENT_YEAR - 1),
                designer=rng.choice(people).id)
        return cls(ents)

    # ---- queries ------------------------------------------------------------------------

    def of_kind(self, kind: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind]

    def name(self, entity_id: str) -> str:
        return self.entities[entity_id].name

    def where(self, kind: str, **attrs: Any) -> list[Entity]:
        return [e for e in self.of_kind(kind)
                if all(e.attrs.get(k) == v for k, v in attrs.items())]

    def led_by(self, person_id: str) -> list[Entity]:
        return self.where("organisation", leader=person_id)

    def founded_by(self, person_id: str) -> list[Entity]:
        return [o for o in self.of_kind("organisation") if person_id in o.attrs["founders"]]

    # ---- pages --------------------------------------------------------------------------

    def _render(self) -> None:
        for e in self.entities.values():
            text = getattr(self, f"_page_{e.kind}")(e)
            self.pages[e.id] = Page(e.id, e.name, text, e.kind)
        for city in self.of_kind("city"):
            born = sorted(self.where("person", birthplace=city.id), key=lambda p: p.name)
            rows = [f"- {p.name} ({p.attrs['born']}, {p.attrs['occupation']})" for p in born]
            self._list(f"list/born/{city.id}", f"People born in {city.name}",
                       f"People born in {city.name}, {self._country_of(city)}:", rows)
            based = sorted(self.where("organisation", city=city.id), key=lambda o: o.name)
            rows = [f"- {o.name}: {self._org_type(o)}, founded {o.attrs['founded']}, led by "
                    f"{self.name(o.attrs['leader'])}" for o in based]
            self._list(f"list/based/{city.id}", f"Organisations based in {city.name}",
                       f"Organisations with their headquarters in {city.name}:", rows)
        categories = sorted({p.attrs["category"] for p in self.of_kind("product")})
        for category in categories:
            made = sorted(self.where("product", category=category),
                          key=lambda p: (p.attrs["released"], p.name))
            rows = [f"- {p.name} ({p.attrs['released']}), made by {self.name(p.attrs['maker'])}"
                    for p in made]
            self._list(f"category/{category}", f"Category: {category} products",
                       f"Products in the category {category}, by year of release:", rows)

    def _list(self, page_id: str, title: str, intro: str, rows: list[str]) -> None:
        body = "\n".join(rows) if rows else "(none listed)"
        self.pages[page_id] = Page(page_id, title, f"{intro}\n{body}", "list")

    def _country_of(self, city: Entity) -> str:
        return self.name(city.attrs["country"])

    def _org_type(self, org: Entity) -> str:
        return f"{org.attrs['sector']} company" if org.attrs["type"] == "company" \
            else org.attrs["type"]

    def _page_country(self, e: Entity) -> str:
        cities = sorted(c.name for c in self.where("city", country=e.id))
        return (f"{e.name} is a country. Its cities include {', '.join(cities)}.")

    def _page_city(self, e: Entity) -> str:
        return (f"{e.name} is a city in {self._country_of(e)} with a population of "
                f"{e.attrs['population']:,}. See also: People born in {e.name}; "
                f"Organisations based in {e.name}.")

    def _page_person(self, e: Entity) -> str:
        a = e.attrs
        lines = [f"{e.name} (born {a['born']} in {self.name(a['birthplace'])}) is "
                 f"{article(a['occupation'])}. {e.name.split()[0]} studied at "
                 f"{self.name(a['studied'])}."]
        for org in self.led_by(e.id):
            role = "chief executive" if org.attrs["type"] == "company" else "head"
            lines.append(f"{e.name} is the current {role} of {org.name}.")
        for org in self.founded_by(e.id):
            lines.append(f"{e.name} co-founded {org.name} in {org.attrs['founded']}.")
        designed = [p for p in self.where("product", designer=e.id)]
        if designed:
            lines.append("Designed: " + ", ".join(f"the {p.name} ({p.attrs['category']})"
                                                  for p in designed) + ".")
        return " ".join(lines)

    def _page_organisation(self, e: Entity) -> str:
        a = e.attrs
        city = self.entities[a["city"]]
        where = f"based in {city.name}, {self._country_of(city)}"
        if a["type"] == "company":
            founders = " and ".join(self.name(p) for p in a["founders"])
            lines = [f"{e.name} is {article(a['sector'])} company {where}. It was founded in "
                     f"{a['founded']} by {founders}. Its chief executive is "
                     f"{self.name(a['leader'])}."]
            products = sorted(self.where("product", maker=e.id),
                              key=lambda p: p.attrs["released"])
            if products:
                lines.append("Products: " + ", ".join(f"{p.name} ({p.attrs['released']})"
                                                      for p in products) + ".")
            return " ".join(lines)
        lines = [f"{e.name} is {article(a['type'])} {where}, founded in {a['founded']}. It is "
                 f"headed by {self.name(a['leader'])}."]
        if a["type"] == "university":
            alumni = sorted(p.name for p in self.where("person", studied=e.id))
            lines.append("Notable alumni: " + ", ".join(alumni) + ".")
        return " ".join(lines)

    def _page_product(self, e: Entity) -> str:
        a = e.attrs
        return (f"The {e.name} is {article(a['category'])} released in {a['released']} by "
                f"{self.name(a['maker'])}. It was designed by {self.name(a['designer'])}.")


# ---- questions ----------------------------------------------------------------------------

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
                   avoid: set[str] | frozenset[str] = frozenset(),
                   max_tries: int = 200) -> list[Question]:
    """``n`` distinct questions drawn from ``seed`` whose entities are not in ``avoid``. The
    templates take turns (about n / 6 questions each); a template that yields nothing new in
    ``max_tries`` draws in a row is used up and the others go on."""
    rng = random.Random(f"questions|{seed}")
    maker = QuestionMaker(world, rng)
    out: list[Question] = []
    seen: set[str] = set()
    live = list(maker.TEMPLATES)
    failures = dict.fromkeys(live, 0)
    turn = 0
    while len(out) < n and live:
        template = live[turn % len(live)]
        q = maker.draw(f"{prefix}-{len(out):04d}", template)
        if q is None or q.question in seen or avoid & set(q.entities):
            failures[template] += 1
            if failures[template] >= max_tries:
                live.remove(template)
            continue
        failures[template] = 0
        seen.add(q.question)
        out.append(q)
        turn += 1
    if len(out) < n:
        raise RuntimeError(f"only {len(out)} of {n} {prefix} questions could be drawn from seed "
                           f"{seed} (avoiding {len(avoid)} entities); use a larger world or "
                           f"fewer questions")
    return out
