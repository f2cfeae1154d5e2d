"""lossless over the network: the HTTP API and context proxy (:mod:`lossless.server.app`,
``lossless serve``) and the MCP server (:mod:`lossless.server.mcp_server`, ``lossless mcp``).

Needs the ``server`` extra (``pip install 'lossless[server]'``) and, for MCP, the ``mcp``
extra. Nothing is imported here, so ``lossless keys`` works without either.
"""

__all__: list[str] = []
