"""Generic building blocks with no knowledge of lifecycle annotations.

The work queue and its rate limiters (client-go semantics), action budgets, the injectable
clock, backoff, logging setup and X.509 helpers. Everything here could serve another
controller unchanged; nothing here imports the controller, the API door or the servers.
"""
