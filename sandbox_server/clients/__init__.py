"""Clients of the sandbox server: of one server (`SandboxClient`, `AsyncSandboxClient`) and of several
behind one address (`SandboxCluster`, `AsyncSandboxCluster`, whose routing and replay are cluster_flows).
"""
