"""The REST routes under ``/v1/lossless/``: one module per resource."""

__all__: list[str] = []
