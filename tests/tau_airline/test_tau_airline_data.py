"""Loading τ-bench's airline layout: documents round-trip through SQLite exactly, tasks are read
without running their file, a folder without the data is refused clearly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tau_helpers import DATA

from agentrl.tau_airline.data import load, read_tasks
from agentrl.tau_airline.database import EpisodeDatabase, documents, state_key, template_image


def test_documents_round_trip_exactly():
    data = load(DATA)
    db = EpisodeDatabase(template_image(data))
    try:
        got = documents(db.session)
        for name in ("users", "flights", "reservations"):
            # the same text, key order included: what the tools answer is the benchmark's JSON
            assert json.dumps(got[name]) == json.dumps(json.loads((DATA / f"{name}.json").read_text()))
    finally:
        db.close()


def test_tasks_are_read_from_the_python_task_list():
    data = load(DATA)
    assert len(data.tasks) == 10
    first = data.tasks[0]
    assert first.user_id == "ada_park_101" and first.actions[0].name == "book_reservation"
    assert first.actions[0].kwargs["payment_methods"][1] == {"payment_id": "gift_card_1002", "amount": 50}
    assert data.tasks[3].outputs == ("450",)
    assert data.policy.startswith("# Test airline agent policy")


def test_task_file_code_is_never_run(tmp_path: Path):
    marker = tmp_path / "ran"
    task_file = tmp_path / "tasks_test.py"
    task_file.write_text(f"TASKS = [__import__('pathlib').Path({str(marker)!r}).touch()]\n")
    with pytest.raises(ValueError):
        read_tasks(task_file)
    assert not marker.exists()


def test_a_task_file_dict_that_unpacks_a_name_is_a_clear_error(tmp_path: Path):
    task_file = tmp_path / "tasks_test.py"
    task_file.write_text("TASKS = [{'user_id': 'u', **EXTRA}]\n")
    with pytest.raises(ValueError, match="not \\*\\*unpacking"):
        read_tasks(task_file)


def test_the_data_subfolder_layout_and_a_missing_file(tmp_path: Path):
    shutil.copytree(DATA, tmp_path / "airline" / "data")
    root = tmp_path / "airline"
    for name in ("wiki.md", "tasks_test.py"):
        (root / "data" / name).rename(root / name)
    assert len(load(root).tasks) == 10  # τ-bench's own layout: JSON under data/, tasks and policy beside
    broken = tmp_path / "broken"
    shutil.copytree(DATA, broken)
    (broken / "flights.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"flights\.json not found"):
        load(broken)
    with pytest.raises(FileNotFoundError, match=r"tasks_train\.py not found"):
        load(DATA, split="train")


def test_missing_data_dir_is_a_clear_error(tmp_path: Path):
    from agentrl.tau_airline.env import TauAirlineEnv

    with pytest.raises(ValueError, match="data_dir is required"):
        TauAirlineEnv().reset(seed=0)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        TauAirlineEnv(tmp_path / "nowhere")


def test_state_key_sees_int_and_float_apart():
    data = load(DATA)
    a, b = EpisodeDatabase(template_image(data)), EpisodeDatabase(template_image(data))
    try:
        assert state_key(a.session) == state_key(b.session)
        from agentrl.tau_airline.models import PaymentMethod

        b.session.get(PaymentMethod, ("ada_park_101", "gift_card_1002")).amount = 300.0
        assert state_key(a.session) != state_key(b.session)  # 300 vs 300.0, as the benchmark's hash
    finally:
        a.close()
        b.close()
