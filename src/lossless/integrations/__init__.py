"""Adapters that plug lossless into agent frameworks, each behind its own extra:

- :mod:`lossless.integrations.llamaindex` — ``LosslessMemoryBlock``, a long-term memory
  block for ``llama_index.core.memory.Memory`` (``pip install 'lossless[llamaindex]'``);
- :mod:`lossless.integrations.langchain` — ``LosslessChatMessageHistory``, a LangChain
  chat message history (``pip install 'lossless[langchain]'``).

Nothing is imported here, so ``import lossless`` never needs either framework.
"""
