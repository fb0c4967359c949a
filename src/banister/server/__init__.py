"""An OpenAI-compatible HTTP server over the engine: ``banister serve`` (needs the ``server`` extra).

:func:`~banister.server.app.create_app` builds the ASGI app over an :class:`~banister.engine.Engine`;
:class:`~banister.server.settings.ServerSettings` holds its limits. The web framework is imported
only by ``banister.server.app``, so this package and its CLI load without it.
"""

from banister.server.settings import ServerSettings

__all__ = ["ServerSettings"]
