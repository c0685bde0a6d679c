"""ALFWorld's ``pick_two`` goal ("put two apples in the cabinet") as an offline TextWorld game.

TextWorld's quest generator chains single actions, so it never asks for two objects of a kind;
this module lays out a household with ``textworld.GameMaker`` instead: rooms in a corridor,
containers (some closed) and supporters, two objects of one kind told apart by an adjective
("red apple", "green apple"), distractors of other kinds, and a destination. The quest's winning
condition holds only when **both** objects are in (or on) the destination; the walkthrough is
planned here (walk, open, take, ..., put) and recorded with ``set_walkthrough`` so TextWorld's
expert (``policy_commands``) follows the same plan. Everything is drawn from the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

ROOMS = ["kitchen", "pantry", "living room", "bedroom", "bathroom", "study", "garage",
         "hallway", "laundry room", "office"]
CONTAINERS = ["cabinet", "fridge", "drawer", "chest", "basket", "safe", "locker", "crate"]
SUPPORTERS = ["table", "counter", "shelf", "desk", "sofa", "bench", "dresser", "stand"]
KINDS = ["apple", "mug", "book", "candle", "spoon", "towel", "pen", "plate", "cup", "sock"]
COLOURS = ["red", "green", "blue", "yellow", "white", "black"]
DIRECTIONS = [("east", "west"), ("north", "south")]


@dataclass
class Place:
    """Where an object lies: a room's floor, or a container / supporter in a room."""

    room: int
    holder: Any = None  # a GameMaker entity, or None for the floor
    holder_name: str = ""
    container: bool = False


def _route(start: int, goal: int, exits: list[tuple[str, str]]) -> list[str]:
    """``go`` commands along the corridor from room ``start`` to room ``goal``; ``exits[i]`` is
    the (forward, back) direction pair between room i and room i + 1."""
    if goal >= start:
        return [f"go {exits[i][0]}" for i in range(start, goal)]
    return [f"go {exits[i - 1][1]}" for i in range(start, goal, -1)]


def _corridor(rng: random.Random, n_rooms: int) -> list[tuple[str, str]]:
    """(forward, back) exits between consecutive rooms; a room never uses one exit twice."""
    pairs = [p for d in DIRECTIONS for p in (d, d[::-1])]
    exits: list[tuple[str, str]] = []
    for _ in range(n_rooms - 1):
        used = exits[-1][1] if exits else None
        exits.append(rng.choice([p for p in pairs if p[0] != used]))
    return exits


def _furnish(maker, rng: random.Random, n_rooms: int, rooms) -> list[Place]:
    """One or two holders per room (containers closed half of the time)."""
    places = []
    names = rng.sample(CONTAINERS, len(CONTAINERS)) + rng.sample(SUPPORTERS, len(SUPPORTERS))
    rng.shuffle(names)
    for r in range(n_rooms):
        for _ in range(rng.randint(1, 2)):
            name = names.pop()
            container = name in CONTAINERS
            holder = maker.new(type="c" if container else "s", name=name)
            if container:
                holder.add_property("closed" if rng.random() < 0.5 else "open")
            rooms[r].add(holder)
            places.append(Place(r, holder, name, container))
    return places


def _fetch(place: Place, name: str, opened: set[str]) -> list[str]:
    """Commands to pick ``name`` up once in its room (opening its container first if closed)."""
    cmds = []
    if place.container and place.holder_name not in opened:
        if "closed" in [p.name for p in place.holder.properties]:
            cmds.append(f"open {place.holder_name}")
        opened.add(place.holder_name)
    return cmds + [f"take {name}" + (f" from {place.holder_name}" if place.holder else "")]


def draft_pick_two(seed: int, n_rooms: int, n_objects: int):
    """The GameMaker for ``seed``, (targets, destination, relation) for the win condition,
    the goal text, and the planned walkthrough."""
    from textworld import GameMaker

    rng = random.Random(f"pick_two|{seed}")
    maker = GameMaker()
    rooms = [maker.new_room(name) for name in rng.sample(ROOMS, n_rooms)]
    exits = _corridor(rng, n_rooms)
    for i, (forward, back) in enumerate(exits):
        maker.connect(getattr(rooms[i], forward), getattr(rooms[i + 1], back))
    start = rng.randrange(n_rooms)
    maker.set_player(rooms[start])
    places = _furnish(maker, rng, n_rooms, rooms)

    destination = rng.choice(places)
    sources = [p for p in places if p is not destination] + [Place(r) for r in range(n_rooms)]
    kind, *others = rng.sample(KINDS, 1 + max(0, n_objects - 2))
    colours = rng.sample(COLOURS, 2)
    targets = []
    for colour in colours:
        place = rng.choice(sources)
        obj = maker.new(type="o", name=f"{colour} {kind}")
        (place.holder or rooms[place.room]).add(obj)
        targets.append((f"{colour} {kind}", obj, place))
    for other in others:
        place = rng.choice(sources)
        (place.holder or rooms[place.room]).add(
            maker.new(type="o", name=f"{rng.choice(COLOURS)} {other}"))

    walkthrough, here, opened = [], start, set()
    for name, _, place in sorted(targets, key=lambda t: abs(t[2].room - start)):
        walkthrough += _route(here, place.room, exits) + _fetch(place, name, opened)
        here = place.room
    walkthrough += _route(here, destination.room, exits)
    if destination.container and "closed" in [p.name for p in destination.holder.properties] \
            and destination.holder_name not in opened:
        walkthrough.append(f"open {destination.holder_name}")
    relation, verb, preposition = (("in", "insert", "into") if destination.container
                                   else ("on", "put", "on"))
    walkthrough += [f"{verb} {name} {preposition} {destination.holder_name}"
                    for name, _, _ in targets]
    goal = f"put two {kind}s {relation} the {destination.holder_name}"
    return maker, (targets, destination, relation), goal, walkthrough


def make_pick_two_game(seed: int, n_rooms: int, n_objects: int):
    """The pick-two ``textworld`` Game for ``seed`` (not compiled); its quest is won only when
    both objects are at the destination, and its walkthrough is in ``metadata``."""
    from textworld.generator.game import Event, Quest

    maker, (targets, destination, relation), goal, walkthrough = draft_pick_two(
        seed, n_rooms, n_objects)
    conditions = [maker.new_fact(relation, obj, destination.holder) for _, obj, _ in targets]
    maker.quests = [Quest(win_events=[Event(conditions=conditions)], desc=goal,
                          commands=walkthrough)]
    maker.set_walkthrough(walkthrough)
    game = maker.build()
    game.objective = goal[0].upper() + goal[1:] + "."
    game.metadata["walkthrough"] = list(walkthrough)
    return game
