"""Every airline tool against the invented data: results and error texts as τ-bench's tools give
them, and an error changes nothing."""

from __future__ import annotations

import json

import pytest
from tau_helpers import DATA, call, responses, run_tool

from agentrl.tau_airline.database import state_key
from agentrl.tau_airline.env import TauAirlineEnv

USERS = json.loads((DATA / "users.json").read_text())
RESERVATIONS = json.loads((DATA / "reservations.json").read_text())
ADA = {"first_name": "Ada", "last_name": "Park", "dob": "1985-02-03"}
BEN = {"first_name": "Ben", "last_name": "Park", "dob": "2010-06-07"}


@pytest.fixture
def env():
    env = TauAirlineEnv(DATA)
    env.reset(seed=0, options={"task_index": 0})
    yield env
    env.close()


def content(response: dict) -> str:
    assert "content" in response, response
    return response["content"]


def error(response: dict) -> str:
    assert "error" in response, response
    return response["error"]


def booking(**changes):
    args = {
        "user_id": "ada_park_101",
        "origin": "JFK",
        "destination": "SEA",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT100", "date": "2024-05-20"}],
        "passengers": [ADA],
        "payment_methods": [{"payment_id": "credit_card_1001", "amount": 150}],
        "total_baggages": 0,
        "nonfree_baggages": 0,
        "insurance": "no",
    }
    return {**args, **changes}


def test_lookups(env):
    assert (
        json.loads(content(run_tool(env, "get_user_details", user_id="ada_park_101")))
        == USERS["ada_park_101"]
    )
    assert error(run_tool(env, "get_user_details", user_id="nobody")) == "Error: user not found"
    assert (
        json.loads(content(run_tool(env, "get_reservation_details", reservation_id="RES002")))
        == RESERVATIONS["RES002"]
    )
    # sic: the benchmark's text for a missing reservation
    assert error(run_tool(env, "get_reservation_details", reservation_id="NOPE00")) == "Error: user not found"
    airports = json.loads(content(run_tool(env, "list_all_airports")))
    assert len(airports) == 20 and airports["JFK"] == "New York" and airports["LGA"] == "LaGuardia"
    assert content(run_tool(env, "think", thought="hmm")) == ""


def test_searches(env):
    direct = json.loads(
        content(run_tool(env, "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-20"))
    )
    assert direct == [
        {
            "flight_number": "HAT100",
            "origin": "JFK",
            "destination": "SEA",
            "scheduled_departure_time_est": "10:00:00",
            "scheduled_arrival_time_est": "13:00:00",
            "status": "available",
            "available_seats": {"basic_economy": 10, "economy": 10, "business": 5},
            "prices": {"basic_economy": 100, "economy": 150, "business": 400},
        }
    ]
    landed = run_tool(env, "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-15")
    assert json.loads(content(landed)) == []
    onestop = json.loads(
        content(run_tool(env, "search_onestop_flight", origin="JFK", destination="SEA", date="2024-05-20"))
    )
    assert [[leg["flight_number"], leg["date"]] for leg in onestop[0]] == [
        ["HAT200", "2024-05-20"],
        ["HAT300", "2024-05-20"],
    ]
    assert len(onestop) == 1 and onestop[0][1]["prices"]["economy"] == 90
    # a first leg landing the next day: the second leg is looked up on the 21st, then listed with the
    # 20th's fields, which it lacks: the benchmark's search fails with the missing key
    assert (
        error(run_tool(env, "search_onestop_flight", origin="JFK", destination="MIA", date="2024-05-20"))
        == "Error: '2024-05-20'"
    )


@pytest.mark.parametrize(
    "expression", ["150 + 300", "2/3", "(1 + 2) * 3.5 - -1", "1/0", "2 +", "2 ** 3", "import os", "1e3"]
)
def test_calculate_matches_python_arithmetic(env, expression):
    if not all(c in "0123456789+-*/(). " for c in expression):
        expected = "Error: invalid characters in expression"
    else:
        try:
            expected = str(round(float(eval(expression, {"__builtins__": None}, {})), 2))  # the reference
        except Exception as exc:
            expected = f"Error: {exc}"
    response = run_tool(env, "calculate", expression=expression)
    assert response.get("content", response.get("error")) == expected


