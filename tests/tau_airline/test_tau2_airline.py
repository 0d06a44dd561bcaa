"""τ²-bench's airline layout: loading (JSON and TOML database, splits, task shapes), τ²-bench's tools
and error texts, gold replay = 1 on every task, do-nothing = 0 where the reference would not pay,
the ACTION reward basis, forks, and the env served over HTTP. The data is invented, in τ²-bench's
exact formats (`tests/tau_airline/data_tau2`)."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import pytest
from tau_helpers import DATA_TAU2, call, play_actions, run_tool

import agentrl  # noqa: F401
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread
from agentrl.tau_airline.data import TAU2_BENCH, load
from agentrl.tau_airline.env import TauAirlineEnv, gold_actions, gold_state, initial_state

TAU = "agentrl/TauAirline-v0"
BASE = load(DATA_TAU2, "base")
N = len(BASE.tasks)


def env_at(index: int, split: str = "base", **kwargs) -> TauAirlineEnv:
    env = TauAirlineEnv(DATA_TAU2, split=split, **kwargs)
    env.reset(seed=0, options={"task_index": index})
    return env


def play(actions: list[str], index: int, **kwargs) -> tuple[float, dict]:
    return play_actions(env_at(index, **kwargs), actions)


# --- loading ------------------------------------------------------------------------------------
def test_layout_splits_and_task_shapes():
    assert BASE.layout == TAU2_BENCH and N == 10
    test = load(DATA_TAU2, "test").tasks
    assert [t.task_id for t in test] == ["1", "3", "5", "7", "9"]  # the split's ids, in the file's order
    assert [t.index for t in test] == list(range(5))
    task = BASE.tasks[3]
    assert task.user_id == "ada_park_101" and task.outputs == ("450",)
    assert task.instruction.startswith("Instructions:\n\tDomain: airline\n\tReason for call:\n\t\tYou want")
    assert "Known info:\n\t\tYou are Ada Park." in task.instruction
    assert BASE.tasks[9].reward_basis == ("DB", "ACTION")
    assert BASE.tasks[9].actions[0].compare_args == ("user_id",)
    # numbers typed as τ²-bench's models type them
    assert BASE.users["ada_park_101"]["payment_methods"]["gift_card_1002"]["amount"] == 300.0
    with pytest.raises(ValueError, match="split 'dev' is not in"):
        load(DATA_TAU2, "dev")


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[ " + ", ".join(_toml(v) for v in value) + " ]"
    return json.dumps(value)


def test_the_database_may_be_toml(tmp_path):
    for name in ("policy.md", "tasks.json", "split_tasks.json"):
        shutil.copy(DATA_TAU2 / name, tmp_path / name)
    db = json.loads((DATA_TAU2 / "db.json").read_text())
    (tmp_path / "db.toml").write_text("".join(f"{key} = {_toml(value)}\n" for key, value in db.items()))
    data = load(tmp_path, "base")
    assert data.layout == TAU2_BENCH
    assert (data.users, data.flights, data.reservations) == (BASE.users, BASE.flights, BASE.reservations)


def test_unsupported_tasks_are_refused_by_name(tmp_path):
    for name in ("policy.md", "db.json", "split_tasks.json"):
        shutil.copy(DATA_TAU2 / name, tmp_path / name)
    tasks = json.loads((DATA_TAU2 / "tasks.json").read_text())
    tasks[2]["evaluation_criteria"]["reward_basis"] = ["DB", "NL_ASSERTION"]
    (tmp_path / "tasks.json").write_text(json.dumps(tasks))
    with pytest.raises(ValueError, match=r"task 2: reward_basis \['NL_ASSERTION'\] is not supported"):
        load(tmp_path, "base")


def test_user_guidelines_from_the_tau2_data_tree(tmp_path):
    """In τ²-bench's tree (data/tau2/domains/airline) the `llm` customer reads its simulator's guidelines."""
    airline = tmp_path / "tau2" / "domains" / "airline"
    airline.mkdir(parents=True)
    for name in ("policy.md", "db.json", "tasks.json", "split_tasks.json"):
        shutil.copy(DATA_TAU2 / name, airline / name)
    assert load(airline, "base").user_guidelines is None
    (tmp_path / "tau2" / "user_simulator").mkdir()
    (tmp_path / "tau2" / "user_simulator" / "simulation_guidelines.md").write_text("Be a customer.")
    assert load(airline, "train").user_guidelines == "Be a customer."
    (airline / "user_guidelines.md").write_text("Mine first.")
    assert load(airline, "test").user_guidelines == "Mine first."


# --- tools --------------------------------------------------------------------------------------
def test_tau2_tool_set():
    env = env_at(0)
    try:
        names = [s["function"]["name"] for s in env.trajectory()["tools"]]
        assert "get_flight_status" in names and "think" not in names and len(names) == 14
        assert "get_flight_status" in env.messages[0]["content"]
        assert "unknown tool 'think'" in run_tool(env, "think", thought="x")["error"]
    finally:
        env.close()
    legacy = TauAirlineEnv(DATA_TAU2.parent / "data")
    try:
        legacy.reset(seed=0, options={"task_index": 0})
        names = [s["function"]["name"] for s in legacy.trajectory()["tools"]]
        assert "think" in names and "get_flight_status" not in names
    finally:
        legacy.close()


def test_tau2_errors_and_shapes():
    env = env_at(0)
    try:
        assert run_tool(env, "get_user_details", user_id="nobody")["error"] == "Error: User nobody not found"
        assert run_tool(env, "get_reservation_details", reservation_id="NOPE")["error"] == (
            "Error: Reservation NOPE not found")
        assert run_tool(env, "cancel_reservation", reservation_id="NOPE")["error"] == (
            "Error: Reservation NOPE not found")
        assert run_tool(env, "calculate", expression="2 ^ 3")["error"] == (
            "Error: Invalid characters in expression")
        user = json.loads(run_tool(env, "get_user_details", user_id="ada_park_101")["content"])
        assert next(iter(user)) == "user_id" and list(user["payment_methods"]["gift_card_1002"]) == [
            "source", "id", "amount"]
        reservation = json.loads(run_tool(env, "get_reservation_details", reservation_id="RES001")["content"])
        assert reservation["status"] is None and next(iter(reservation["flights"][0])) == "flight_number"
        airports = json.loads(run_tool(env, "list_all_airports")["content"])
        assert airports[0] == {"iata": "SFO", "city": "San Francisco"}
        (direct,) = json.loads(run_tool(env, "search_direct_flight", origin="JFK", destination="ORD",
                                        date="2024-05-20")["content"])
        assert direct["status"] == "available" and direct["date"] is None
        onestop = json.loads(run_tool(env, "search_onestop_flight", origin="JFK", destination="SEA",
                                      date="2024-05-20")["content"])
        assert [[leg["flight_number"] for leg in pair] for pair in onestop] == [["HAT200", "HAT300"]]
        assert [leg["date"] for leg in onestop[0]] == ["2024-05-20", "2024-05-20"]
        status = run_tool(env, "get_flight_status", flight_number="HAT400", date="2024-05-22")
        assert status["content"] == "delayed"
        assert run_tool(env, "get_flight_status", flight_number="HAT999", date="2024-05-22")["error"] == (
            "Error: Flight HAT999 not found")
        assert run_tool(env, "get_flight_status", flight_number="HAT400", date="2024-05-01")["error"] == (
            "Error: Flight HAT400 not found on date 2024-05-01")
    finally:
        env.close()


BOOKING = dict(user_id="ada_park_101", origin="JFK", destination="ORD", flight_type="one_way",
               cabin="economy",
               flights=[{"flight_number": "HAT200", "date": "2024-05-20"}],
               passengers=[{"first_name": "Ada", "last_name": "Park", "dob": "1985-02-03"}],
               total_baggages=0, nonfree_baggages=0, insurance="no")


def _economy_seats(env) -> int:
    (flight,) = json.loads(run_tool(env, "search_direct_flight", origin="JFK", destination="ORD",
                                    date="2024-05-20")["content"])
    return flight["available_seats"]["economy"]


def test_bookings_take_seats_and_a_fourth_is_refused():
    env = env_at(0)
    try:
        seats = _economy_seats(env)
        pay = [{"payment_id": "credit_card_1001", "amount": 80.0}]  # a whole float is taken as an int
        ids = [json.loads(run_tool(env, "book_reservation", **BOOKING, payment_methods=pay)["content"])
               for _ in range(3)]
        assert [r["reservation_id"] for r in ids] == ["HATHAT", "HATHAU", "HATHAV"]
        assert ids[0]["payment_history"] == [{"payment_id": "credit_card_1001", "amount": 80}]
        assert type(ids[0]["payment_history"][0]["amount"]) is int
        assert _economy_seats(env) == seats - 3
        assert run_tool(env, "book_reservation", **BOOKING, payment_methods=pay)["error"] == (
            "Error: Too many reservations")
        half = [{"payment_id": "credit_card_1001", "amount": 80.5}]
        assert "valid integer" in run_tool(env, "book_reservation", **BOOKING, payment_methods=half)["error"]
        wrong = [{"payment_id": "credit_card_1001", "amount": 70}]
        assert run_tool(env, "book_reservation", **{**BOOKING, "user_id": "ada_park_101"},
                        payment_methods=wrong)["error"] == "Error: Too many reservations"
    finally:
        env.close()


def test_certificates_are_floats_and_a_fourth_is_refused():
    env = env_at(0)
    try:
        for n in range(3):
            said = run_tool(env, "send_certificate", user_id="cole_vance_202", amount=50)["content"]
            number = 3221322 + n
            assert said == f"Certificate certificate_{number} added to user cole_vance_202 with amount 50."
        assert run_tool(env, "send_certificate", user_id="cole_vance_202", amount=50)["error"] == (
            "Error: Too many certificates")
        user = json.loads(run_tool(env, "get_user_details", user_id="cole_vance_202")["content"])
        assert user["payment_methods"]["certificate_3221322"] == {
            "source": "certificate", "id": "certificate_3221322", "amount": 50.0}
    finally:
        env.close()


def test_changing_flights_sets_the_cabin():
    env = env_at(7)
    try:
        changed = json.loads(run_tool(env, "update_reservation_flights", reservation_id="RES003",
                                      cabin="economy", payment_id="credit_card_2001",
                                      flights=[{"flight_number": "HAT200", "date": "2024-05-20"}])["content"])
        assert changed["cabin"] == "economy" and changed["flights"][0]["price"] == 80
        assert changed["payment_history"][-1] == {"payment_id": "credit_card_2001", "amount": -220}
        assert run_tool(env, "update_reservation_baggages", reservation_id="RES003", total_baggages=1,
                        nonfree_baggages=1, payment_id="certificate_2002")["error"] == (
            "Error: Certificate cannot be used to update reservation")
    finally:
        env.close()


# --- reward -------------------------------------------------------------------------------------
@pytest.mark.parametrize("index", range(N))
def test_gold_replay_scores_one(index):
    reward, info = play(gold_actions(BASE.tasks[index]), index)
    assert reward == 1.0, info.get("reward_info")


@pytest.mark.parametrize("index", range(N))
def test_doing_nothing_scores_zero_where_the_reference_would_not(index):
    task = BASE.tasks[index]
    reward, info = play(["Thank you for contacting us. Have a nice day."], index)
    unchanged = gold_state(BASE, task) == initial_state(BASE)
    pays = unchanged and not task.outputs and not ("ACTION" in task.reward_basis and task.actions)
    assert reward == float(pays), info.get("reward_info")


def test_action_basis_needs_the_gold_call_on_its_compare_args():
    other = call("get_user_details", user_id="cole_vance_202")
    reward, info = play([other, "You have a card, a gift card and a certificate."], 9)
    assert reward == 0.0 and info["reward_info"]["actions_matched"] == [False]
    right = call("get_user_details", user_id="ada_park_101")
    assert play([right, "You have a card, a gift card and a certificate."], 9)[0] == 1.0


def test_the_seats_a_booking_takes_count_in_the_database_comparison():
    """τ²-bench's gold takes seats off the flight; a τ-bench-style booking that left them would not match."""
    data, task = BASE, BASE.tasks[0]
    assert gold_state(data, task) != initial_state(data)
    env = env_at(0)
    try:
        for action in gold_actions(task)[:-1]:
            env.step(action)
        (flight,) = json.loads(run_tool(env, "search_direct_flight", origin="JFK", destination="SEA",
                                        date="2024-05-20")["content"])
        assert flight["available_seats"]["economy"] == 9
    finally:
        env.close()


def test_fork_copies_the_database_and_the_calls():
    env = env_at(9)
    try:
        (child,) = env.fork()
        child.step(call("get_user_details", user_id="ada_park_101"))
        assert child.step("Here they are.")[1] == 1.0
        assert env.step("Here they are.")[1] == 0.0  # the parent never looked the profile up
        child.close()
    finally:
        env.close()


# --- served -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base_url():
    config = ServerConfig(env_ids=(TAU,), env_kwargs={TAU: {"data_dir": str(DATA_TAU2), "split": "base"}})
    with serve_in_thread(config) as url:
        yield url


def test_served_over_http(base_url):
    remote = gym.make(TAU, base_url=base_url)
    local = TauAirlineEnv(DATA_TAU2, split="base")
    try:
        got = remote.reset(seed=0, options={"task_index": 0})
        want = local.reset(seed=0, options={"task_index": 0})
        assert got[0] == want[0] and got[1]["benchmark_task_id"] == "0"
        for action in gold_actions(local.data.tasks[0]):
            got, want = remote.step(action), local.step(action)
            assert got[:4] == want[:4]
        assert got[1] == 1.0 and got[2]
    finally:
        remote.close()
        local.close()
