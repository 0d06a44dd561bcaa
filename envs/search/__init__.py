"""Search-v0: Search-R1's protocol over real retrievers."""