def test_book_reservation(env):
    booked = json.loads(
        content(
            run_tool(
                env,
                "book_reservation",
                **booking(
                    payment_methods=[
                        {"payment_id": "certificate_1003", "amount": 100},
                        {"payment_id": "gift_card_1002", "amount": 50},
                    ]
                ),
            )
        )
    )
    assert booked["reservation_id"] == "HATHAT" and booked["created_at"] == "2024-05-15T15:00:00"
    assert booked["flights"] == [
        {"origin": "JFK", "destination": "SEA", "flight_number": "HAT100", "date": "2024-05-20", "price": 150}
    ]
    user = json.loads(content(run_tool(env, "get_user_details", user_id="ada_park_101")))
    assert "certificate_1003" not in user["payment_methods"]  # a certificate is spent whole
    assert user["payment_methods"]["gift_card_1002"]["amount"] == 250
    assert user["reservations"] == ["RES001", "RES002", "HATHAT"]
    second = run_tool(
        env,
        "book_reservation",
        **booking(
            insurance="yes",
            nonfree_baggages=1,
            payment_methods=[{"payment_id": "credit_card_1001", "amount": 230}],
        ),
    )
    assert json.loads(content(second))["reservation_id"] == "HATHAU"  # 150 + 30 insurance + 50 bag
    flights = json.loads(
        content(run_tool(env, "search_direct_flight", origin="JFK", destination="SEA", date="2024-05-20"))
    )
    assert flights[0]["available_seats"]["economy"] == 10  # as in the benchmark: no seat is taken


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"user_id": "nobody"}, "Error: user not found"),
        ({"flights": [{"flight_number": "HAT999", "date": "2024-05-20"}]}, "Error: flight HAT999 not found"),
        (
            {"flights": [{"flight_number": "HAT100", "date": "2024-06-01"}]},
            "Error: flight HAT100 not found on date 2024-06-01",
        ),
        (
            {"flights": [{"flight_number": "HAT100", "date": "2024-05-15"}]},
            "Error: flight HAT100 not available on date 2024-05-15",
        ),
        (
            {"flights": [{"flight_number": "HAT100", "date": "2024-05-21"}], "passengers": [ADA, BEN]},
            "Error: not enough seats on flight HAT100",
        ),
        (
            {"payment_methods": [{"payment_id": "credit_card_9", "amount": 150}]},
            "Error: payment method credit_card_9 not found",
        ),
        (
            {"payment_methods": [{"payment_id": "certificate_1003", "amount": 150}]},
            "Error: not enough balance in payment method certificate_1003",
        ),
        (
            {"payment_methods": [{"payment_id": "credit_card_1001", "amount": 100}]},
            "Error: payment amount does not add up, total price is 150, but paid 100",
        ),
    ],
)
def test_book_reservation_errors_change_nothing(env, changes, message):
    before = state_key(env._db.session)
    assert error(run_tool(env, "book_reservation", **booking(**changes))) == message
    assert state_key(env._db.session) == before


def test_cancel_reservation(env):
    cancelled = json.loads(content(run_tool(env, "cancel_reservation", reservation_id="RES002")))
    assert cancelled["status"] == "cancelled"
    assert cancelled["payment_history"] == [
        {"payment_id": "gift_card_1002", "amount": 300},
        {"payment_id": "gift_card_1002", "amount": -300},
    ]
    assert (
        error(run_tool(env, "cancel_reservation", reservation_id="NOPE00")) == "Error: reservation not found"
    )


def test_update_baggages(env):
    updated = json.loads(
        content(
            run_tool(
                env,
                "update_reservation_baggages",
                reservation_id="RES001",
                total_baggages=3,
                nonfree_baggages=2,
                payment_id="gift_card_1002",
            )
        )
    )
    assert (updated["total_baggages"], updated["nonfree_baggages"]) == (3, 2)
    assert updated["payment_history"][-1] == {"payment_id": "gift_card_1002", "amount": 100}
    user = json.loads(content(run_tool(env, "get_user_details", user_id="ada_park_101")))
    assert user["payment_methods"]["gift_card_1002"]["amount"] == 200
    fewer = json.loads(
        content(
            run_tool(
                env,
                "update_reservation_baggages",
                reservation_id="RES001",
                total_baggages=1,
                nonfree_baggages=0,
                payment_id="credit_card_1001",
            )
        )
    )
    assert len(fewer["payment_history"]) == 2  # nothing to pay: no payment line
    before = state_key(env._db.session)
    for payment_id, message in [
        ("certificate_1003", "Error: certificate cannot be used to update reservation"),
        ("credit_card_9", "Error: payment method not found"),
    ]:
        assert (
            error(
                run_tool(
                    env,
                    "update_reservation_baggages",
                    reservation_id="RES001",
                    total_baggages=9,
                    nonfree_baggages=9,
                    payment_id=payment_id,
                )
            )
            == message
        )
    assert (
        error(
            run_tool(
                env,
                "update_reservation_baggages",
                reservation_id="RES001",
                total_baggages=9,
                nonfree_baggages=9,
                payment_id="gift_card_1002",
            )
        )
        == "Error: gift card balance is not enough"
    )
    assert (
        error(
            run_tool(
                env,
                "update_reservation_baggages",
                reservation_id="NOPE00",
                total_baggages=1,
                nonfree_baggages=0,
                payment_id="gift_card_1002",
            )
        )
        == "Error: reservation not found"
    )
    assert state_key(env._db.session) == before


