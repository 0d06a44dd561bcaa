"""The words generated tasks are made of: names of files, folders, services, columns and functions.

Every generated name is drawn from these lists by a seeded `random.Random`, so the lists only
need to be long enough that combinations of two or three draws make repeats rare.
"""

from __future__ import annotations

import random

WORDS = (
    "amber",
    "anchor",
    "apex",
    "aspen",
    "atlas",
    "aurora",
    "basalt",
    "beacon",
    "birch",
    "bison",
    "blaze",
    "bramble",
    "breeze",
    "brook",
    "cactus",
    "canyon",
    "cedar",
    "cinder",
    "citrus",
    "clover",
    "cobalt",
    "comet",
    "coral",
    "crane",
    "crimson",
    "cypress",
    "dawn",
    "delta",
    "dune",
    "echo",
    "ember",
    "falcon",
    "fern",
    "fjord",
    "flint",
    "forge",
    "frost",
    "gable",
    "garnet",
    "glacier",
    "granite",
    "grove",
    "harbor",
    "hazel",
    "heron",
    "hollow",
    "indigo",
    "iris",
    "ivory",
    "jade",
    "jasper",
    "juniper",
    "kelp",
    "kestrel",
    "lagoon",
    "lantern",
    "larch",
    "lumen",
    "lynx",
    "magma",
    "maple",
    "marble",
    "meadow",
    "mesa",
    "mist",
    "monsoon",
    "moss",
    "nectar",
    "nimbus",
    "nova",
    "oak",
    "oasis",
    "obsidian",
    "onyx",
    "orbit",
    "orchid",
    "otter",
    "pebble",
    "pine",
    "pixel",
    "plume",
    "prairie",
    "quartz",
    "quill",
    "rapids",
    "raven",
    "reef",
    "ridge",
    "river",
    "sable",
    "saffron",
    "sage",
    "sequoia",
    "shale",
    "sierra",
    "slate",
    "spruce",
    "summit",
    "tundra",
    "willow",
)
EXTENSIONS = ("txt", "log", "csv", "py", "md", "json", "yaml", "ini")
# Function-name parts for Code-v0: a verb and a noun make a name the model cannot have memorised.
VERBS = ("compute", "make", "build", "get", "find", "calc", "produce", "derive", "do", "run")
ARG_NAMES = ("data", "obj", "items", "xs", "arg", "source", "inp", "payload")


def word(rng: random.Random) -> str:
    return rng.choice(WORDS)


def words(rng: random.Random, n: int) -> list[str]:
    """`n` distinct words."""
    return rng.sample(WORDS, n)


def slug(rng: random.Random, sep: str = "_") -> str:
    """Two words joined, e.g. 'cedar_otter' (10,000 possibilities)."""
    return f"{rng.choice(WORDS)}{sep}{rng.choice(WORDS)}"


def func_name(rng: random.Random, noun: str) -> str:
    """A function name such as 'derive_roman_cobalt': verb, the function's noun, a tag word."""
    return f"{rng.choice(VERBS)}_{noun}_{rng.choice(WORDS)}"
