# Invented tasks in the layout of tau-bench's airline task list (read with ast, never imported).
from tau_bench.types import Action, Task

TASKS = [
    Task(
        annotator="0",
        user_id="ada_park_101",
        instruction="Your user id is ada_park_101. Book a one-way economy flight from New York to Seattle on May 20 for yourself. Pay with your certificate and the rest with your gift card. No bags, no insurance.",
        actions=[
            Action(
                name="book_reservation",
                kwargs={
                    "user_id": "ada_park_101",
                    "origin": "JFK",
                    "destination": "SEA",
                    "flight_type": "one_way",
                    "cabin": "economy",
                    "flights": [{"flight_number": "HAT100", "date": "2024-05-20"}],
                    "passengers": [{"first_name": "Ada", "last_name": "Park", "dob": "1985-02-03"}],
                    "payment_methods": [
                        {"payment_id": "certificate_1003", "amount": 100},
                        {"payment_id": "gift_card_1002", "amount": 50},
                    ],
                    "total_baggages": 0,
                    "nonfree_baggages": 0,
                    "insurance": "no",
                },
            )
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="cole_vance_202",
        instruction="Your user id is cole_vance_202. Cancel your Chicago trip, reservation RES003, booked less than a day ago.",
        actions=[
            Action(name="get_reservation_details", kwargs={"reservation_id": "RES003"}),
            Action(name="cancel_reservation", kwargs={"reservation_id": "RES003"}),
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="ada_park_101",
        instruction="Your user id is ada_park_101. Add two checked bags to reservation RES001 (three in all), paying with your gift card.",
        actions=[
            Action(
                name="update_reservation_baggages",
                kwargs={"reservation_id": "RES001", "total_baggages": 3, "nonfree_baggages": 1, "payment_id": "gift_card_1002"},
            )
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="ada_park_101",
        instruction="Your user id is ada_park_101. Ask how much your two reservations cost in total.",
        actions=[
            Action(name="get_reservation_details", kwargs={"reservation_id": "RES001"}),
            Action(name="get_reservation_details", kwargs={"reservation_id": "RES002"}),
            Action(name="calculate", kwargs={"expression": "150 + 300"}),
        ],
        outputs=["450"],
    ),
    Task(
        annotator="0",
        user_id="cole_vance_202",
        instruction="Your user id is cole_vance_202. Cancel reservation RES004; you have no insurance and booked it weeks ago. Insist once, then accept a refusal.",
        actions=[
            Action(name="get_reservation_details", kwargs={"reservation_id": "RES004"}),
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="cole_vance_202",
        instruction="Your user id is cole_vance_202. You lost a bag on a past trip and want to talk to a human about compensation.",
        actions=[
            Action(name="get_user_details", kwargs={"user_id": "cole_vance_202"}),
            Action(name="transfer_to_human_agents", kwargs={"summary": "Lost bag, wants a human about compensation."}),
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="ada_park_101",
        instruction="Your user id is ada_park_101. Your son's date of birth on RES002 is wrong: it is 2010-06-08. You also complain about a delay and accept a certificate of 50 dollars.",
        actions=[
            Action(
                name="update_reservation_passengers",
                kwargs={
                    "reservation_id": "RES002",
                    "passengers": [
                        {"first_name": "Ada", "last_name": "Park", "dob": "1985-02-03"},
                        {"first_name": "Ben", "last_name": "Park", "dob": "2010-06-08"},
                    ],
                },
            ),
            Action(name="send_certificate", kwargs={"user_id": "ada_park_101", "amount": 50}),
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="cole_vance_202",
        instruction="Your user id is cole_vance_202. Move reservation RES003 to the same flight in economy, refund to your card.",
        actions=[
            Action(
                name="update_reservation_flights",
                kwargs={
                    "reservation_id": "RES003",
                    "cabin": "economy",
                    "flights": [{"flight_number": "HAT200", "date": "2024-05-20"}],
                    "payment_id": "credit_card_2001",
                },
            )
        ],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="ada_park_101",
        instruction="Your user id is ada_park_101. Cancel your trip from Seattle to New York and get a full refund. You booked it weeks ago in basic economy without insurance; insist, then accept a refusal.",
        actions=[],
        outputs=[],
    ),
    Task(
        annotator="0",
        user_id="cole_vance_202",
        instruction="Your user id is cole_vance_202. You want to change the trip in RES004 to end in Las Vegas instead of Seattle.",
        actions=[
            Action(name="transfer_to_human_agents", kwargs={"summary": "Wants to change the destination of RES004."}),
        ],
        outputs=[],
    ),
]
