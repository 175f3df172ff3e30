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
