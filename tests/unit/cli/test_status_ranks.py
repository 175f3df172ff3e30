"""`infctl status` shows how many data-parallel ranks an engine serves behind its one URL, and no role for
the router (it showed the word None)."""

from typing import Any

from rich.console import Console

from infctl.cli.status import status_table


def _process(name: str, ranks: int) -> dict[str, Any]:
    return {"name": name, "role": "both", "url": f"http://127.0.0.1:1/{name}", "status": "running",
            "healthy": True, "restarts": 0, "pid": 1, "data_parallel_size": ranks}  # fmt: skip


def test_status_table_labels_data_parallel_engines_with_their_rank_count() -> None:
    report = {"release": "r", "status": "running", "supervisor_pid": 1,
              "processes": [_process("engine-0", 2), _process("engine-1", 1)]}  # fmt: skip
    console = Console(width=200, record=True)
    console.print(status_table(report))
    lines = console.export_text().splitlines()
    assert any("engine-0" in line and "both (DP 2)" in line for line in lines)
    assert any("engine-1" in line and "both" in line and "DP" not in line for line in lines)


def test_the_router_row_has_a_blank_role_not_none() -> None:
    router = {**_process("router", 1), "role": None}
    report = {"release": "r", "status": "running", "supervisor_pid": 1, "processes": [router]}
    console = Console(width=200, record=True)
    console.print(status_table(report))
    row = next(line for line in console.export_text().splitlines() if "router" in line)
    assert "None" not in row and [c.strip() for c in row.split("│")][1:3] == ["router", ""]
