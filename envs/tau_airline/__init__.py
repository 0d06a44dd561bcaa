"""TauAirline-v0: τ-bench's airline domain over a real SQLite database, with the customer in the loop."""
