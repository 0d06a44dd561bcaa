"""TauAirline-v0's tool table: the benchmark's tools, each answered by the episode's desk.

The tools' names, descriptions and arguments are τ-bench's (τ²-bench's have `get_flight_status`, no `think`);
`TauAirlineEnv` offers the ones its data's benchmark has (`env.layout_tools`) and owns the episode.
"""

from __future__ import annotations

from agentrl.core import ToolEnv, tool
from agentrl.tau_airline import desk as d
from agentrl.tau_airline.tau2_desk import Tau2Desk


class AirlineTools(ToolEnv):
    """Every tool of both benchmarks, each the desk method of the same name; a hand-off is also
    recorded for the reward (`transferred`, `summaries`)."""

    # set by `TauAirlineEnv` at every reset
    desk: d.Desk
    transferred: bool
    summaries: list[str]  # what each hand-off told the human agent

    @tool("Book a reservation.")
    def book_reservation(self, args: d.BookReservationArgs) -> str:
        return self.desk.book_reservation(args)

    @tool("Calculate the result of a mathematical expression.")
    def calculate(self, args: d.ExpressionArgs) -> str:
        return self.desk.calculate(args)

    @tool("Cancel the whole reservation.")
    def cancel_reservation(self, args: d.ReservationArgs) -> str:
        return self.desk.cancel_reservation(args)

    @tool("Get the status of a flight on a date.")
    def get_flight_status(self, args: d.FlightRef) -> str:
        assert isinstance(self.desk, Tau2Desk), "a τ²-bench tool: offered with τ²-bench's data only"
        return self.desk.get_flight_status(args)

    @tool("Get the details of a reservation.")
    def get_reservation_details(self, args: d.ReservationArgs) -> str:
        return self.desk.get_reservation_details(args)

    @tool("Get the details of an user, including their reservations.")
    def get_user_details(self, args: d.UserArgs) -> str:
        return self.desk.get_user_details(args)

    @tool("List all airports and their cities.")
    def list_all_airports(self) -> str:
        return self.desk.list_all_airports()

    @tool("Search direct flights between two cities on a specific date.")
    def search_direct_flight(self, args: d.SearchArgs) -> str:
        return self.desk.search_direct_flight(args)

    @tool("Search one-stop flights between two cities on a specific date.")
    def search_onestop_flight(self, args: d.SearchArgs) -> str:
        return self.desk.search_onestop_flight(args)

    @tool("Send a certificate to a user. Be careful!")
    def send_certificate(self, args: d.CertificateArgs) -> str:
        return self.desk.send_certificate(args)

    @tool("Think about something: nothing is looked up or changed, the thought is only logged.")
    def think(self, args: d.ThinkArgs) -> str:
        return self.desk.think(args)

    @tool("Transfer the customer to a human agent with a summary of their issue: only when the customer asks "
          "for one, or their issue cannot be resolved with the available tools.", ends_episode=True)
    def transfer_to_human_agents(self, args: d.TransferArgs) -> str:
        self.transferred = True
        self.summaries.append(args.summary)
        return self.desk.transfer_to_human_agents(args)

    @tool("Update the baggage information of a reservation.")
    def update_reservation_baggages(self, args: d.BaggageArgs) -> str:
        return self.desk.update_reservation_baggages(args)

    @tool("Update the flight information of a reservation.")
    def update_reservation_flights(self, args: d.UpdateFlightsArgs) -> str:
        return self.desk.update_reservation_flights(args)

    @tool("Update the passenger information of a reservation.")
    def update_reservation_passengers(self, args: d.UpdatePassengersArgs) -> str:
        return self.desk.update_reservation_passengers(args)
