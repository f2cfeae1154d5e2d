"""OpenAIEmbedder against a real HTTP server that speaks the OpenAI wire format."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import openai
import pytest

from lossless.core.errors import LosslessError, MissingDependencyError, ValidationError
from lossless.embed.base import Embedder
from lossless.embed.openai import OpenAIEmbedder
from tests.fake_openai import FakeOpenAIServer, fake_embedding, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

MakeEmbedder = Callable[..., OpenAIEmbedder]


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_embedder(fake_openai: FakeOpenAIServer) -> Iterator[MakeEmbedder]:
    """Builds embedders pointed at the fake server (unless told otherwise) and closes
    them all afterwards."""
    made: list[OpenAIEmbedder] = []

    def make(model: str = "text-embedding-3-small", **kwargs: Any) -> OpenAIEmbedder:
        kwargs.setdefault("base_url", fake_openai.base_url)
        embedder = OpenAIEmbedder(model, **kwargs)
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        embedder.close()


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _expected(texts: list[str], dim: int = 64) -> np.ndarray[Any, Any]:
    return np.array([fake_embedding(t or " ", dim) for t in texts], dtype=np.float32)


# -- vectors ---------------------------------------------------------------------------


def test_shapes_dtype_and_unit_rows(make_embedder: MakeEmbedder) -> None:
    embedder = make_embedder()
    texts = ["the cat sat on the mat", "the cat sat on a hat", "quarterly tax filing"]
    vectors = embedder.embed(texts)
    assert isinstance(embedder, Embedder)
    assert vectors.shape == (3, 64)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    # The fake's bag of words makes shared words count: cats beat taxes.
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    np.testing.assert_allclose(vectors, _expected(texts), atol=1e-6)


def test_order_preserved_across_batches(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    embedder = make_embedder(batch_size=3, dim=64)
    texts = [f"message number {i} about topic{i}" for i in range(10)]
    vectors = embedder.embed(texts)
    np.testing.assert_allclose(vectors, _expected(texts), atol=1e-6)
    sent = [r.body["input"] for r in fake_openai.embedding_requests()]
    assert sent == [texts[0:3], texts[3:6], texts[6:9], texts[9:10]]


def test_response_sorted_by_index(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    # A server may answer out of order, and with plain floats even when the SDK asked
    # for base64 (older Ollama does): both must come back in input order.
    texts = ["alpha beta", "gamma delta", "epsilon"]
    fake_openai.respond_next(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": fake_embedding(texts[i])}
                for i in (2, 0, 1)
            ],
            "model": "m",
            "usage": {"prompt_tokens": 5, "total_tokens": 5},
        }
    )
    vectors = make_embedder(dim=64).embed(texts)
    np.testing.assert_allclose(vectors, _expected(texts), atol=1e-6)


def test_sdk_asks_for_base64_and_the_fake_answers_it(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    make_embedder(dim=64).embed(["hello"])
    assert fake_openai.requests[-1].body["encoding_format"] == "base64"
    # And the float format, which the SDK uses when asked explicitly.
    with openai.OpenAI(base_url=fake_openai.base_url, api_key="k") as client:
        response = client.embeddings.create(model="m", input="hello", encoding_format="float")
    assert response.data[0].embedding == pytest.approx(fake_embedding("hello"))


def test_empty_strings_are_sent_as_a_space(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    vectors = make_embedder(dim=64).embed(["", "word"])
    assert vectors.shape == (2, 64)
    assert fake_openai.requests[-1].body["input"] == [" ", "word"]


def test_empty_input_makes_no_request(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    assert make_embedder(dim=64).embed([]).shape == (0, 64)
    learned = make_embedder()
    learned.embed(["learn the width"])
    count = len(fake_openai.requests)
    assert learned.embed([]).shape == (0, 64)
    # Not knowing the width yet is no reason to go to the network for nothing.
    assert make_embedder().embed([]).shape == (0, 0)
    assert len(fake_openai.requests) == count


def test_one_string_is_refused(make_embedder: MakeEmbedder) -> None:
    with pytest.raises(ValidationError, match="sequence of texts"):
        make_embedder(dim=64).embed("just one")


# -- dim -------------------------------------------------------------------------------


def test_dim_is_learned_lazily_with_one_probe(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    embedder = make_embedder()
    assert fake_openai.requests == []  # constructing never calls out
    assert embedder.dim == 64
    assert len(fake_openai.requests) == 1
    assert embedder.dim == 64
    embedder.embed(["a", "b"])
    assert len(fake_openai.requests) == 2


def test_dim_is_learned_from_embed_without_a_probe(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    embedder = make_embedder()
    embedder.embed(["first texts"])
    assert embedder.dim == 64
    assert len(fake_openai.requests) == 1


def test_dimensions_passed_through_and_part_of_the_cache_key(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    short = make_embedder(dimensions=16)
    assert short.dim == 16
    assert fake_openai.requests == []
    assert short.embed(["some words"]).shape == (1, 16)
    assert fake_openai.requests[-1].body["dimensions"] == 16
    assert fake_openai.requests[-1].body["model"] == "text-embedding-3-small"
    # Shortened vectors differ from full ones, so they must not share cache entries.
    assert short.model != make_embedder().model


def test_known_openai_model_needs_no_probe() -> None:
    with OpenAIEmbedder("text-embedding-3-large", api_key="sk-test") as embedder:
        assert embedder.dim == 3072


def test_dimension_mismatch_is_an_error(make_embedder: MakeEmbedder) -> None:
    with pytest.raises(LosslessError, match=r"dimension mismatch.*64.*expected 32"):
        make_embedder(dim=32).embed(["hello"])


def test_ragged_vectors_are_an_error(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond_next(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]},
                {"object": "embedding", "index": 1, "embedding": [0.1, 0.2]},
            ],
            "model": "m",
            "usage": {"prompt_tokens": 2, "total_tokens": 2},
        }
    )
    with pytest.raises(LosslessError, match="dimension mismatch"):
        make_embedder().embed(["a", "b"])


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_arguments(bad: int) -> None:
    for kwargs in ({"dim": bad}, {"dimensions": bad}, {"batch_size": bad}):
        with pytest.raises(ValidationError):
            OpenAIEmbedder(base_url="http://127.0.0.1:1/v1", **kwargs)  # type: ignore[arg-type]


# -- configuration and provider --------------------------------------------------------


def test_env_vars_are_honoured(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with OpenAIEmbedder() as embedder:
        assert embedder.provider == f"openai-compatible:{fake_openai.base_url}"
        embedder.embed(["hi"])
    assert fake_openai.requests[-1].headers["authorization"] == "Bearer sk-from-env"


def test_arguments_beat_env_vars(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_closed_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with OpenAIEmbedder(base_url=fake_openai.base_url, api_key="sk-arg") as embedder:
        embedder.embed(["hi"])
    assert fake_openai.requests[-1].headers["authorization"] == "Bearer sk-arg"


def test_local_server_needs_no_key(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    make_embedder(dim=64).embed(["hi"])
    assert fake_openai.requests[-1].headers["authorization"] == "Bearer not-needed"


def test_openai_without_a_key_is_refused() -> None:
    with pytest.raises(LosslessError, match="OPENAI_API_KEY"):
        OpenAIEmbedder()


def test_provider_names_the_server_without_credentials() -> None:
    with (
        OpenAIEmbedder(api_key="sk-test") as official,
        OpenAIEmbedder(base_url="https://API.openai.com/v1/", api_key="sk-test") as same,
        OpenAIEmbedder(base_url="http://localhost:11434/v1") as ollama,
        OpenAIEmbedder(base_url="http://localhost:8000/v1") as vllm,
        OpenAIEmbedder(
            base_url="https://alice:s3cret@gpu.example.com:8443/v1/?api-key=t0ken#frag"
        ) as private,
    ):
        assert official.provider == same.provider == "openai"
        assert ollama.provider == "openai-compatible:http://localhost:11434/v1"
        assert ollama.provider != vllm.provider
        assert private.provider == "openai-compatible:https://gpu.example.com:8443/v1"
        assert "s3cret" not in repr(private) and "t0ken" not in repr(private)
        assert official.model == ollama.model == "text-embedding-3-small"


# -- failures --------------------------------------------------------------------------


def test_a_500_is_retried(make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fail_next(1, status=500)
    vectors = make_embedder(dim=64, max_retries=2).embed(["retry me"])
    assert vectors.shape == (1, 64)
    bodies = [r.body for r in fake_openai.requests]
    assert len(bodies) == 2 and bodies[0] == bodies[1]


def test_persistent_failure_names_endpoint_model_and_cause(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.fail_next(3, status=503, message="overloaded, try later")
    embedder = make_embedder("nomic-embed-text", dim=64, max_retries=2)
    with pytest.raises(LosslessError) as info:
        embedder.embed(["doomed"])
    message = str(info.value)
    assert "nomic-embed-text" in message
    assert fake_openai.base_url in message
    assert "HTTP 503" in message and "overloaded, try later" in message
    assert len(fake_openai.requests) == 3  # the first try and two retries
    assert isinstance(info.value.__cause__, openai.APIStatusError)


def test_a_400_is_not_retried(make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fail_next(1, status=400, message="input too long")
    with pytest.raises(LosslessError, match=r"HTTP 400: input too long"):
        make_embedder(dim=64, max_retries=2).embed(["x"])
    assert len(fake_openai.requests) == 1


def test_connection_refused_is_a_clear_error(make_embedder: MakeEmbedder) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    embedder = make_embedder("bge-m3", base_url=url, dim=8, max_retries=0)
    with pytest.raises(
        LosslessError, match=r"'bge-m3' at http://127\.0\.0\.1:\d+/v1.*cannot connect"
    ):
        embedder.embed(["hello"])


def test_timeout_is_a_clear_error(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.delay = 5.0  # cut short when the server closes
    embedder = make_embedder(dim=64, timeout=0.2, max_retries=0)
    with pytest.raises(LosslessError, match=r"timed out after 0\.2s"):
        embedder.embed(["slow"])


@pytest.mark.parametrize("returned", [0, 1, 3])
def test_wrong_number_of_vectors(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer, returned: int
) -> None:
    fake_openai.respond_next(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": fake_embedding(str(i))}
                for i in range(returned)
            ],
            "model": "m",
            "usage": {"prompt_tokens": 2, "total_tokens": 2},
        }
    )
    with pytest.raises(LosslessError, match="text-embedding-3-small"):
        make_embedder(dim=64).embed(["one", "two"])


def test_duplicate_indexes_are_an_error(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond_next(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": 0, "embedding": fake_embedding("a")},
                {"object": "embedding", "index": 0, "embedding": fake_embedding("b")},
            ],
            "model": "m",
            "usage": {"prompt_tokens": 2, "total_tokens": 2},
        }
    )
    with pytest.raises(LosslessError, match="indexes"):
        make_embedder(dim=64).embed(["a", "b"])


def test_non_json_answer_is_an_error(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond_next(b"<html>proxy error</html>")
    with pytest.raises(LosslessError, match=r"text-embedding-3-small.*not JSON"):
        make_embedder(dim=64).embed(["a"])


def test_wrong_path_hints_at_base_url(
    make_embedder: MakeEmbedder, fake_openai: FakeOpenAIServer
) -> None:
    # Forgetting the /v1 is the usual mistake with a local server.
    base = fake_openai.base_url.removesuffix("/v1")
    with pytest.raises(LosslessError, match=r"HTTP 404: Unknown request URL.*ends in /v1"):
        make_embedder(base_url=base, dim=64).embed(["a"])


# -- packaging -------------------------------------------------------------------------


def test_missing_openai_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'lossless\[openai\]'"):
        OpenAIEmbedder(base_url="http://127.0.0.1:1/v1")


def test_importing_lossless_does_not_import_openai() -> None:
    code = (
        "import sys, lossless, lossless.embed.openai; "
        "assert 'openai' not in sys.modules, 'openai imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the fake's chat endpoint (used by the LLM summarizers' tests) ----------------------


def test_fake_chat_completions(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue_chat("first canned", "second canned")
    with openai.OpenAI(base_url=fake_openai.base_url, api_key="k") as client:

        def ask(text: str) -> Any:
            return client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": text}]
            )

        first, second, third = ask("one"), ask("two"), ask("please summarise this text")
    assert first.choices[0].message.content == "first canned"
    assert first.object == "chat.completion" and first.model == "gpt-test"
    assert first.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "second canned"
    assert third.choices[0].message.content == "Digest (4 words): please summarise this text"
    assert third.usage is not None and third.usage.total_tokens > 0
    assert [r.body["messages"][0]["content"] for r in fake_openai.chat_requests()] == [
        "one",
        "two",
        "please summarise this text",
    ]
