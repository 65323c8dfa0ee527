"""The packages are layers, and imports only go down (docs/architecture.md).

launcher: spec -> plan -> render | status -> chart -> backends -> api -> cli. The pod scripts
(launcher/pod) run stdlib-only inside the cluster; the launcher reads what they define through
launcher/k8s_contract.py alone. The worker runs in pods too: it imports nothing of the launcher,
and the launcher takes only its contract from it: worker/contract.py, worker/exit_cause.py (why a
task exited, from its output), and worker/args.py (a local
run checks the program's arguments before it starts a task).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (package or module, layer): a module may import its own layer or a lower one. The longest
# prefix names a module's layer; a package's __main__ is an entry point, above everything.
LAYERS = {
    "launcher.pod": 0,
    "launcher.errors": 1,
    "launcher.k8s_contract": 1,
    "launcher.code_shipping": 2,
    "launcher.cluster_spec": 3,
    "launcher.plan": 4,
    "launcher.render": 5,
    "launcher.status": 5,
    "launcher.chart": 6,
    "launcher.monitoring": 6,
    "launcher.sweep": 6,
    "launcher.backends": 7,
    "launcher.api": 8,
    "launcher.cli": 9,
    "launcher.completion": 9,
    "launcher.live_view": 9,
    "worker.contract": 0,
    "worker.exit_cause": 0,
    "worker.progress": 1,
    "worker.metrics": 1,
    "worker.errors": 1,
    "worker.node_faults": 1,
    "worker.args": 1,
    "worker.context": 1,
    "worker.program": 1,
    "worker.lifecycle": 2,
    "worker.model_dir": 2,
    "worker.keras_check": 2,
    "worker.exception_check": 2,
    "worker.startup": 3,
    "worker.roles": 3,
    "worker.examples": 4,
}
ENTRY_POINT = 10
POD_DOOR = "launcher.k8s_contract"  # the one launcher module that imports launcher/pod
WORKER_CONTRACT = ("worker.contract", "worker.exit_cause", "worker.args")  # what the launcher may take from the worker


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> tuple[str, int] | None:
    if module.endswith(".__main__") or module in ("launcher", "worker"):
        return module, ENTRY_POINT
    owners = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    if not owners:
        return None
    owner = max(owners, key=len)
    return owner, LAYERS[owner]


def imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from launcher.cluster_spec import names` imports launcher.cluster_spec.names
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def import_problems(top: str) -> list[str]:
    problems = []
    for path in sorted((REPO / top).rglob("*.py")):
        module = module_name(path)
        here = layer_of(module)
        assert here is not None, f"{module}: in no layer; add its package to LAYERS in {__file__}"
        for line, target in imported_modules(path):
            there = layer_of(target)
            if there is None or not target.startswith(("launcher", "worker")):
                continue
            where = f"{path.relative_to(REPO)}:{line}: {module} imports {target}"
            if there[1] > here[1]:
                problems.append(f"{where}, a higher layer ({there[0]})")
            if there[0] == "launcher.pod" and not here[0] == "launcher.pod" and module != POD_DOOR:
                problems.append(f"{where}: pod code, read it through {POD_DOOR}")
            if top == "worker" and target.startswith("launcher"):
                problems.append(f"{where}: the worker imports nothing of the launcher")
            if top == "launcher" and target.startswith("worker") and there[0] not in WORKER_CONTRACT:
                problems.append(f"{where}: the launcher takes only {WORKER_CONTRACT} from the worker")
    return problems


def test_launcher_imports_only_go_down():
    assert import_problems("launcher") == []


def test_worker_imports_only_go_down():
    assert import_problems("worker") == []


def test_an_upward_import_is_caught(tmp_path, monkeypatch):
    """The rule can fail: a spec module importing the plan is reported with file:line."""
    fake_repo = tmp_path
    (fake_repo / "launcher" / "cluster_spec").mkdir(parents=True)
    (fake_repo / "launcher" / "cluster_spec" / "bad.py").write_text(
        "from launcher.plan import plan\nfrom launcher.pod.supervise import STATE_DIR\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", fake_repo)
    problems = import_problems("launcher")
    assert problems == [
        "launcher/cluster_spec/bad.py:1: launcher.cluster_spec.bad imports launcher.plan.plan, a higher layer "
        "(launcher.plan)",
        "launcher/cluster_spec/bad.py:2: launcher.cluster_spec.bad imports launcher.pod.supervise.STATE_DIR: pod "
        "code, read it through launcher.k8s_contract",
    ]


def test_no_flat_package_of_more_than_twelve_modules():
    crowded = {}
    for top in ("launcher", "worker"):
        for folder in [REPO / top, *(p for p in (REPO / top).rglob("*") if p.is_dir())]:
            modules = [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            if len(modules) > 12:
                crowded[str(folder.relative_to(REPO))] = len(modules)
    assert crowded == {}


TERMINAL_UI = ("rich",)  # drawing on a terminal is the CLI's business


def terminal_ui_problems() -> list[str]:
    problems = []
    for path in sorted((REPO / "launcher").rglob("*.py")):
        module = module_name(path)
        for line, target in imported_modules(path):
            if target.split(".")[0] in TERMINAL_UI and layer_of(module)[1] < LAYERS["launcher.cli"]:
                problems.append(f"{path.relative_to(REPO)}:{line}: {module} imports {target}: move it next to the CLI")
    return problems


def test_only_the_cli_layer_draws_on_a_terminal():
    """The status layer reads objects and the backends write plain lines; the live panel (rich)
    is the CLI's (launcher/live_view.py)."""
    assert terminal_ui_problems() == []


def test_the_runtime_package_holds_nothing_only_scripts_or_tests_use():
    """Every launcher module is an entry point (a __main__) or imported by another launcher
    module; a generator that only scripts/ run lives in scripts/, out of the installed package."""
    modules = {module_name(p): p for p in (REPO / "launcher").rglob("*.py")}
    imported = set()
    for path in modules.values():
        for _, target in imported_modules(path):
            parts = target.split(".")
            imported.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    unused = [
        str(path.relative_to(REPO))
        for module, path in sorted(modules.items())
        if module not in imported and not module.endswith(".__main__")
    ]
    assert unused == [], f"imported by no launcher module: {unused}; move them to scripts/ (or import them)"


KUBERNETES_ADDRESS = ("names.hostname", "names.service", ".svc")  # a pod's DNS name and its parts


def kubernetes_address_problems() -> list[str]:
    problems = []
    for path in sorted((REPO / "launcher" / "plan").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            text = ast.unparse(node) if isinstance(node, (ast.Attribute, ast.Constant, ast.JoinedStr)) else ""
            if any(form in text for form in KUBERNETES_ADDRESS):
                problems.append(f"{path.relative_to(REPO)}:{node.lineno}: {text[:80]}")
    return sorted(set(problems))


def test_the_plan_leaves_the_address_form_to_the_backends():
    """The plan says which tasks there are and their port; a Kubernetes DNS name
    (<job>-<index>.<service>.<namespace>.svc) is render's (render/tfconfig.py), 127.0.0.1 the
    local backend's."""
    assert kubernetes_address_problems() == []
