"""A seeded fictional knowledge world: passages about invented people, companies, cities and
countries, and single- and two-hop questions over them.

No pretrained model can know these answers, so an agent scores only by searching; the same seed
always gives the same world. Scales to any passage count (the 100k-passage benchmark corpus).

One question per company, so no two questions share their subject. A two-hop question names a
company and asks about its founder or its headquarters city (the bridge): the company passage
names the bridge but not the answer, and the bridge's passage holds the answer but never names the
company, so the question's own words cannot reach the answer in one search.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from agentrl.retrievers.datasets import Question, contents

SYLLABLES = [
    "ka",
    "lo",
    "ve",
    "ri",
    "tan",
    "mor",
    "zel",
    "quin",
    "dra",
    "fen",
    "sul",
    "bex",
    "nor",
    "pyr",
    "thal",
    "vo",
    "ix",
    "ula",
    "gorn",
    "ae",
    "bri",
    "cas",
    "dun",
    "el",
    "fro",
    "gil",
    "hal",
    "ith",
    "jor",
    "kel",
    "lum",
    "myr",
    "nev",
    "orn",
    "pel",
    "ros",
    "syl",
    "tor",
    "ux",
    "wen",
]
PROFESSIONS = (
    "astronomer",
    "cartographer",
    "composer",
    "glassblower",
    "engineer",
    "botanist",
    "architect",
    "chemist",
    "poet",
    "shipwright",
    "linguist",
    "painter",
)
INDUSTRIES = (
    "shipping",
    "textile",
    "mining",
    "software",
    "brewing",
    "printing",
    "aviation",
    "pharmaceutical",
    "clockmaking",
    "ceramics",
)
COMPANY_SUFFIXES = ("Works", "Holdings", "Guild", "Industries", "Company", "Foundry", "Collective")


@dataclass(frozen=True)
class World:
    seed: int
    passages: list[dict[str, str]]
    questions: list[Question]


class _Names:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, low: int, high: int) -> str:
        return "".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(low, high))).capitalize()

    def unique(self, make: Callable[[], str]) -> str:
        while True:
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name


@dataclass(frozen=True)
class _Facts:
    """The world's entities and every fact its passages and questions state."""

    countries: list[str]
    cities: list[str]
    people: list[str]
    city_country: dict[str, str]
    capitals: dict[str, str]  # country -> its capital city
    born: dict[str, tuple[str, int, str]]  # person -> (birth city, birth year, profession)
    companies: dict[str, tuple[str, str, int, str]]  # -> (founder, headquarters city, year, industry)
    population: dict[str, int]  # city -> population


def generate_world(seed: int = 0, passages: int = 1000, questions: int | None = None) -> World:
    """About `passages` passages (exactly, for counts >= 20) and their questions."""
    if passages < 20:
        raise ValueError("a world needs at least 20 passages")
    rng = random.Random(seed)
    facts = _draw_facts(rng, passages)
    passage_rows = _passages(rng, facts)
    qa = _questions(rng, facts)
    if questions is not None:
        qa = qa[:questions]
    return World(seed, passage_rows, qa)


def _draw_facts(rng: random.Random, passages: int) -> _Facts:
    """Unique names for one entity a passage, and the facts that tie them together."""
    names = _Names(rng)
    n_countries = max(2, passages // 100)
    n_cities = max(4, passages // 10)
    n_companies = max(4, passages // 5)
    n_people = passages - n_countries - n_cities - n_companies

    countries = [
        names.unique(lambda: names.word(2, 3) + rng.choice(("ia", "land", "mark", "stan"))).title()
        for _ in range(n_countries)
    ]
    cities = [
        names.unique(lambda: names.word(2, 3) + rng.choice(("heim", "port", "ford", "grad", "ton", "vale")))
        for _ in range(n_cities)
    ]
    people = [names.unique(lambda: f"{names.word(1, 2)} {names.word(2, 3)}") for _ in range(n_people)]
    companies = [
        names.unique(lambda: f"{names.word(2, 3)} {rng.choice(COMPANY_SUFFIXES)}") for _ in range(n_companies)
    ]

    city_country = {
        c: countries[i % n_countries] if i < n_countries else rng.choice(countries)
        for i, c in enumerate(cities)
    }
    capitals = {country: next(c for c in cities if city_country[c] == country) for country in countries}
    born = {p: (rng.choice(cities), rng.randint(1820, 1990), rng.choice(PROFESSIONS)) for p in people}
    founders = rng.sample(people, min(n_companies, n_people))
    company_facts = {
        c: (founders[i % len(founders)], rng.choice(cities), rng.randint(1850, 2015), rng.choice(INDUSTRIES))
        for i, c in enumerate(companies)
    }
    population = {c: rng.randint(2, 900) * 1000 for c in cities}
    return _Facts(countries, cities, people, city_country, capitals, born, company_facts, population)


def _passages(rng: random.Random, facts: _Facts) -> list[dict[str, str]]:
    """One passage per entity, in a shuffled order (ids are positions in it)."""
    rows: list[tuple[str, str]] = []
    for country in facts.countries:
        rows.append((country, f"{country} is a country. Its capital city is {facts.capitals[country]}."))
    for city in facts.cities:
        country, population = facts.city_country[city], facts.population[city]
        rows.append((city, f"{city} is a city in {country}, with a population of {population}."))
    for person in facts.people:
        city, year, job = facts.born[person]
        # a person's passage never names their company: the company passage is the only way in
        rows.append((person, f"{person} is a {job} born in {city} in {year}."))
    for company, (founder, city, year, industry) in facts.companies.items():
        rows.append(
            (
                company,
                f"{company} is a {industry} company founded in {year} by {founder}. "
                f"Its headquarters are in {city}.",
            )
        )
    order = list(range(len(rows)))
    rng.shuffle(order)
    return [{"id": str(i), "contents": contents(*rows[j])} for i, j in enumerate(order)]


def _questions(rng: random.Random, facts: _Facts) -> list[Question]:
    """One question per company, drawn among those its facts can answer unambiguously."""
    qa: list[Question] = []
    for company, (founder, city, year, _industry) in facts.companies.items():
        birth_city, birth_year, _job = facts.born[founder]
        n = len(qa)
        kinds: list[tuple[str, str, tuple[str, ...]]] = [
            (f"Who founded {company}?", founder, (company,)),
            (f"In which year was {company} founded?", str(year), (company,)),
            (f"In which city are the headquarters of {company}?", city, (company,)),
        ]
        # two hops: the company passage names the bridge (founder, city) but not the answer, and
        # the passage with the answer does not name the company
        if birth_city != city:
            kinds.append(
                (f"In which city was the founder of {company} born?", birth_city, (company, founder))
            )
        if birth_year != year:
            kinds.append(
                (f"In which year was the founder of {company} born?", str(birth_year), (company, founder))
            )
        if facts.population[city] != year:
            kinds.append(
                (
                    f"What is the population of the city where {company} has its headquarters?",
                    str(facts.population[city]),
                    (company, city),
                )
            )
        text, answer, evidence = kinds[rng.randrange(len(kinds))]
        qa.append(Question(f"q{n}", text, (answer,), evidence, len(evidence)))
    return qa
