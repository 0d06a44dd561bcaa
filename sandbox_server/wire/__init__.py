"""The sandbox API's shapes, shared by the server, both clients and the in-process backends.

The typed requests and answers (models), the errors each with its HTTP status and `kind`, the
languages `run_code` knows, what a file path may be, and what keeps the OpenAPI document true.
Nothing here starts a sandbox or serves a request, so every other room imports it and it imports
none of them.
"""
