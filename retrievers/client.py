"""The retriever interface over HTTP: a client of any Search-R1 `/retrieve` server."""

from __future__ import annotations

import httpx

from agentrl.retrievers.base import Hit, Retriever


class HttpRetriever(Retriever):
    backend = "http"

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        if not self.url.endswith("/retrieve"):
            self.url += "/retrieve"
        self.client = httpx.Client(timeout=timeout)

    def search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        if not queries:
            return []
        response = self.client.post(self.url, json={"queries": queries, "topk": k, "return_scores": True})
        response.raise_for_status()
        return [
            [
                Hit(
                    str(item["document"]["id"]),
                    str(item["document"]["contents"]),
                    float(item.get("score", 0.0)),
                )
                for item in per_query
            ]
            for per_query in response.json()["result"]
        ]

    def close(self) -> None:
        self.client.close()
