# SPDX-License-Identifier: MIT OR Apache-2.0
"""client: a server's models, completions and counters, each failure one line."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, ClassVar, Final

import pytest

from ssm_rollback_spec.serving.client import Counters, Served, Server, base_url
from ssm_rollback_spec.serving.dialects import DIALECTS, OPENAI
from ssm_rollback_spec.serving.errors import (
    NotOpenAICompatibleError,
    ServerFailedError,
    ServerUnreachableError,
)
from ssm_rollback_spec.serving.workload import Request

if TYPE_CHECKING:
    from collections.abc import Iterator

REQUEST: Final = Request(prompt=[1, 2], max_tokens=2)


class _Canned(BaseHTTPRequestHandler):
    """Answers each path with what the test put there: (status, content type, body)."""

    answers: ClassVar[dict[str, tuple[int, str, bytes]]] = {}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        """Quiet."""

    def _answer(self) -> None:
        status, kind, body = self.server.answers.get(  # type: ignore[attr-defined]
            self.path, (404, "text/plain", b"not here")
        )
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer()


@contextlib.contextmanager
def _canned(answers: dict[str, tuple[int, str, bytes]]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    server.answers = answers  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _json(document: object, status: int = 200) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(document).encode()


def _server(url: str, timeout: float = 5.0) -> Server:
    return Server("target", "--target", url, timeout=timeout)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# base_url


@pytest.mark.parametrize(
    "given",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
    ],
)
def test_a_base_url_loses_its_trailing_slash_and_v1(given: str) -> None:
    assert base_url(given, flag="--target") == "http://127.0.0.1:8000"


def test_a_base_url_keeps_a_path_below_which_the_server_is_mounted() -> None:
    assert base_url("https://host.example/serving/v1/", flag="--target") == (
        "https://host.example/serving"
    )


@pytest.mark.parametrize("given", ["localhost:8000", "ftp://host/", "http://", "not a url"])
def test_a_base_url_that_is_not_http_with_a_host_is_one_line_naming_the_flag(given: str) -> None:
    with pytest.raises(ValueError, match=r"^--reference ") as raised:
        base_url(given, flag="--reference")
    assert str(raised.value) == f"--reference {given!r}: not an http:// or https:// URL with a host"


# /v1/models


def test_a_model_list_gives_the_models_the_owner_and_the_shared_figures() -> None:
    entry = {"id": "m", "owned_by": "llamacpp", "meta": {"n_vocab": 64}, "max_model_len": 512}
    with _canned({"/v1/models": _json({"data": [entry, {"id": "n"}]})}) as url:
        served = _server(url).served()
    assert served == Served(("m", "n"), "llamacpp", {"n_vocab": 64, "max_model_len": 512})


def test_a_url_nothing_answers_at_is_unreachable_in_one_line() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ServerUnreachableError) as raised:
        _server(url).served()
    assert (
        str(raised.value)
        == f"--target {url}: nothing answers there ([Errno 111] Connection refused)"
    )


def test_a_model_list_answered_with_an_http_error_is_not_openai() -> None:
    with _canned({}) as url, pytest.raises(NotOpenAICompatibleError) as raised:
        _server(url).served()
    assert str(raised.value) == (
        f"--target {url}: GET /v1/models answered HTTP 404, "
        "not an OpenAI-compatible server's model list"
    )


@pytest.mark.parametrize(
    "body",
    [b"<html>a page</html>", b"[]", b'{"data": [{"name": "m"}]}', b'{"data": 3}'],
    ids=["html", "list", "no id", "not a list"],
)
def test_a_model_list_of_another_shape_is_not_openai(body: bytes) -> None:
    with (
        _canned({"/v1/models": (200, "text/html", body)}) as url,
        pytest.raises(NotOpenAICompatibleError) as raised,
    ):
        _server(url).served()
    assert str(raised.value) == (
        f"--target {url}: GET /v1/models did not answer with an OpenAI model list "
        '({"data": [{"id": ...}, ...]})'
    )


def test_an_empty_model_list_is_one_line() -> None:
    with (
        _canned({"/v1/models": _json({"data": []})}) as url,
        pytest.raises(NotOpenAICompatibleError) as raised,
    ):
        _server(url).served()
    assert str(raised.value) == f"--target {url}: GET /v1/models lists no model"


# /metrics

_METRICS: Final = b"""\
# HELP vllm:spec_decode_num_draft_tokens_total Drafted.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 12.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 30.0
vllm:spec_decode_num_draft_tokens_total_created{engine="0"} 1.7e9
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 7
vllm:spec_decode_num_accepted_tokens_total{engine="1"} not-a-number
"""


def _adopted(url: str, dialect: str = "vllm", timeout: float = 5.0) -> Server:
    server = _server(url, timeout)
    server.adopt(Served(("m",), "", {}), "m", DIALECTS[dialect])
    return server


def test_counters_are_summed_over_their_labels_and_other_series_left_out() -> None:
    with _canned({"/metrics": (200, "text/plain", _METRICS)}) as url:
        counters = _adopted(url).counters()
    assert counters == Counters(drafted=42.0, accepted=7.0)


def test_counters_are_none_where_one_is_missing() -> None:
    text = b"vllm:spec_decode_num_draft_tokens_total 3\n"
    with _canned({"/metrics": (200, "text/plain", text)}) as url:
        assert _adopted(url).counters() is None


def test_counters_are_none_where_the_server_has_no_metrics_or_the_dialect_no_names() -> None:
    with _canned({}) as url:
        assert _adopted(url).counters() is None
    with _canned({"/metrics": (200, "text/plain", _METRICS)}) as url:
        assert _adopted(url, "openai").counters() is None


def test_a_server_adopts_the_dialect_its_owner_names_unless_one_is_given() -> None:
    server = _server("http://127.0.0.1:1")
    server.adopt(Served(("m",), "vllm", {}), "m", None)
    assert server.dialect is DIALECTS["vllm"]
    server.adopt(Served(("m",), "vllm", {}), "m", OPENAI)
    assert server.dialect is OPENAI


def test_the_release_is_read_where_the_dialect_says_and_empty_where_it_cannot_be() -> None:
    with _canned({"/version": _json({"version": "0.32.0"})}) as url:
        assert _adopted(url).release() == "0.32.0"
        assert _adopted(url, "llama.cpp").release() == ""
    with _canned({"/version": (200, "text/plain", b"0.32.0")}) as url:
        assert _adopted(url).release() == ""


# completions


def test_a_request_body_carries_the_dialects_fields() -> None:
    vllm = _adopted("http://127.0.0.1:1")
    assert vllm.body(REQUEST, 5) == {
        "model": "m",
        "prompt": [1, 2],
        "max_tokens": 2,
        "logprobs": 5,
        "temperature": 0.0,
        "return_tokens_as_token_ids": True,
        "ignore_eos": True,
    }
    llama = _adopted("http://127.0.0.1:1", "llama.cpp")
    assert llama.body(REQUEST, 3) == {
        "prompt": [1, 2],
        "n_predict": 2,
        "n_probs": 3,
        "temperature": 0.0,
        "return_tokens": True,
        "ignore_eos": True,
        "cache_prompt": True,
    }


def test_a_vllm_completion_gives_token_ids_and_every_listed_logprob() -> None:
    reply = {
        "choices": [
            {
                "logprobs": {
                    "tokens": ["token_id:5", "token_id:6"],
                    "token_logprobs": [-0.5, -0.25],
                    "top_logprobs": [{"token_id:5": -0.5, "token_id:9": -1.5}, None],
                }
            }
        ]
    }
    with _canned({"/v1/completions": _json(reply)}) as url:
        generation = _adopted(url).complete(REQUEST, 2, number=0)
    assert generation.tokens == ("5", "6")
    assert generation.logprobs == ({"5": -0.5, "9": -1.5}, {"6": -0.25})
    assert (generation.drafted, generation.accepted) == (None, None)


def test_a_llama_server_completion_gives_its_tokens_and_its_draft_counters() -> None:
    reply = {
        "tokens": [5, 6],
        "completion_probabilities": [
            {"id": 5, "logprob": -0.5, "top_logprobs": [{"id": 5, "logprob": -0.5}]},
            {"id": 6, "logprob": -0.25, "top_logprobs": [{"id": 8, "logprob": -0.2}]},
        ],
        "timings": {"draft_n": 4, "draft_n_accepted": 3},
    }
    with _canned({"/completion": _json(reply)}) as url:
        generation = _adopted(url, "llama.cpp").complete(REQUEST, 2, number=0)
    assert generation.tokens == ("5", "6")
    assert generation.logprobs == ({"5": -0.5}, {"8": -0.2, "6": -0.25})
    assert (generation.drafted, generation.accepted) == (4, 3)


def test_a_completion_refused_with_an_http_error_names_the_request_and_the_bodys_first_line() -> (
    None
):
    body = b'\n  {"error": "The size of tensor a (6) must match"}\nmore\n'
    with (
        _canned({"/v1/completions": (500, "application/json", body)}) as url,
        pytest.raises(ServerFailedError) as raised,
    ):
        _adopted(url).complete(REQUEST, 2, number=4)
    assert str(raised.value) == (
        'the target server answered HTTP 500 to request 4: {"error": "The size of tensor a (6) '
        'must match"}'
    )
    assert raised.value.role == "target"


def test_a_completion_without_logprobs_is_one_line_naming_the_dialect() -> None:
    reply = {"choices": [{"text": "hi"}]}
    with (
        _canned({"/v1/completions": _json(reply)}) as url,
        pytest.raises(ServerFailedError) as raised,
    ):
        _adopted(url).complete(REQUEST, 2, number=1)
    assert str(raised.value) == (
        "the target server answered request 1 with no vllm completion with logprobs ('logprobs')"
    )


def test_a_server_gone_mid_run_stopped_answering() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ServerFailedError) as raised:
        _adopted(url).complete(REQUEST, 2, number=2)
    assert str(raised.value) == (
        "the target server stopped answering at request 2 ([Errno 111] Connection refused)"
    )


def test_a_server_that_never_answers_fails_at_the_deadline() -> None:
    with socket.socket() as listening:
        # Accepted by the kernel, never answered.
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(ServerFailedError) as raised:
            _adopted(url, "openai", 0.2).complete(REQUEST, 2, number=0)
    assert str(raised.value) == "the target server did not answer request 0 within 0.2 s"
