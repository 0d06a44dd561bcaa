"""The sandbox API's shapes, shared by the server, both clients and the in-process backends.

The typed requests and answers (models), the errors each with its HTTP status and `kind`, the
languages `run_code` knows and what a file path may be (what keeps the OpenAPI document true is the
serving kit's, `agentrl.serving.openapi`).
Nothing here starts a sandbox or serves a request, so every other room imports it and it imports
none of them.
"""
