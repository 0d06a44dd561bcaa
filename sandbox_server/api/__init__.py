"""The sandbox HTTP server: the FastAPI app and its routes over a backend.

Tenants, quotas, per-sandbox lanes and the admission of big bodies (server_state, admission,
limits), SandboxFusion's `/run_code` on wiped runner sandboxes (run_code), and the server's
Prometheus metrics.
"""
