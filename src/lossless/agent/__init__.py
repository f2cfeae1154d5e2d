"""The agent runtime: the turn loop (:mod:`~lossless.agent.loop`), the agent tools over the
store (:mod:`~lossless.agent.tools`) and recovery from "context too long"
(:mod:`~lossless.agent.emergency`). It sits above the core, the store and the providers and
below the interfaces (CLI, server)."""

from lossless.agent.loop import ModelCallError, TurnResult, run_turn

__all__ = ["ModelCallError", "TurnResult", "run_turn"]
