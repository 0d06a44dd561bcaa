"""A standalone Docker sandbox server: containers as sessions."""
