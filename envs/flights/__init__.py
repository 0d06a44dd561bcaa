"""Flights-v0: a flight-booking world in SQL."""