def test_update_flights(env):
    updated = json.loads(
        content(
            run_tool(
                env,
                "update_reservation_flights",
                reservation_id="RES003",
                cabin="economy",
                flights=[{"flight_number": "HAT200", "date": "2024-05-20"}],
                payment_id="credit_card_2001",
            )
        )
    )
    assert updated["flights"][0]["price"] == 80
    assert updated["payment_history"][-1] == {"payment_id": "credit_card_2001", "amount": -220}
    assert updated["cabin"] == "business"  # as in the benchmark, the cabin field is left as it was
    same = json.loads(
        content(
            run_tool(
                env,
                "update_reservation_flights",
                reservation_id="RES001",
                cabin="economy",
                flights=[{"flight_number": "HAT100", "date": "2024-05-20"}],
                payment_id="credit_card_1001",
            )
        )
    )
    assert len(same["payment_history"]) == 1  # an unchanged segment keeps its price: nothing to pay
    assert (
        error(
            run_tool(
                env,
                "update_reservation_flights",
                reservation_id="RES001",
                cabin="business",
                flights=[{"flight_number": "HAT100", "date": "2024-05-20"}],
                payment_id="certificate_1003",
            )
        )
        == "Error: certificate cannot be used to update reservation"
    )
    assert (
        error(
            run_tool(
                env,
                "update_reservation_flights",
                reservation_id="RES002",
                cabin="business",
                flights=[{"flight_number": "HAT400", "date": "2024-05-20"}],
                payment_id="gift_card_1002",
            )
        )
        == "Error: gift card balance is not enough"
    )
    assert (
        error(
            run_tool(
                env,
                "update_reservation_flights",
                reservation_id="RES001",
                cabin="economy",
                flights=[{"flight_number": "HAT300", "date": "2024-05-21"}],
                payment_id="credit_card_1001",
            )
        )
        == "Error: flight HAT300 not available on date 2024-05-21"
    )


def test_update_passengers(env):
    changed = {**BEN, "dob": "2010-06-08"}
    updated = json.loads(
        content(
            run_tool(env, "update_reservation_passengers", reservation_id="RES002", passengers=[ADA, changed])
        )
    )
    assert updated["passengers"] == [ADA, changed]
    assert (
        error(run_tool(env, "update_reservation_passengers", reservation_id="RES002", passengers=[ADA]))
        == "Error: number of passengers does not match"
    )
    assert (
        error(run_tool(env, "update_reservation_passengers", reservation_id="NOPE00", passengers=[ADA]))
        == "Error: reservation not found"
    )


def test_send_certificate(env):
    for expected in ("certificate_3221322", "certificate_3221323", "certificate_3221324"):
        assert content(run_tool(env, "send_certificate", user_id="cole_vance_202", amount=50)) == (
            f"Certificate {expected} added to user cole_vance_202 with amount 50."
        )
    assert error(run_tool(env, "send_certificate", user_id="cole_vance_202", amount=50)).startswith("Error:")
    assert error(run_tool(env, "send_certificate", user_id="nobody", amount=5)) == "Error: user not found"
    methods = json.loads(content(run_tool(env, "get_user_details", user_id="cole_vance_202")))[
        "payment_methods"
    ]
    assert methods["certificate_3221322"] == {
        "source": "certificate",
        "amount": 50,
        "id": "certificate_3221322",
    }


def test_malformed_calls_are_observations(env):
    observation, reward, terminated, truncated, info = env.step(call("book_reservation", user_id="x"))
    (response,) = responses(observation)
    assert "origin" in response["error"] and not terminated and info["invalid_calls"] == 1
    observation, *_ = env.step(call("fly_me", to="moon"))
    assert "unknown tool 'fly_me'" in responses(observation)[0]["error"]
    observation, *_ = env.step("<tool_call>{not json</tool_call>")
    assert responses(observation)[0]["name"] == "invalid_call"


def test_transfer_ends_the_episode(env):
    observation, reward, terminated, truncated, info = env.step(
        call("transfer_to_human_agents", summary="help")
    )
    assert responses(observation)[0]["content"] == "Transfer successful" and terminated
