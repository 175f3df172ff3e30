import pytest

from infctl.engines import PDEndpoint
from infctl.router.pd_legs import pd_endpoint


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("http://10.0.0.5:8000", "10.0.0.5", 8000),
        ("http://[::1]:8000", "::1", 8000),
        ("http://[fd00::5]", "fd00::5", 80),
        ("https://prefill.example", "prefill.example", 443),
        ("http://prefill:9000/", "prefill", 9000),
    ],
)
def test_the_prefill_endpoint_comes_from_the_backend_url(url: str, host: str, port: int) -> None:
    assert pd_endpoint(url) == PDEndpoint(host=host, port=port)


def test_a_url_without_a_host_is_refused() -> None:
    with pytest.raises(ValueError, match="not a backend URL"):
        pd_endpoint("not-a-url")


def test_the_backends_own_bootstrap_port_reaches_both_legs_of_an_sglang_request() -> None:
    from infctl.engines import get_adapter

    sglang = get_adapter("sglang")
    body = {"model": "m", "prompt": "hi"}
    for own, sent in ((18031, 18031), (None, 8998)):  # None: the engine's default, SGLang's 8998
        endpoint = pd_endpoint("http://127.0.0.1:18002", own)
        assert endpoint == PDEndpoint(host="127.0.0.1", port=18002, bootstrap_port=own)
        legs = sglang.prefill_body(body, endpoint, room=5), sglang.decode_body(body, None, endpoint, room=5)
        for leg in legs:
            rendezvous = leg["bootstrap_host"], leg["bootstrap_port"], leg["bootstrap_room"]
            assert rendezvous == ("127.0.0.1", sent, 5)
