"""Storage backends behind the :class:`~lossless.store.base.Store` protocol."""
