import sys

import pytest

from infctl.errors import LocalTargetError
from infctl.local import ProcessSpec
from infctl.local.deploy import check_installed


def spec(*argv: str, hint: str | None = None) -> ProcessSpec:
    return ProcessSpec(name="engine-0", kind="engine", argv=argv, port=18000, install_hint=hint)


def test_a_missing_python_module_is_reported_with_the_install_hint() -> None:
    engine = spec(sys.executable, "-m", "no_such_engine_module.server", hint="pip install it")
    with pytest.raises(LocalTargetError, match="'no_such_engine_module' is not installed") as err:
        check_installed(engine)
    assert err.value.hint == "pip install it"


def test_a_missing_program_is_reported() -> None:
    with pytest.raises(LocalTargetError, match="program '/no/such/engine' not found") as err:
        check_installed(spec("/no/such/engine", "--port", "1"))
    assert err.value.hint is not None and "local.simulate" in err.value.hint


def test_installed_programs_and_modules_pass() -> None:
    check_installed(spec(sys.executable, "-m", "infctl", "sim"))
    check_installed(spec("sh", "-c", "true"))
