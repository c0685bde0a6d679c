"""The offline knowledge world: seeded fictional entities and their pages.

The real DeepSearchQA questions need the open web. Offline, this module builds a small web of
its own from one seed: countries, cities, people, organisations (companies, universities,
institutes) and products, with typed attributes (founding and birth years, sectors, categories)
and relations (based in, born in, leads, founded, makes, designed, studied at). Each entity gets
a page; list pages ("People born in X", "Organisations based in X") and category pages
("Robotics products") join them, as on the web.

The questions over a world are drawn in ``questions.py``.

Every entity name is built from its own root, so no entity's name is part of another's: a
matcher that finds a name inside an answer cannot mistake one entity for another.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
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

    countries: int = 16
    """countries (answers of 2 templates)"""
    cities: int = 48
    """cities, spread over the countries"""
    people: int = 360
    """people (leaders, founders, alumni)"""
    companies: int = 110
    """companies, 7 sectors"""
    universities: int = 12
    """universities (alumni lists)"""
    institutes: int = 14
    """institutes"""
    products: int = 180
    """products, 14 categories"""

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
