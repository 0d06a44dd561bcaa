"""A seeded fictional knowledge world: passages about invented people, companies, cities and
countries, and single- and two-hop questions over them.

No pretrained model can know these answers, so an agent scores only by searching; the same seed
always gives the same world. Scales to any passage count (the 100k-passage benchmark corpus).
"""

from __future__ import annotations

import random
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

    def unique(self, make: callable) -> str:  # type: ignore[valid-type]
        while True:
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name


def generate_world(seed: int = 0, passages: int = 1000, questions: int | None = None) -> World:
    """About `passages` passages (exactly, for counts >= 20) and their questions."""
    if passages < 20:
        raise ValueError("a world needs at least 20 passages")
    rng = random.Random(seed)
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
    founded_by = {facts[0]: c for c, facts in company_facts.items()}

    rows: list[tuple[str, str]] = []
    for country in countries:
        rows.append((country, f"{country} is a country. Its capital city is {capitals[country]}."))
    for city in cities:
        rows.append(
            (
                city,
                f"{city} is a city in {city_country[city]}, with a population of "
                f"{rng.randint(2, 900) * 1000}.",
            )
        )
    for person in people:
        city, year, job = born[person]
        text = f"{person} is a {job} born in {city} in {year}."
        if person in founded_by:
            text += f" {person} founded {founded_by[person]}."
        rows.append((person, text))
    for company, (founder, city, year, industry) in company_facts.items():
        rows.append(
            (
                company,
                f"{company} is a {industry} company founded in {year} by {founder}. "
                f"Its headquarters are in {city}.",
            )
        )
    order = list(range(len(rows)))
    rng.shuffle(order)
    passage_rows = [{"id": str(i), "contents": contents(*rows[j])} for i, j in enumerate(order)]

    qa: list[Question] = []
    for company, (founder, city, year, _industry) in company_facts.items():
        kind = rng.randrange(5)
        n = len(qa)
        if kind == 0:
            qa.append(Question(f"q{n}", f"Who founded {company}?", (founder,), (company,), 1))
        elif kind == 1:
            qa.append(Question(f"q{n}", f"In which year was {company} founded?", (str(year),), (company,), 1))
        elif kind == 2:
            birth_city = born[founder][0]
            qa.append(Question(f"q{n}", f"In which city was {founder} born?", (birth_city,), (founder,), 1))
        elif kind == 3:
            qa.append(
                Question(
                    f"q{n}",
                    f"In which city was the founder of {company} born?",
                    (born[founder][0],),
                    (company, founder),
                    2,
                )
            )
        else:
            qa.append(
                Question(
                    f"q{n}",
                    f"In which country are the headquarters of {company}?",
                    (city_country[city],),
                    (company, city),
                    2,
                )
            )
    if questions is not None:
        qa = qa[:questions]
    return World(seed, passage_rows, qa)
