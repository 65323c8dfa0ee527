"""The chart's defines are parts a user can read and override (templates/_job.tpl): a chart that
depends on tfk8s and defines one of them anew changes that part of every pod, and every other
object and field stays equal to `launcher render`. A helper that computes a map or a list returns
it as YAML; JSON stays only where it is the output."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml
from support import EXAMPLES_DIR
from test_helm_parity import CHART, _GoYamlLoader, assert_same_objects, helm  # noqa: F401 (helm: the fixture)

from launcher.chart import chart_values
from launcher.cluster_spec.loader import load_data
from launcher.plan.plan import plan
from launcher.render import render
from scripts import gen_chart

# A parent chart's define wins over the subchart's of the same name.
TASK_CONTAINER_OVERRIDE = """\
{{- define "tfk8s.taskContainer" -}}
- name: {{ .role }}-task
  image: team/{{ .role }}:1
{{- end }}
"""


def _parent_chart(root, templates: dict[str, str]):
    """A chart named team-training with tfk8s (this repository's) as its one dependency."""
    shutil.copytree(CHART, root / "charts" / "tfk8s")  # the files/ symlinks copied as their targets
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    chart = {
        "apiVersion": "v2",
        "name": "team-training",
        "version": "0.1.0",
        "dependencies": [{"name": "tfk8s", "version": version}],
    }
    (root / "Chart.yaml").write_text(yaml.safe_dump(chart))
    (root / "templates").mkdir()
    for name, text in templates.items():
        (root / "templates" / name).write_text(text)
    return root


@pytest.mark.helm
@pytest.mark.parametrize("workload", ["jobs", "jobset"])
def test_a_parent_chart_replaces_the_task_container_and_nothing_else(helm, tmp_path, workload):  # noqa: F811
    parent = _parent_chart(tmp_path / "team-training", {"_task.tpl": TASK_CONTAINER_OVERRIDE})
    spec = load_data({**yaml.safe_load((EXAMPLES_DIR / "ps.yaml").read_text()), "workload": workload})
    values = helm.values_file({"tfk8s": chart_values.helm_values(spec)})
    r = helm.run("template", spec.name, str(parent), "--namespace", spec.namespace, "-f", str(values))
    assert r.returncode == 0, r.stderr
    actual = [doc for doc in yaml.load_all(r.stdout, Loader=_GoYamlLoader) if doc]

    expected = render.render(plan(spec))
    replaced = 0
    for _, job in render.job_specs(expected):
        pod = job["template"]
        role = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        [task] = [c for c in pod["spec"]["containers"] if c["name"] == "tensorflow"]
        pod["spec"]["containers"][pod["spec"]["containers"].index(task)] = {
            "name": f"{role}-task",
            "image": f"team/{role}:1",
        }
        replaced += 1
    assert replaced == 4  # chief, worker, ps, evaluator
    assert_same_objects(expected, actual)


def test_helpers_return_yaml_and_json_only_where_json_is_the_output():
    """No define's result is read back as JSON; each toJson left writes JSON into the output
    (TF_CONFIG, a number's text, a flow list) under a comment that says so: in its define's
    comments, or on the line above."""
    templates = [p for p in sorted((CHART / "templates").iterdir()) if p not in gen_chart.expected_files()]
    read_back = [
        f"{p.name}:{n}" for p in templates for n, line in enumerate(p.read_text().splitlines(), 1) if "fromJson" in line
    ]
    assert not read_back, f"a define's result read back as JSON (return YAML, read it with fromYaml): {read_back}"
    unexplained = []
    for path in templates:
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            if "toJson" not in line:
                continue
            define = max((i for i in range(n) if '{{- define "' in lines[i]), default=0)
            context = "\n".join(lines[max(define - 4, 0) : n])
            if not re.search(r"/\*[^*]*JSON", context):
                unexplained.append(f"{path.name}:{n + 1}")
    assert not unexplained, f"toJson without a comment saying why the output is JSON: {unexplained}"


# What a YAML round trip could change, through every helper that returns YAML: numbers from a
# million on (Helm's float64 would print 1e+06), strings that read as numbers or booleans, empty
# strings, maps and lists, a number inside a role's own Kubernetes fields.
TYPE_EDGES = {
    "name": "edges",
    "strategy": "parameter_server",
    "roles": {
        "chief": {
            "replicas": 1,
            "resources": {"requests": {"cpu": 0.5, "memory": "1000000"}, "limits": {"cpu": 2}},
            "tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1000000}],
            "env": {"ZIP": "007", "RATE": "1e3", "YES": "y", "EMPTY": ""},
        },
        "worker": {
            "replicas": 2,
            "labels": {"rank": "10"},
            "annotations": {"flag": "true", "none": ""},
            "podTemplate": {"spec": {"dnsConfig": {"options": [{"name": "ndots", "value": "2"}], "searches": []}}},
        },
        "ps": {
            "replicas": 1,
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            "nodeSelector": {"zone": "1"},
        },
    },
    "ttlSecondsAfterFinished": 1000000,
    "activeDeadlineSeconds": 10000000,
    "terminationGracePeriodSeconds": 1000000,
    "securityContext": {"runAsUser": 1000000, "runAsGroup": 1000000, "fsGroup": 1000000},
    "labels": {"cost-center": "123"},
    "metrics": {"scrapers": []},
}


@pytest.mark.helm
def test_yaml_round_trips_keep_types(helm):  # noqa: F811
    spec = load_data(TYPE_EDGES)
    actual = helm.objects(spec.name, spec.namespace, chart_values.helm_values(spec))
    assert_same_objects(render.render(plan(spec)), actual)
    [chief] = [o for o in actual if o["metadata"]["name"] == "edges-chief"]
    pod = chief["spec"]["template"]["spec"]
    assert chief["spec"]["ttlSecondsAfterFinished"] == 1000000 and pod["securityContext"]["runAsUser"] == 1000000
    assert pod["tolerations"][0]["tolerationSeconds"] == 1000000
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "0.5", "memory": "1000000"},
        "limits": {"cpu": "2"},
    }
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (env["ZIP"], env["RATE"], env["YES"], env["EMPTY"]) == ("007", "1e3", "y", "")
    assert not [o for o in actual if o["metadata"]["name"] == "edges-metrics"]  # no scrapers: no policy
