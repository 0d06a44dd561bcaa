"""TauAirline-v0's per-episode costs against the naive way, in the same run.

Episode setup: a page copy of the domain's template database (`deserialize`), against building
the database from τ-bench's JSON documents row by row through the ORM, as a straight port would
each episode. Final comparison: one digest of the rows (`state_key`), against reading the whole
database back into the benchmark's documents and comparing their sorted JSON, as its hash does.

    python bench/tau_airline.py --data-dir tau-bench/tau_bench/envs/airline   # the real domain
    python bench/tau_airline.py --quick                                       # invented test data (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

from agentrl.tau_airline import models as m
from agentrl.tau_airline.data import load
from agentrl.tau_airline.database import (
    EpisodeDatabase,
    document_rows,
    documents,
    new_engine,
    state_key,
    template_image,
)

TEST_DATA = Path(__file__).resolve().parents[1] / "tests" / "tau_airline" / "data"


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of `repeats` calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(TEST_DATA), help="τ-bench's airline folder")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="the invented test data, 3 repetitions (CI)")
    args = parser.parse_args()
    data_dir, repeats = (str(TEST_DATA), 3) if args.quick else (args.data_dir, args.repeats)
    data = load(data_dir)
    image = template_image(data)

    def page_copy() -> None:
        EpisodeDatabase(image).close()

    def row_by_row() -> None:
        engine = new_engine()
        m.Base.metadata.create_all(engine)
        with Session(engine) as session:
            session.add_all(document_rows(data))
            session.commit()
        engine.dispose()

    db = EpisodeDatabase(image)
    reference = json.dumps(documents(db.session), sort_keys=True)

    def digest() -> None:
        state_key(db.session)

    def documents_json() -> None:
        assert json.dumps(documents(db.session), sort_keys=True) == reference

    print(f"TauAirline-v0 costs, {data_dir}: {len(data.users)} users, {len(data.flights)} flights, "
          f"{len(data.reservations)} reservations; {platform.python_version()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}; median of {repeats}")
    for what, fast, slow in (("episode setup: page copy vs row by row", page_copy, row_by_row),
                             ("final comparison: digest vs documents JSON", digest, documents_json)):
        quick, naive = timed(fast, repeats), timed(slow, repeats)
        print(f"{what}: {quick * 1e3:.2f} ms vs {naive * 1e3:.2f} ms, ratio {naive / quick:.1f}x")
    db.close()


if __name__ == "__main__":
    main()
