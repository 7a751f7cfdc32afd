"""The ``mcp`` releases this instrumentation supports.

2.x: the client session's ``send_request`` funnel and the server's context-tier middleware list (``Server.middleware``)
are the seams used; 1.x has neither in this shape and is not supported.
"""

_instruments = ("mcp >= 2.3",)
