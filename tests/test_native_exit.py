"""No thread is inside a model's native code when the interpreter exits.

A script that ended while the worker (a daemon thread) was inside ONNX Runtime died with
SIGABRT, "terminate called without an active exception": the thread, finding the
interpreter finalising as the call returned, was ended by ``pthread_exit``, whose forced
unwind through ONNX Runtime's C++ frames calls ``std::terminate`` (seen in gdb). The gate
in ``lossless.embed.native`` waits at exit for the calls in flight and parks latecomers.
The gate's rules are checked here in-process; the real thing by running scripts that end
while the worker embeds and daemon threads embed queries, with and without ``close()``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from lossless.core.errors import EmbedderError
from lossless.embed.native import NativeGate

SCRIPT = Path(__file__).parent / "data" / "embed_exit.py"


def _inside(gate: NativeGate, entered: threading.Event, release: threading.Event, reached: list[str]) -> None:
    try:
        with gate.call():
            reached.append("in")
            entered.set()
            release.wait(30)
    except EmbedderError:
        reached.append("refused")


def test_close_waits_for_the_call_in_flight() -> None:
    gate = NativeGate()
    entered, release, reached = threading.Event(), threading.Event(), []
    worker = threading.Thread(target=_inside, args=(gate, entered, release, reached), daemon=True)
    worker.start()
    assert entered.wait(10)
    assert gate.close(timeout=0.2) is False  # the call is still inside: close says so
    assert gate.inside == 1
    closer_done: list[bool] = []
    closer = threading.Thread(target=lambda: closer_done.append(gate.close(timeout=30)), daemon=True)
    closer.start()
    assert not closer_done  # still waiting
    release.set()
    closer.join(30)
    worker.join(30)
    assert closer_done == [True] and gate.inside == 0 and reached == ["in"]


def test_after_close_the_main_thread_is_refused_and_a_daemon_thread_parks_outside() -> None:
    gate = NativeGate()
    assert gate.close(timeout=1)
    with pytest.raises(EmbedderError, match="exiting"), gate.call():
        pytest.fail("the main thread entered a closed gate")
    entered, release, reached = threading.Event(), threading.Event(), []
    late = threading.Thread(target=_inside, args=(gate, entered, release, reached), daemon=True)
    late.start()
    assert not entered.wait(0.5)  # parked: it never got inside
    assert late.is_alive() and reached == [] and gate.inside == 0


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.parametrize("close", [False, True], ids=["exit-without-close", "close-then-exit"])
def test_ending_while_the_worker_and_queries_embed_never_aborts(tmp_path: Path, close: bool) -> None:
    """Seeds vary how much is added (2, 20 or 200 messages) and when the script ends (0 to
    1.5 s in), so the end lands in model loading, a worker batch or a query's embedding.
    The code before the gate aborted in 5 of 10 runs without close()."""
    runs = range(1, 9) if not close else range(1, 5)
    for seed in runs:
        db = ":memory:" if seed % 2 else str(tmp_path / f"s{seed}.db")
        proc = _run(str(SCRIPT), "--seed", str(seed), "--db", db, *(["--close"] if close else []))
        assert proc.returncode == 0 and "terminate called" not in proc.stderr, (seed, proc.returncode, proc.stderr[-2000:])
        assert proc.stdout.strip().endswith("exit-ok")


@pytest.mark.model
def test_a_model_that_fails_to_run_raises_and_recall_falls_back_to_keywords(tmp_path: Path) -> None:
    """A model whose weights are damaged: the worker's embedding and the query's fail with
    an error, assembly recalls by keywords, and the process ends normally."""
    from lossless.embed.local import packaged_model

    folder = tmp_path / "model"
    shutil.copytree(packaged_model(), folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: 4096])  # cut short: the header promises more
    script = textwrap.dedent(f"""
        import lossless
        from lossless.embed.local import LocalEmbedder
        mem = lossless.open({str(tmp_path / "s.db")!r}, embedder=LocalEmbedder({str(folder)!r}),
                            context_window=2048, fresh_tail_count=4)
        conv = mem.conversation("c")
        conv.add_many([{{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"turn {{i}}: we talked about the weather and the garden."}} for i in range(60)])
        conv.add_many([{{"role": "user", "content": "Service-7 listens on port 5007, remember that."}}])
        conv.add_many([{{"role": "assistant", "content": f"noted {{i}}, the garden again."}} for i in range(40)])
        ctx = conv.assemble(budget_tokens=1024, query="which port does service-7 use?")
        print("RECALLED" if any("5007" in str(m["content"]) for m in ctx.messages) else "MISSED")
        try:
            conv.search("service-7 port", mode="semantic")
        except lossless.LosslessError as exc:
            print("SEMANTIC-ERROR", type(exc).__name__)
    """)
    proc = _run("-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RECALLED" in proc.stdout and "SEMANTIC-ERROR EmbedderError" in proc.stdout, proc.stdout + proc.stderr[-2000:]
